"""The ``qemu`` rung (level vm): a QEMU microVM under TCG per sandbox, restored from a snapshot, with a warm pool.

First use builds (and caches by digest, under ``<sandbox cache_dir>/vm``) the uncompressed kernel, the initramfs and
the read-only runtime disk, then cold-boots one guest and saves it as the template snapshot. Every sandbox after
that is a restore of the template (a fraction of a second instead of a boot of seconds), refreshed with fresh
entropy, the time and its own workspace size; ``warm`` restored guests wait ready so a create costs nothing.

A guest has no network device. With an allowlist the session gets the logging egress proxy on the host's loopback
(``attach_loopback``, one for its life), and each machine it runs on bridges its ``evalsi.egress`` port to it
(``egress_bridge.py``); the refresh starts the guest's relay on its 127.0.0.1:3128, or stops one a restored state had.

Options (``sandbox.drivers.qemu``): ``binary`` (qemu-system-x86_64), ``memory_mib`` (guest RAM, 1024), ``warm``
(guests kept ready, 1; 0 for none), ``snapshots`` (true; false cold-boots every sandbox), ``boot_timeout`` (seconds,
60), ``busybox`` (/usr/bin/busybox), ``kernel`` (``auto``: the small guest kernel when built, else Debian's;
``small``; ``debian``: see ``boot_kernel.py``), ``kernel_version`` (Debian's kernel: the newest in /boot).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evalsi.errors import BadInputError, EvalsiError
from evalsi.sandbox.checks import check_bound
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.egress_attach import EgressAttachment, attach_loopback
from evalsi.sandbox.model import IsolationReport, Level, ProbeVerdict, SandboxSpec
from evalsi.sandbox.probing import true_fails
from evalsi.sandbox.rootfs import RootCache
from evalsi.sandbox.vm.boot_kernel import KERNEL_CHOICES, choose_kernel
from evalsi.sandbox.vm.egress_bridge import EgressBridge
from evalsi.sandbox.vm.images import build_image_disk, build_initramfs, build_runtime_disk
from evalsi.sandbox.vm.kernel import extract_vmlinux
from evalsi.sandbox.vm.protocol import AgentGone, b64, read_frame, write_frame
from evalsi.sandbox.vm.qemu import Machine, MachineConfig, MachineFailed, host_tsc_khz
from evalsi.sandbox.vm.session import Restored, VmSession

__all__ = ["KEEP", "NAME", "VmDriver", "VmOptions", "isolation_report", "parse_options", "prune_cache",
           "sweep_stale_run_dirs"]

NAME = "qemu"
# Guest RAM kept for the guest kernel and the agent: an execution's memory bound is at most the rest.
_RESERVED_MIB = 192
# A guest never sees the host's /usr: a host root (trusted code) gets the runtime image too, as the default does.
_RUNTIME_ROOTS = ("runtime", "host")
_OPTION_KEYS = ("binary", "memory_mib", "warm", "snapshots", "boot_timeout", "busybox", "kernel", "kernel_version")


@dataclass(frozen=True)
class VmOptions:
    binary: str = "qemu-system-x86_64"
    memory_mib: int = 1024
    warm: int = 1
    snapshots: bool = True
    # A cold boot costs about 5 CPU seconds under TCG; on a shared 2-core machine at load 10 it took up to 22 s.
    boot_timeout_s: float = 60.0
    busybox: str = "/usr/bin/busybox"
    kernel: str = "auto"
    kernel_version: str | None = None


def parse_options(raw: Mapping[str, Any], where: str = f"sandbox.drivers.{NAME}") -> VmOptions:
    for key in raw:
        if key not in _OPTION_KEYS:
            raise BadInputError(f"{where}.{key}: unknown option; accepted: {', '.join(_OPTION_KEYS)}")
    options = VmOptions()
    memory = check_bound(raw.get("memory_mib", options.memory_mib), f"{where}.memory_mib", 320, 64 * 1024)
    warm = check_bound(raw.get("warm", options.warm), f"{where}.warm", 0, 64)
    timeout = raw.get("boot_timeout", options.boot_timeout_s)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not 1 <= timeout <= 600:
        raise BadInputError(f"{where}.boot_timeout: {timeout!r}; accepted: seconds from 1 to 600")
    snapshots = raw.get("snapshots", True)
    if not isinstance(snapshots, bool):
        raise BadInputError(f"{where}.snapshots: {snapshots!r}; accepted: true or false")
    kernel = raw.get("kernel", options.kernel)
    if kernel not in KERNEL_CHOICES:
        raise BadInputError(f"{where}.kernel: {kernel!r}; accepted: {', '.join(KERNEL_CHOICES)}")
    strings = {}
    for key in ("binary", "busybox", "kernel_version"):
        value = raw.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise BadInputError(f"{where}.{key}: {value!r}; accepted: a non-empty string")
        strings[key] = value
    return VmOptions(binary=strings["binary"] or options.binary, memory_mib=memory, warm=warm, snapshots=snapshots,
                     boot_timeout_s=float(timeout), busybox=strings["busybox"] or options.busybox, kernel=kernel,
                     kernel_version=strings["kernel_version"])


def isolation_report(spec: SandboxSpec, memory_mib: int, kernel: str) -> IsolationReport:
    """What the vm rung enforces for ``spec`` on a guest booted with ``kernel`` (its label; pure)."""
    resources = spec.resources
    cap = memory_cap(memory_mib)
    memory = min(resources.memory_bytes, cap)
    bounds = {
        "kernel": f"separate guest kernel: {kernel} (QEMU microvm, TCG: no KVM)",
        "memory": f"guest cgroup v2 memory.max={memory} (guest RAM {memory_mib} MiB)",
        "pids": f"guest cgroup v2 pids.max={resources.pids}",
        "network": _network(spec),
        # A host root gets the runtime image too: a guest never sees the host's /usr.
        "root": ("runtime image read-only (the guest's runtime disk)" if spec.root.kind in _RUNTIME_ROOTS
                 else f"{spec.root.kind} {spec.root.path} read-only (a disk of its own)"),
        "filesystem": ("runtime image as / (read-only disk); /workspace and /tmp are guest tmpfs"
                       if spec.root.kind in _RUNTIME_ROOTS
                       else f"image root {spec.root.path} (read-only disk, chroot); /workspace and /tmp are guest "
                            "tmpfs"),
        "disk": f"workspace tmpfs size={workspace_bytes(spec, memory_mib)}, RLIMIT_FSIZE={resources.disk_bytes}",
        "user": "uid 65534, no capabilities, new session",
        "timeout": f"{resources.timeout_s:g}s wall clock (guest agent; the host discards a stuck guest)",
        "output": f"{resources.output_bytes} bytes per stream",
    }
    if resources.cpu_seconds is not None:
        bounds["cpu"] = f"RLIMIT_CPU={resources.cpu_seconds}"
    if spec.file_access == "read-only":
        bounds["filesystem"] = "read-only runtime disk as /; /workspace read-only (own mount namespace); /tmp tmpfs"
    not_enforced: tuple[str, ...] = ()
    if resources.memory_bytes > cap:
        not_enforced += (f"memory: {resources.memory_bytes} asked, the guest allows {cap}",)
    return IsolationReport(NAME, Level.VM, "partial" if not_enforced else "full", bounds, not_enforced,
                           requested=spec.min_isolation)


def _network(spec: SandboxSpec) -> str:
    if spec.network.denied:
        return "no network device"
    listed = ",".join(f"{endpoint.host}:{endpoint.port}" for endpoint in spec.network.allow)
    # "logging proxy" is what session_egress_log looks for to fetch a remote session's log.
    return (f"allowlist via egress proxy (virtio-serial): no network device; the guest's 127.0.0.1:3128 relays to "
            f"the logging proxy on the host, to {listed} only")


def memory_cap(memory_mib: int) -> int:
    return (memory_mib - _RESERVED_MIB) * 1024 * 1024


def workspace_bytes(spec: SandboxSpec, memory_mib: int) -> int:
    """The workspace tmpfs lives in guest RAM: at most half of what executions may use, so filling it cannot starve
    the guest kernel (a stricter bound than asked, so enforcement stays full)."""
    return min(spec.resources.disk_bytes, memory_cap(memory_mib) // 2)


def check_spec(spec: SandboxSpec) -> None:
    workdir = os.path.normpath(spec.workdir)
    if workdir != spec.workdir.rstrip("/") or (workdir != "/workspace" and not workdir.startswith("/workspace/")):
        raise BadInputError(f"workdir: {spec.workdir!r}; the {NAME} rung's writable directory is /workspace "
                            "(accepted: /workspace or a directory beneath it)")


class VmDriver:
    name = NAME
    level = Level.VM

    def __init__(self, config: SandboxConfig | None = None, *, options: VmOptions | None = None) -> None:
        config = config or SandboxConfig()
        self.options = options or parse_options(config.driver_options(NAME))
        self.cache_dir = config.cache_dir / "vm"
        self.roots = RootCache(config.cache_dir, config.images)
        self.egress_settings = config.egress
        self._machine_config: MachineConfig | None = None
        self._templates: dict[str, Path] = {}  # by machine identity: one per image root, and the default
        self._setup_lock = asyncio.Lock()
        self._warm: list[Machine] = []
        self._refill: asyncio.Task[None] | None = None
        self._closed = False

    async def probe(self) -> ProbeVerdict:
        spec = SandboxSpec(min_isolation=Level.VM)
        try:
            session = await self.create(spec)
        except EvalsiError as exc:
            return ProbeVerdict(NAME, Level.VM, False, reason=str(exc)[:1000])
        except MachineFailed as exc:
            return ProbeVerdict(NAME, Level.VM, False, reason=f"microVM failed: {exc}"[:1000])
        failure = await true_fails(session, timeout_s=30)
        if failure:
            return ProbeVerdict(NAME, Level.VM, False, reason=f"`true` in the microVM: {failure}"[:1000])
        return ProbeVerdict(NAME, Level.VM, True, reason=f"kernel: {(await self._config()).kernel}")

    async def create(self, spec: SandboxSpec) -> VmSession:
        check_spec(spec)
        if self._closed:
            raise MachineFailed("the qemu driver is closed")
        config = await self._config()
        # An allowlist: the session's logging proxy on the host's loopback; each machine it runs on (a restore
        # makes a new one) relays the guest's connections to it over its egress port.
        egress = await attach_loopback(spec.network.allow, self.egress_settings) if spec.network.allow else None
        try:
            if spec.root.kind in _RUNTIME_ROOTS:
                machine = self._warm.pop(0) if self._warm else await self._new_machine(config)
                self._schedule_refill()
            else:  # an image root: its own disk and template, no warm pool
                config = replace(config, image=await asyncio.to_thread(self._image_disk, spec))
                machine = await self._new_machine(config)
            bridge = await self._refreshed(machine, spec, egress)
        except BaseException:
            if egress is not None:
                await egress.close()
            raise

        async def restore(state: Path) -> Restored:  # load_state: the session's own state, refreshed like a clone
            restored = await self._restore(config, state)
            return restored, await self._refreshed(restored, spec, egress)

        return VmSession(machine, spec, isolation_report(spec, self.options.memory_mib, config.kernel),
                         memory_cap=memory_cap(self.options.memory_mib), restore=restore, egress=egress,
                         bridge=bridge)

    def _image_disk(self, spec: SandboxSpec) -> Path:
        root = self.roots.resolve(spec.root)
        assert root is not None
        return build_image_disk(root, self.cache_dir)

    async def close(self) -> None:
        """Stops the warm guests and the refill; sessions already handed out stay the caller's."""
        self._closed = True
        if self._refill is not None:
            self._refill.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._refill
        warm, self._warm = self._warm, []
        for machine in warm:
            await _stop(machine)

    # --- machines ---

    async def _new_machine(self, config: MachineConfig) -> Machine:
        if not self.options.snapshots:
            return await Machine.launch(config, _run_dir())
        template = await self._ensure_template(config)
        try:
            return await self._restore(config, template)
        except MachineFailed:
            template.unlink(missing_ok=True)  # a template this QEMU cannot load is rebuilt on next use
            self._templates.pop(config.identity(), None)
            raise

    async def _restore(self, config: MachineConfig, state: Path) -> Machine:
        return await Machine.launch(config, _run_dir(), incoming=state)

    async def _refreshed(self, machine: Machine, spec: SandboxSpec,
                         egress: EgressAttachment | None) -> EgressBridge | None:
        """Refreshes ``machine`` and, with ``egress``, bridges its egress port to that proxy (the bridge);
        the machine is killed (``MachineFailed``) when either fails."""
        bridge = None
        try:
            if egress is not None:
                bridge = await EgressBridge.connect(machine.run_dir / "egress.sock", egress.port,
                                                   self.egress_settings.max_connections)
            await self._refresh(machine, spec, bridge)
            if bridge is not None:
                await bridge.start()
        except (MachineFailed, AgentGone, OSError, TimeoutError) as exc:
            diagnostics = machine.diagnostics()
            if bridge is not None:
                await bridge.close()
            await machine.kill()
            raise MachineFailed(f"microVM refresh failed: {exc!r}{diagnostics}") from exc
        except BaseException:  # cancelled mid-refresh: neither the machine nor its bridge outlives the create
            if bridge is not None:
                await asyncio.shield(bridge.close())
            await asyncio.shield(machine.kill())
            raise
        return bridge

    async def _refresh(self, machine: Machine, spec: SandboxSpec, bridge: EgressBridge | None) -> None:
        assert machine.agent_reader is not None and machine.agent_writer is not None
        async with asyncio.timeout(30):
            await write_frame(machine.agent_writer, {
                "op": "refresh", "seed": b64(secrets.token_bytes(64)), "time": time.time(),
                "workspace": workspace_bytes(spec, self.options.memory_mib),
                "egress": bridge.guest_request() if bridge is not None else None})
            reply = await read_frame(machine.agent_reader)
        if "error" in reply:
            raise MachineFailed(f"guest agent refused refresh: {reply['error']}")

    def _schedule_refill(self) -> None:
        if self.options.warm <= 0 or self._closed or (self._refill is not None and not self._refill.done()):
            return
        self._refill = asyncio.ensure_future(self._fill())

    async def _fill(self) -> None:
        while not self._closed and len(self._warm) < self.options.warm:
            try:
                machine = await self._new_machine(await self._config())
            except (MachineFailed, EvalsiError):
                return  # the next create boots its own and reports the failure to its caller
            if self._closed:
                await _stop(machine)
                return
            self._warm.append(machine)

    async def _config(self) -> MachineConfig:
        if self._machine_config is None:
            async with self._setup_lock:
                if self._machine_config is None:
                    self._machine_config = await asyncio.to_thread(self._build)
        return self._machine_config

    def _build(self) -> MachineConfig:
        sweep_stale_run_dirs()
        binary = shutil.which(self.options.binary)
        if binary is None:
            raise MachineFailed(f"{self.options.binary} not found; install it with "
                                "`apt-get install -y --no-install-recommends qemu-system-x86`")
        busybox = Path(self.options.busybox)
        if not busybox.is_file():
            raise MachineFailed(f"{busybox}: no static busybox for the guest's initramfs; install it with "
                                "`apt-get install -y busybox-static`")
        with busybox.open("rb") as f:
            if b"ld-linux" in f.read(4096):  # an ELF interpreter: the guest's initramfs has no libc to load it
                raise MachineFailed(f"{busybox}: a dynamically linked busybox; the guest's initramfs needs the "
                                    "static one (`apt-get install -y busybox-static`)")
        kernel = choose_kernel(self.options.kernel, self.cache_dir, self.options.kernel_version)
        if kernel.small is not None:  # drivers built in: an initramfs without modules
            vmlinux, initramfs = kernel.small.path, build_initramfs(None, busybox, self.cache_dir)
        else:
            assert kernel.debian is not None
            vmlinux = extract_vmlinux(kernel.debian.vmlinuz, self.cache_dir)
            initramfs = build_initramfs(kernel.debian, busybox, self.cache_dir)
        return MachineConfig(
            qemu=binary, vmlinux=vmlinux, initramfs=initramfs,
            disk=build_runtime_disk(busybox, self.cache_dir), memory_mib=self.options.memory_mib,
            tsc_khz=host_tsc_khz(), boot_timeout_s=self.options.boot_timeout_s, kernel=kernel.label,
            acpi=kernel.small is None)

    async def _ensure_template(self, config: MachineConfig) -> Path:
        known = self._templates.get(config.identity())
        if known is not None and known.is_file():
            return known
        async with self._setup_lock:
            st = os.stat(config.qemu)
            key = hashlib.sha256(f"{config.identity()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:24]
            path = self.cache_dir / f"template-{key}.state"
            if not path.is_file():
                machine = await Machine.launch(config, _run_dir())
                try:
                    partial = path.with_name(f".{path.name}.{os.getpid()}")
                    await machine.save(partial)
                    os.replace(partial, path)
                finally:
                    await _stop(machine)
                await asyncio.to_thread(prune_cache, self.cache_dir)
            self._templates[config.identity()] = path
            return path


_RUN_PREFIX = "evalsi-vm-"
# Artifacts kept per kind in the cache (the newest): a new kernel, agent or option makes new ones, and each old
# template is about 90 MB. A guest already running keeps its files open, so removing them does not disturb it.
KEEP = {"template-*.state": 6, "runtime-*.ext4": 3, "initramfs-*.cpio": 3, "vmlinux-*": 2, "image-*.ext4": 8}


def prune_cache(cache_dir: Path, keep: Mapping[str, int] = KEEP) -> list[Path]:
    """Removes all but the newest artifacts of each kind; the removed ones."""
    removed = []
    for pattern, count in keep.items():
        found = sorted(cache_dir.glob(pattern), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        for path in found[count:]:
            with contextlib.suppress(OSError):
                path.unlink()
                removed.append(path)
    return removed


def _run_dir() -> Path:
    # Short, under /tmp: Unix socket paths are limited to 107 bytes. The owner's pid is in the name, so a process
    # that ended without closing its driver (a CLI, a crash: its QEMUs die with it) has its directories swept.
    return Path(tempfile.mkdtemp(prefix=f"{_RUN_PREFIX}{os.getpid()}-"))


def sweep_stale_run_dirs(root: Path | None = None) -> list[Path]:
    """Removes run directories whose owning process is gone; the removed ones."""
    removed = []
    for path in Path(root or tempfile.gettempdir()).glob(f"{_RUN_PREFIX}*-*"):
        owner = path.name.removeprefix(_RUN_PREFIX).partition("-")[0]
        if not owner.isdigit() or Path(f"/proc/{owner}").exists() or not path.is_dir() or path.is_symlink():
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


async def _stop(machine: Machine) -> None:
    await machine.kill()
