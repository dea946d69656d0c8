"""The vm rung: QEMU microVMs under TCG (``qemu``) and Firecracker's probe (``firecracker``), see docs/sandbox.md."""

from evalsi.sandbox.vm.driver import VmDriver

__all__ = ["VmDriver"]
