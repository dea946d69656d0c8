"""Persistent sandboxes under leases: sandboxd's state (§13, Phase 3's "a manager that caps sandboxes and reaps
idle ones").

A sandbox is a session of the rung the ladder picked, held under an id until it is destroyed or its lease runs
out. Every call on it renews the lease; an execution in progress holds it (a long run is never reaped under
itself). The cap bounds the sandboxes alive at once (default: the CPU count, since sandboxes that share too few
cores time out on correct programs: seed §23's load test): a Create waits for a slot up to its wait limit, then is
refused naming the cap. A sandbox belongs to the project it was created in; asked from another project it does
not exist (NOT_FOUND, never a hint that it does).

Snapshots keep a sandbox's writable state: its workspace directory copied from the host without following a link
(``host_files``), or a stateful session's own blob (a microVM); Restore creates a sandbox of the same spec
(optionally another network policy, for a granted escalation) and loads the state into it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from evalsi.errors import BadInputError, EvalsiError
from evalsi.sandbox import host_files
from evalsi.sandbox.model import (
    EgressEvent,
    ExecResult,
    IsolationReport,
    NetworkPolicy,
    OutputSink,
    ProbeVerdict,
    SandboxSession,
    SandboxSpec,
)

__all__ = [
    "ManagerLimits",
    "Sandbox",
    "SandboxBusy",
    "SandboxManager",
    "SandboxNotFound",
    "SandboxStats",
    "SessionOpener",
    "SnapshotUnsupported",
]

log = logging.getLogger("evalsi.sandbox.manager")


class SessionOpener(Protocol):
    """What the manager needs of the ladder (``evalsi.sandbox.ladder.Ladder``)."""

    async def create(self, spec: SandboxSpec) -> SandboxSession: ...

    async def probe_all(self, names: tuple[str, ...] | None = None) -> tuple[ProbeVerdict, ...]: ...


class SandboxNotFound(EvalsiError):
    """No such sandbox or snapshot in the caller's project (destroyed, reaped, or never there)."""


class SandboxBusy(EvalsiError):
    """The cap on sandboxes alive at once is reached and no slot freed within the wait (RESOURCE_EXHAUSTED)."""


class SnapshotUnsupported(EvalsiError):
    """The sandbox's rung keeps no writable state the manager can save (FAILED_PRECONDITION)."""


@dataclass(frozen=True)
class ManagerLimits:
    max_sandboxes: int = field(default_factory=lambda: os.cpu_count() or 1)
    default_lease_s: float = 300.0
    max_lease_s: float = 24 * 3600.0
    # How long a Create waits for a free slot before it is refused, and how many may wait at once (past that a
    # Create is refused at once: a flood of them holds no unbounded queue).
    create_wait_s: float = 30.0
    max_waiting: int = 64
    # Calls on one sandbox that may run or wait at once (they run one at a time).
    max_queued_calls: int = 16
    reap_interval_s: float = 5.0
    max_snapshots: int = 64
    max_snapshot_bytes: int = 256 * 1024 * 1024
    # Bounds of one WriteFiles / ReadFiles call, all files together.
    max_transfer_bytes: int = 64 * 1024 * 1024
    max_files: int = 10_000

    def check(self) -> None:
        if self.max_sandboxes < 1:
            raise BadInputError(f"max_sandboxes {self.max_sandboxes}: at least 1")
        if not 0 < self.default_lease_s <= self.max_lease_s:
            raise BadInputError(f"default lease {self.default_lease_s:g}s: more than 0 and at most the maximum "
                                f"lease {self.max_lease_s:g}s")


@dataclass
class SandboxStats:
    execs: int = 0
    cpu_s: float = 0.0
    wall_s: float = 0.0
    max_rss_bytes: int = 0
    egress: tuple[EgressEvent, ...] = ()


@dataclass
class Sandbox:
    """One leased sandbox."""

    id: str
    project: str
    spec: SandboxSpec
    session: SandboxSession
    lease_s: float
    created: float  # Unix seconds
    expires: float  # on the manager's monotonic clock
    stats: SandboxStats = field(default_factory=SandboxStats)
    busy: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def isolation(self) -> IsolationReport:
        return self.session.isolation


@dataclass(frozen=True)
class _Snapshot:
    id: str
    project: str
    spec: SandboxSpec
    path: Path
    size: int
    kind: str  # "workspace" (a tar of the host directory) | "state" (the session's own blob)


class SandboxManager:
    """Sandboxes by id, their leases, the cap, the reaper and the snapshots. One per sandboxd process."""

    def __init__(self, opener: SessionOpener, snapshot_dir: Path, limits: ManagerLimits | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.opener = opener
        self.limits = limits or ManagerLimits()
        self.limits.check()
        self._clock = clock
        self._snapshot_dir = snapshot_dir
        self._sandboxes: dict[str, Sandbox] = {}
        self._snapshots: dict[str, _Snapshot] = {}
        self._slots = asyncio.Semaphore(self.limits.max_sandboxes)
        self._waiting = 0
        self._closed = False

    # --- life of a sandbox ---

    @property
    def count(self) -> int:
        return len(self._sandboxes)

    def _lease(self, lease_s: float) -> float:
        if lease_s < 0 or lease_s != lease_s:
            raise BadInputError(f"lease_s {lease_s}: seconds, 0 for the default ({self.limits.default_lease_s:g})")
        if lease_s > self.limits.max_lease_s:
            raise BadInputError(f"lease_s {lease_s:g}: at most {self.limits.max_lease_s:g} seconds")
        return lease_s or self.limits.default_lease_s

    async def create(self, spec: SandboxSpec, project: str, lease_s: float = 0.0, *,
                     wait_s: float | None = None) -> Sandbox:
        """A new sandbox on the ladder's rung for ``spec``; waits for a slot under the cap (``wait_s``, default the
        limits'), then ``SandboxBusy``. ``SandboxUnavailable`` (nothing ran) passes through."""
        lease = self._lease(lease_s)
        if self._closed:
            raise SandboxBusy("sandboxd is stopping; no new sandboxes")
        wait = self.limits.create_wait_s if wait_s is None else wait_s
        if self._slots.locked() and self._waiting >= self.limits.max_waiting:
            raise SandboxBusy(f"{self.limits.max_sandboxes} sandboxes are alive, the most at once (--max-sandboxes), "
                              f"and {self._waiting} Creates already wait for one: retry later")
        self._waiting += 1
        try:
            await asyncio.wait_for(self._slots.acquire(), timeout=max(wait, 0.001))
        except TimeoutError:
            raise SandboxBusy(f"{self.limits.max_sandboxes} sandboxes are alive, the most at once "
                              f"(--max-sandboxes); none freed within {wait:g}s: retry later or destroy one") from None
        finally:
            self._waiting -= 1
        try:
            session = await self.opener.create(spec)
        except BaseException:
            self._slots.release()
            raise
        sandbox = Sandbox(id=f"sbx-{secrets.token_hex(12)}", project=project, spec=spec, session=session,
                          lease_s=lease, created=time.time(), expires=self._clock() + lease)
        self._sandboxes[sandbox.id] = sandbox
        log.info("sandbox created", extra={"sandbox": sandbox.id, "project": project,
                                           "driver": session.isolation.driver})
        return sandbox

    def get(self, sandbox_id: str, project: str) -> Sandbox:
        """The sandbox, its lease renewed; ``SandboxNotFound`` when it is not this project's."""
        sandbox = self._sandboxes.get(sandbox_id)
        if sandbox is None or sandbox.project != project:
            raise SandboxNotFound(f"sandbox_id {sandbox_id[:80]!r}: no such sandbox in project {project!r} "
                                  "(destroyed, reaped after its lease, or never created)")
        sandbox.expires = self._clock() + sandbox.lease_s
        return sandbox

    async def destroy(self, sandbox_id: str, project: str) -> None:
        sandbox = self.get(sandbox_id, project)
        await self._destroy(sandbox)

    async def _destroy(self, sandbox: Sandbox) -> None:
        if self._sandboxes.pop(sandbox.id, None) is None:
            return  # destroyed meanwhile (reaper and caller)
        try:
            await sandbox.session.destroy()
        except Exception:  # the slot is freed all the same; the driver's own cleanup logs what it could not do
            log.exception("destroying a sandbox failed", extra={"sandbox": sandbox.id})
        finally:
            self._slots.release()

    # --- what runs in a sandbox ---

    def _hold(self, sandbox: Sandbox) -> None:
        """Count a call that uses the sandbox (a held sandbox is never reaped); its calls run one at a time, and at
        most ``max_queued_calls`` wait for their turn (a flood of them on one sandbox is refused, not queued)."""
        if sandbox.busy >= self.limits.max_queued_calls:
            raise SandboxBusy(f"sandbox {sandbox.id}: {sandbox.busy} calls already run or wait on it, the most at "
                              "once; its calls run one at a time")
        sandbox.busy += 1

    async def exec(self, sandbox_id: str, project: str, argv: list[str], *, stdin: bytes = b"",
                   env: Mapping[str, str] | None = None, timeout_s: float | None = None,
                   on_output: OutputSink | None = None) -> ExecResult:
        """One command; executions in one sandbox run one at a time (they share its workspace)."""
        if not argv or any("\0" in arg for arg in argv):
            raise BadInputError("argv: expected a non-empty command line without NUL characters")
        sandbox = self.get(sandbox_id, project)
        self._hold(sandbox)
        try:
            async with sandbox.lock:
                result = await sandbox.session.exec(argv, stdin=stdin, env=env, timeout_s=timeout_s,
                                                    on_output=on_output)
        finally:
            sandbox.busy -= 1
            sandbox.expires = self._clock() + sandbox.lease_s
        stats = sandbox.stats
        stats.execs += 1
        stats.wall_s += result.duration_s
        stats.cpu_s += result.cpu_s
        stats.max_rss_bytes = max(stats.max_rss_bytes, result.max_rss_bytes)
        return result

    async def write_files(self, sandbox_id: str, project: str, files: Mapping[str, bytes]) -> int:
        self._check_transfer(files)
        sandbox = self.get(sandbox_id, project)
        workspace = _host_workspace(sandbox.session)
        self._hold(sandbox)
        try:
            async with sandbox.lock:
                if workspace is None:
                    await sandbox.session.write_files(files)
                else:  # the host writes beneath the workspace, never through a link the sandbox planted
                    await asyncio.to_thread(_write_all, workspace, files, sandbox.spec.workdir)
        finally:
            sandbox.busy -= 1
        return sum(len(data) for data in files.values())

    async def read_files(self, sandbox_id: str, project: str, paths: list[str], max_bytes: int = 0) -> dict[str,
                                                                                                          bytes]:
        limit = self.limits.max_transfer_bytes
        if max_bytes < 0 or max_bytes > limit:
            raise BadInputError(f"max_bytes {max_bytes}: 0 (the limit) to {limit}")
        if not paths or len(paths) > self.limits.max_files:
            raise BadInputError(f"paths: 1 to {self.limits.max_files} paths")
        sandbox = self.get(sandbox_id, project)
        workspace = _host_workspace(sandbox.session)
        budget = max_bytes or limit
        self._hold(sandbox)
        try:
            async with sandbox.lock:
                if workspace is None:
                    return await sandbox.session.read_files(paths, max_bytes=budget)
                return await asyncio.to_thread(_read_all, workspace, paths, budget, sandbox.spec.workdir)
        finally:
            sandbox.busy -= 1

    def _check_transfer(self, files: Mapping[str, bytes]) -> None:
        if not files or len(files) > self.limits.max_files:
            raise BadInputError(f"files: 1 to {self.limits.max_files} files")
        total = sum(len(data) for data in files.values())
        if total > self.limits.max_transfer_bytes:
            raise BadInputError(f"files: {total} bytes in all is over the limit of {self.limits.max_transfer_bytes}")

    def stats(self, sandbox_id: str, project: str) -> tuple[Sandbox, SandboxStats]:
        sandbox = self.get(sandbox_id, project)
        logging_session = getattr(sandbox.session, "egress_log", None)
        egress = tuple(logging_session()) if callable(logging_session) else ()
        return sandbox, replace(sandbox.stats, egress=egress)

    def lease_expires_at(self, sandbox: Sandbox) -> float:
        """The lease's end in Unix seconds (the manager keeps it on the monotonic clock)."""
        return time.time() + max(sandbox.expires - self._clock(), 0.0)

    # --- snapshots ---

    async def snapshot(self, sandbox_id: str, project: str) -> tuple[str, int]:
        """Save the sandbox's writable state; returns the snapshot id and its size in bytes."""
        sandbox = self.get(sandbox_id, project)
        session = sandbox.session
        workspace = _host_workspace(session)
        save = getattr(session, "save_state", None)
        limit = min(self.limits.max_snapshot_bytes, sandbox.spec.resources.disk_bytes)
        self._hold(sandbox)
        try:
            async with sandbox.lock:
                if callable(save):
                    data, kind = await save(), "state"
                elif workspace is not None:
                    data = await asyncio.to_thread(host_files.copy_tree_to_tar, workspace, max_bytes=limit)
                    kind = "workspace"
                else:
                    raise SnapshotUnsupported(f"sandbox {sandbox.id}: its rung ({session.isolation.driver}) keeps "
                                              "no writable state that can be saved")
        finally:
            sandbox.busy -= 1
        if len(data) > limit:
            raise BadInputError(f"sandbox {sandbox.id}: its state is {len(data)} bytes, over the snapshot limit of "
                                f"{limit}")
        snapshot_id = f"snap-{secrets.token_hex(12)}"
        path = self._snapshot_dir / f"{snapshot_id}.bin"
        await asyncio.to_thread(_write_private, self._snapshot_dir, path, data)
        self._snapshots[snapshot_id] = _Snapshot(snapshot_id, project, sandbox.spec, path, len(data), kind)
        self._evict_snapshots()
        return snapshot_id, len(data)

    def _evict_snapshots(self) -> None:
        """Past the cap the oldest snapshots go (dicts keep insertion order)."""
        while len(self._snapshots) > self.limits.max_snapshots:
            oldest = next(iter(self._snapshots))
            gone = self._snapshots.pop(oldest)
            gone.path.unlink(missing_ok=True)

    async def restore(self, snapshot_id: str, project: str, *, network: NetworkPolicy | None = None,
                      lease_s: float = 0.0) -> Sandbox:
        """A new sandbox of the snapshot's spec (``network`` in place of its policy when given), its state loaded."""
        snapshot = self._snapshots.get(snapshot_id)
        if snapshot is None or snapshot.project != project:
            raise SandboxNotFound(f"snapshot_id {snapshot_id[:80]!r}: no such snapshot in project {project!r}")
        spec = snapshot.spec if network is None else replace(snapshot.spec, network=network)
        data = await asyncio.to_thread(snapshot.path.read_bytes)
        sandbox = await self.create(spec, project, lease_s)
        try:
            if snapshot.kind == "state":
                load = getattr(sandbox.session, "load_state", None)
                if not callable(load):
                    raise SnapshotUnsupported(f"snapshot {snapshot_id}: saved by a stateful rung, but the new "
                                              f"sandbox's rung ({sandbox.isolation.driver}) cannot load it")
                await load(data)
            else:
                workspace = _host_workspace(sandbox.session)
                if workspace is None:
                    raise SnapshotUnsupported(f"snapshot {snapshot_id}: a workspace copy, but the new sandbox's rung "
                                              f"({sandbox.isolation.driver}) has no host workspace to restore into")
                await asyncio.to_thread(host_files.restore_tar, workspace, data, max_bytes=snapshot.size * 2 + 1024)
        except BaseException:
            await self._destroy(sandbox)
            raise
        return sandbox

    # --- reaping and the end ---

    async def reap(self) -> list[str]:
        """Destroy the sandboxes whose lease ran out and that run nothing; their ids."""
        now = self._clock()
        expired = [sandbox for sandbox in self._sandboxes.values() if sandbox.expires <= now and sandbox.busy == 0]
        for sandbox in expired:
            log.info("sandbox reaped after its lease", extra={"sandbox": sandbox.id, "project": sandbox.project})
            await self._destroy(sandbox)
        return [sandbox.id for sandbox in expired]

    async def run_reaper(self, stopping: asyncio.Event) -> None:
        """Reap every ``reap_interval_s`` until ``stopping`` is set."""
        while not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), timeout=self.limits.reap_interval_s)
            if not stopping.is_set():
                await self.reap()

    async def close(self) -> None:
        """Destroy every sandbox and delete the snapshots (they live as long as the process)."""
        self._closed = True
        for sandbox in list(self._sandboxes.values()):
            await self._destroy(sandbox)
        for snapshot in self._snapshots.values():
            snapshot.path.unlink(missing_ok=True)
        self._snapshots.clear()


def _host_workspace(session: SandboxSession) -> str | None:
    workspace = getattr(session, "host_workspace", None)
    return workspace if isinstance(workspace, str) and workspace else None


def _write_all(workspace: str, files: Mapping[str, bytes], workdir: str) -> None:
    for path, data in files.items():
        host_files.write_beneath(workspace, path, data, workdir=workdir)


def _read_all(workspace: str, paths: list[str], budget: int, workdir: str) -> dict[str, bytes]:
    contents: dict[str, bytes] = {}
    for path in paths:
        data = host_files.read_beneath(workspace, path, max_bytes=budget, workdir=workdir)
        budget -= len(data)
        contents[path] = data
    return contents


def _write_private(directory: Path, path: Path, data: bytes) -> None:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
