"""Per-execution cgroups: the group-wide bounds (memory, pids), the OOM verdict, and the kill of whatever an
execution left running.

Which hierarchy applies is discovered, not assumed (INFRA.md: this machine's v2 mount has no memory or pids
controller, its v1 hierarchies do): cgroup v2 where the memory and pids controllers are delegated to our own
cgroup, else the v1 ``memory`` and ``pids`` hierarchies where they are writable, else none (rlimits are then the only
bound, and the isolation report says so). A v2 group without controllers still gives ``cgroup.kill`` and
``cpu.stat``. Groups are created as children of this process's own cgroups, so no other process's group is touched.

An execution's processes are in its groups before the sandboxed program runs, so nothing it forks escapes them:
either the child joins them itself before it executes (``join_cgroups`` in a pre-exec hook), or, cheaper, a wrapper
that waits for its caller (bwrap's ``--block-fd``) is moved in from outside. ``CgroupPool`` reuses emptied groups,
because the first process to join a new group waits for the kernel to set it up.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import uuid
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CgroupLayout", "CgroupPool", "ExecutionCgroups", "discover_layout", "join_cgroups"]

_PROC_SELF = Path("/proc/self")
_PREFIX = "evalsi-sbx-"


@dataclass(frozen=True)
class CgroupLayout:
    """The parent directories an execution's groups are made in; None where that hierarchy is not usable."""

    v2_limits: Path | None = None  # v2 with memory and pids delegated
    v2_plain: Path | None = None  # v2 without controllers: cgroup.kill and cpu.stat only
    v1_memory: Path | None = None
    v1_pids: Path | None = None

    @property
    def limits(self) -> str:
        if self.v2_limits is not None:
            return "cgroup v2"
        if self.v1_memory is not None or self.v1_pids is not None:
            return "cgroup v1"
        return "none"


def discover_layout(setting: str = "auto") -> CgroupLayout:
    """Where this process may make execution groups. ``setting``: ``auto``, ``none`` or a delegated v2 directory."""
    if setting == "none":
        return CgroupLayout()
    mounts = _cgroup_mounts()
    own = _own_paths()
    v2_mount = mounts.get("cgroup2")
    v2_own = _join(v2_mount, own.get("", "/")) if v2_mount else None
    if setting.startswith("/"):
        explicit = Path(setting)
        if _delegated_v2(explicit):
            return CgroupLayout(v2_limits=explicit, v2_plain=explicit)
        return CgroupLayout(v2_plain=explicit if _writable(explicit) else None)
    if v2_own is not None and _delegated_v2(v2_own):
        return CgroupLayout(v2_limits=v2_own, v2_plain=v2_own)
    # The hierarchy's root has no cgroup.kill of its own, but its children do (Linux >= 5.14): checked on the child.
    plain = v2_own if v2_own is not None and _writable(v2_own) and (v2_own / "cgroup.procs").exists() else None
    memory = _v1_parent(mounts, own, "memory")
    pids = _v1_parent(mounts, own, "pids")
    return CgroupLayout(v2_plain=plain, v1_memory=memory, v1_pids=pids)


class ExecutionCgroups:
    """The groups of one execution, made by ``create`` and removed by ``close`` (which kills what is left)."""

    def __init__(self, layout: CgroupLayout, name: str) -> None:
        self.layout = layout
        self.name = name
        self.dirs: list[Path] = []
        self.bounds: dict[str, str] = {}
        self._v2: Path | None = None
        self._memory: Path | None = None
        self._pids: Path | None = None
        # Counters at the start of this execution: a group reused from a pool carries its earlier ones.
        self._baseline = (0, 0, 0)

    @classmethod
    def create(cls, layout: CgroupLayout, *, memory_bytes: int, pids: int,
               cpu_quota: float | None = None) -> ExecutionCgroups:
        """Groups with the limits set; a hierarchy that refuses (EACCES, EBUSY) is left out and reported so."""
        groups = cls(layout, f"{_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}")
        try:
            groups._make(memory_bytes, pids, cpu_quota)
        except BaseException:
            groups._remove_dirs()
            raise
        return groups

    def _make(self, memory_bytes: int, pids: int, cpu_quota: float | None) -> None:
        layout = self.layout
        if layout.v2_limits is not None:
            group = self._mkdir(layout.v2_limits)
            if group is not None:
                self._v2 = group
                _write(group / "memory.max", str(memory_bytes))
                with contextlib.suppress(OSError):  # absent without swap accounting
                    _write(group / "memory.swap.max", "0")
                _write(group / "memory.oom.group", "1")
                _write(group / "pids.max", str(pids))
                if cpu_quota is not None and (group / "cpu.max").exists():
                    _write(group / "cpu.max", f"{int(cpu_quota * 100_000)} 100000")
                    self.bounds["cpu"] = f"cgroup v2 cpu.max={int(cpu_quota * 100_000)} 100000"
                self._memory = self._pids = group
                self.bounds["memory"] = f"cgroup v2 memory.max={memory_bytes} (no swap, group killed on OOM)"
                self.bounds["pids"] = f"cgroup v2 pids.max={pids}"
                return
        if layout.v2_plain is not None:
            self._v2 = self._mkdir(layout.v2_plain)
            if self._v2 is not None and not (self._v2 / "cgroup.kill").exists():
                self._v2.rmdir()  # a kernel before 5.14: the v1 groups are killed pid by pid
                self.dirs.remove(self._v2)
                self._v2 = None
        if layout.v1_memory is not None:
            group = self._mkdir(layout.v1_memory)
            if group is not None:
                _write(group / "memory.limit_in_bytes", str(memory_bytes))
                with contextlib.suppress(OSError):  # absent without swap accounting
                    _write(group / "memory.memsw.limit_in_bytes", str(memory_bytes))
                self._memory = group
                self.bounds["memory"] = f"cgroup v1 memory.limit_in_bytes={memory_bytes} (no swap)"
        if layout.v1_pids is not None:
            group = self._mkdir(layout.v1_pids)
            if group is not None:
                _write(group / "pids.max", str(pids))
                self._pids = group
                self.bounds["pids"] = f"cgroup v1 pids.max={pids}"

    def _mkdir(self, parent: Path) -> Path | None:
        group = parent / self.name
        try:
            group.mkdir()
        except OSError:
            return None
        self.dirs.append(group)
        return group

    @property
    def join_paths(self) -> tuple[str, ...]:
        """The ``cgroup.procs`` files the child writes its pid to before it executes."""
        return tuple(str(group / "cgroup.procs") for group in self.dirs)

    def _counters(self) -> tuple[int, int, int]:
        """(OOM kills, forks refused at pids.max, CPU microseconds) since the group was made."""
        oom = 0
        if self._memory is not None and self._memory == self._v2:
            events = _read_keyed(self._memory / "memory.events")
            oom = events.get("oom_kill", 0) + events.get("oom_group_kill", 0)
        elif self._memory is not None:
            oom = _read_keyed(self._memory / "memory.oom_control").get("oom_kill", 0)
        refused = _read_keyed(self._pids / "pids.events").get("max", 0) if self._pids is not None else 0
        cpu = _read_keyed(self._v2 / "cpu.stat").get("usage_usec", 0) if self._v2 is not None else 0
        return oom, refused, cpu

    def oom_killed(self) -> bool:
        return self._counters()[0] > self._baseline[0]

    def pids_exhausted(self) -> bool:
        """Whether a fork or clone was refused at pids.max."""
        return self._counters()[1] > self._baseline[1]

    def cpu_seconds(self) -> float:
        return (self._counters()[2] - self._baseline[2]) / 1e6

    def _reuse(self, memory_bytes: int, pids: int) -> None:
        """Set this execution's limits on an idle pooled group and start its counters from here."""
        if self._memory is not None and self._memory == self._v2:
            _write(self._memory / "memory.max", str(memory_bytes))
            self.bounds["memory"] = f"cgroup v2 memory.max={memory_bytes} (no swap, group killed on OOM)"
        elif self._memory is not None:
            memsw = self._memory / "memory.memsw.limit_in_bytes"
            has_memsw = memsw.exists()
            if has_memsw:  # memsw must stay >= the limit at every step
                _write(memsw, "-1")
            _write(self._memory / "memory.limit_in_bytes", str(memory_bytes))
            if has_memsw:
                _write(memsw, str(memory_bytes))
            with contextlib.suppress(OSError):
                _write(self._memory / "memory.max_usage_in_bytes", "0")
            self.bounds["memory"] = f"cgroup v1 memory.limit_in_bytes={memory_bytes} (no swap)"
        if self._pids is not None:
            _write(self._pids / "pids.max", str(pids))
            version = "v2" if self._pids == self._v2 else "v1"
            self.bounds["pids"] = f"cgroup {version} pids.max={pids}"
        self._baseline = self._counters()

    def peak_memory(self) -> int:
        if self._memory is None:
            return 0
        name = "memory.peak" if self._memory == self._v2 else "memory.max_usage_in_bytes"
        try:
            return int((self._memory / name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return 0

    async def close(self) -> None:
        """Kill everything still in the groups, wait until they are empty, and remove them."""
        await self.drain()
        self._remove_dirs()

    async def drain(self) -> bool:
        """Kill everything still in the groups (``cgroup.kill`` where v2 gives it, SIGKILL per pid otherwise) and
        wait until they are empty (about a second at most); whether they are."""
        if self._v2 is not None:
            with contextlib.suppress(OSError):
                _write(self._v2 / "cgroup.kill", "1")
        for _ in range(200):
            alive = self._pids_alive()
            if not alive:
                return True
            for pid in alive:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            await asyncio.sleep(0.005)
        return not self._pids_alive()

    def _pids_alive(self) -> set[int]:
        alive: set[int] = set()
        for group in self.dirs:
            try:
                alive.update(int(line) for line in (group / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                continue
        return alive

    def _remove_dirs(self) -> None:
        for group in reversed(self.dirs):
            with contextlib.suppress(FileNotFoundError):
                try:
                    group.rmdir()
                except OSError as exc:
                    if exc.errno != errno.EBUSY:
                        raise
        self.dirs = [group for group in self.dirs if group.exists()]


class CgroupPool:
    """Execution groups kept for reuse, one execution at a time each. The first process to join a new group waits
    for the kernel to set it up (8-30 ms measured here on v1, during which an event loop spawning it is blocked); a
    reused group takes about 0.1 ms. Groups are named ``evalsi-sbx-<pid>-<id>``, so those a dead process left
    behind are removed when the next pool starts."""

    def __init__(self, layout: CgroupLayout, keep: int = 16) -> None:
        self.layout = layout
        self.keep = keep
        self._idle: list[ExecutionCgroups] = []
        self._swept = False

    def acquire(self, *, memory_bytes: int, pids: int) -> ExecutionCgroups:
        if not self._swept:
            self._swept = True
            remove_stale_groups(self.layout)
        while self._idle:
            groups = self._idle.pop()
            try:
                groups._reuse(memory_bytes, pids)
                return groups
            except OSError:
                groups._remove_dirs()
        return ExecutionCgroups.create(self.layout, memory_bytes=memory_bytes, pids=pids)

    async def release(self, groups: ExecutionCgroups) -> None:
        """Kill what the execution left, then keep the emptied groups for the next one (or remove them)."""
        empty = await groups.drain()
        if empty and len(self._idle) < self.keep and groups.dirs:
            self._idle.append(groups)
        else:
            groups._remove_dirs()

    def close(self) -> None:
        while self._idle:
            self._idle.pop()._remove_dirs()


def remove_stale_groups(layout: CgroupLayout) -> None:
    """Remove the empty groups of processes that are gone (a pool's idle groups outlive a process that exits)."""
    parents = {parent for parent in (layout.v2_limits, layout.v2_plain, layout.v1_memory, layout.v1_pids) if parent}
    for parent in parents:
        try:
            entries = list(parent.iterdir())
        except OSError:
            continue
        for entry in entries:
            owner = entry.name[len(_PREFIX):].partition("-")[0] if entry.name.startswith(_PREFIX) else ""
            if not owner.isdigit() or int(owner) == os.getpid() or _alive(int(owner)):
                continue
            with contextlib.suppress(OSError):  # not empty: something still runs there; leave it
                entry.rmdir()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def join_cgroups(paths: tuple[str, ...]) -> None:
    """Write the calling process's pid to each ``cgroup.procs`` (runs in the child between fork and exec, so only
    async-signal-safe-ish calls: open, write, close)."""
    pid = str(os.getpid()).encode()
    for path in paths:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, pid)
        finally:
            os.close(fd)


def _cgroup_mounts() -> dict[str, Path]:
    """"cgroup2" -> the v2 mount point; each v1 controller name -> its hierarchy's mount point."""
    mounts: dict[str, Path] = {}
    try:
        lines = (_PROC_SELF / "mountinfo").read_text().splitlines()
    except OSError:
        return mounts
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        point = Path(fields[4])
        if tail[0] == "cgroup2":
            mounts.setdefault("cgroup2", point)
        elif tail[0] == "cgroup":
            for option in tail[2].split(","):
                mounts.setdefault(option, point)
    return mounts


def _own_paths() -> dict[str, str]:
    """Controller (v1) or "" (v2) -> this process's cgroup path."""
    paths: dict[str, str] = {}
    try:
        lines = (_PROC_SELF / "cgroup").read_text().splitlines()
    except OSError:
        return paths
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for controller in parts[1].split(",") if parts[1] else [""]:
            paths[controller] = parts[2]
    return paths


def _join(mount: Path, own: str) -> Path:
    return mount / own.lstrip("/")


def _v1_parent(mounts: dict[str, Path], own: dict[str, str], controller: str) -> Path | None:
    mount = mounts.get(controller)
    if mount is None:
        return None
    parent = _join(mount, own.get(controller, "/"))
    return parent if _writable(parent) else None


def _delegated_v2(directory: Path) -> bool:
    try:
        enabled = set((directory / "cgroup.subtree_control").read_text().split())
        available = set((directory / "cgroup.controllers").read_text().split())
    except OSError:
        return False
    if not {"memory", "pids"} <= available or not _writable(directory):
        return False
    if {"memory", "pids"} <= enabled:
        return True
    try:  # refused (EBUSY) while the directory itself holds processes: the "no internal processes" rule
        _write(directory / "cgroup.subtree_control", "+memory +pids")
    except OSError:
        return False
    return True


def _writable(directory: Path) -> bool:
    return directory.is_dir() and os.access(directory, os.W_OK)


def _write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _read_keyed(path: Path) -> dict[str, int]:
    values: dict[str, int] = {}
    try:
        text = path.read_text()
    except OSError:
        return values
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            values[parts[0]] = int(parts[1])
    return values
