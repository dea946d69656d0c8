"""Which kernel the vm rung boots: the small guest kernel (``small_kernel.py``) or Debian's packaged one.

``sandbox.drivers.qemu.kernel``: ``small`` (it must be built: ``evalsi sandbox kernel build``), ``debian`` (the
newest ``linux-image-amd64`` in /boot, or ``kernel_version``), or ``auto`` (the default: the small kernel when the
cache holds the build for this host's source, fragment and compiler, else Debian's).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evalsi.sandbox.vm.kernel import GuestKernel, KernelMissing, find_kernel
from evalsi.sandbox.vm.small_kernel import SmallKernel, find_small_kernel

__all__ = ["KERNEL_CHOICES", "BootKernel", "choose_kernel"]

KERNEL_CHOICES = ("auto", "small", "debian")


@dataclass(frozen=True)
class BootKernel:
    """The chosen kernel: exactly one of ``small`` and ``debian``; ``why`` says why auto passed the small one by."""

    small: SmallKernel | None = None
    debian: GuestKernel | None = None
    why: str = ""

    @property
    def label(self) -> str:
        """What the isolation report and the probe name: ``small 6.1.192 <digest>`` or ``debian 6.1.0-57-amd64``."""
        if self.small is not None:
            return self.small.label
        assert self.debian is not None
        return f"debian {self.debian.version}"


def choose_kernel(choice: str, vm_cache: Path, debian_version: str | None = None) -> BootKernel:
    """The kernel ``choice`` names; ``KernelMissing`` says what to build or install."""
    if choice not in KERNEL_CHOICES:
        raise KernelMissing(f"sandbox.drivers.qemu.kernel: {choice!r}; accepted: {', '.join(KERNEL_CHOICES)}")
    if choice != "debian":
        try:
            small = find_small_kernel(vm_cache)
        except KernelMissing as exc:
            if choice == "small":
                raise
            return BootKernel(debian=find_kernel(version=debian_version), why=str(exc))
        if small is not None:
            return BootKernel(small=small)
        if choice == "small":
            raise KernelMissing(f"sandbox.drivers.qemu.kernel is small, but no small guest kernel is built in "
                                f"{vm_cache / 'kernel'} for this host's kernel source and compiler; build it with "
                                "`evalsi sandbox kernel build` (minutes, once)")
        return BootKernel(debian=find_kernel(version=debian_version),
                          why="no small guest kernel built (`evalsi sandbox kernel build`)")
    return BootKernel(debian=find_kernel(version=debian_version))
