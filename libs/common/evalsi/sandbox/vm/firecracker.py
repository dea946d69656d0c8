"""The ``firecracker`` rung (level vm): D6's first choice where ``/dev/kvm`` is real hardware virtualization.

This build probes it and says why it is unavailable; it never runs code. Firecracker needs KVM backed by the CPU's
own virtualization (vmx or svm, on bare metal or a nested-virtualization instance). On hosts whose ``/dev/kvm`` is
a paravirtual hypervisor (PVM, the ``kvm_pvm`` module) stock guest kernels fail with MSR and emulation errors, so
the ``qemu`` rung (TCG) is the microVM there. The reasons are computed from what the host shows, purely.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalsi.errors import BadInputError
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.model import Level, ProbeVerdict, SandboxSpec, SandboxUnavailable
from evalsi.sandbox.vm.session import VmSession

__all__ = ["NAME", "FirecrackerDriver", "HostFacts", "host_facts", "unavailable_reasons"]

NAME = "firecracker"


@dataclass(frozen=True)
class HostFacts:
    binary: str | None  # the firecracker executable found, if any
    kvm_exists: bool
    kvm_usable: bool  # opens read-write
    cpu_flags: frozenset[str]
    kvm_modules: frozenset[str]  # kvm_intel, kvm_amd, kvm_pvm ... as /sys/module shows them


def host_facts(binary: str = "firecracker", kvm: Path = Path("/dev/kvm"), sys_module: Path = Path("/sys/module"),
               cpuinfo: Path = Path("/proc/cpuinfo")) -> HostFacts:
    flags: frozenset[str] = frozenset()
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                flags = frozenset(line.partition(":")[2].split())
                break
    except OSError:
        pass
    modules = frozenset(name for name in ("kvm_intel", "kvm_amd", "kvm_pvm") if (sys_module / name).exists())
    return HostFacts(binary=shutil.which(binary), kvm_exists=kvm.exists(), kvm_usable=os.access(kvm, os.R_OK | os.W_OK),
                     cpu_flags=flags, kvm_modules=modules)


def unavailable_reasons(facts: HostFacts) -> list[str]:
    """Why Firecracker cannot run here (empty: the host would allow it)."""
    reasons = []
    if not facts.kvm_exists:
        reasons.append("no /dev/kvm")
    elif not facts.kvm_usable:
        reasons.append("/dev/kvm is not readable and writable by this user")
    elif "kvm_pvm" in facts.kvm_modules:
        reasons.append("/dev/kvm is a paravirtual hypervisor (kvm_pvm), not hardware virtualization: stock guest "
                       "kernels fail under it (use the qemu rung)")
    elif not facts.cpu_flags & {"vmx", "svm"}:
        reasons.append("the CPU shows no hardware virtualization (no vmx or svm flag in /proc/cpuinfo)")
    if facts.binary is None:
        reasons.append("no firecracker binary on PATH")
    return reasons


class FirecrackerDriver:
    name = NAME
    level = Level.VM

    def __init__(self, config: SandboxConfig | None = None) -> None:
        options: Mapping[str, Any] = (config or SandboxConfig()).driver_options(NAME)
        for key in options:
            if key != "binary":
                raise BadInputError(f"sandbox.drivers.{NAME}.{key}: unknown option; accepted: binary")
        self.binary = str(options.get("binary") or "firecracker")

    async def probe(self) -> ProbeVerdict:
        reasons = unavailable_reasons(host_facts(self.binary))
        if not reasons:
            reasons = ["the firecracker driver is not built into this release: boots go to the qemu rung"]
        return ProbeVerdict(NAME, Level.VM, False, reason="; ".join(reasons))

    async def create(self, spec: SandboxSpec) -> VmSession:
        raise SandboxUnavailable(spec.min_isolation, (await self.probe(),))
