"""Snapshots of prepared environments (Phase 3: "we boot once, run the environment setup and snapshot; clones are
then restored"), and the sandbox state they save.

``SharedSetups`` wraps a run's opener: the first trial of an environment creates its sandbox, writes its files,
runs its setup and snapshots the result; every later trial of the same environment (same files, setup and
sandbox request) starts from a restore of that snapshot, a fresh sandbox with identical files, without running
the setup again. Where the rung keeps no state that can be saved (or the state is over the limit), each trial
runs the setup as before. The snapshot is what the rung keeps between commands: the workspace directory on the
bwrap, Landlock and gVisor rungs, the whole machine on the microVM rung, or sandboxd's own snapshot on a server.

``take`` and ``restore`` are also how a granted escalation moves a sandbox to a wider spec keeping its files.
A setup that is not deterministic (it downloads "latest", stamps the time) gives every trial the first trial's
result: the environment's ``snapshot: false`` runs it per trial instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shutil
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

from evalsi.errors import BadInputError, EvalsiError
from evalsi.sandbox import host_files
from evalsi.sandbox.access import SandboxOpener
from evalsi.sandbox.host_files import HostFileError
from evalsi.sandbox.manager import SandboxNotFound, SnapshotUnsupported
from evalsi.sandbox.model import SandboxSession, SandboxSpec, SandboxUnavailable

from .environment import Environment

__all__ = ["SharedSetups", "Snapshot", "restore", "setup_key", "take"]

SnapshotKind = Literal["workspace", "state", "sandboxd"]
MAX_SNAPSHOT_BYTES = 256 * 1024 * 1024  # one snapshot (as sandboxd's manager)
MAX_HELD_BYTES = 512 * 1024 * 1024  # all the snapshots one SharedSetups holds in memory
MAX_ENTRIES = 64


@dataclass(frozen=True)
class Snapshot:
    """A sandbox's saved state: the bytes (a workspace tar, or a stateful rung's own blob) held here, or the id
    of a snapshot sandboxd holds. ``digest`` is the sha256 of the bytes ("" for sandboxd's, which keeps them)."""

    kind: SnapshotKind
    spec: SandboxSpec
    digest: str = ""
    size: int = 0
    data: bytes = b""
    snapshot_id: str = ""

    def to_metadata(self, *, restored: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"restored": restored, "kind": self.kind, "size": self.size}
        if self.digest:
            out["digest"] = self.digest
        if self.snapshot_id:
            out["id"] = self.snapshot_id
        return out


async def take(session: SandboxSession, spec: SandboxSpec) -> Snapshot | None:
    """The session's state saved, or None where its rung keeps none that can be saved (or it is over the limit)."""
    limit = min(MAX_SNAPSHOT_BYTES, spec.resources.disk_bytes)
    save_state = getattr(session, "save_state", None)
    workspace = getattr(session, "host_workspace", None)
    remote_snapshot = getattr(session, "snapshot", None)
    try:
        if callable(save_state):
            data, kind = cast(bytes, await save_state()), "state"
        elif isinstance(workspace, str) and workspace:
            data = await asyncio.to_thread(host_files.copy_tree_to_tar, workspace, max_bytes=limit)
            kind = "workspace"
        # sandboxd's RemoteSession saves itself; duck-typed, so the harness does not import gRPC for it.
        elif callable(remote_snapshot):
            return Snapshot("sandboxd", spec, snapshot_id=str(await remote_snapshot()))
        else:
            return None
    except (HostFileError, SnapshotUnsupported, BadInputError):  # over the limit, or a rung without state
        return None
    if len(data) > limit:
        return None
    return Snapshot(cast(SnapshotKind, kind), spec, digest="sha256:" + hashlib.sha256(data).hexdigest(),
                    size=len(data), data=data)


async def restore(snapshot: Snapshot, opener: SandboxOpener, project: str, spec: SandboxSpec | None = None
                  ) -> SandboxSession:
    """A new sandbox under ``spec`` (default: the snapshot's) holding the snapshot's state. On sandboxd only the
    network may differ from the snapshot's spec (Restore's one override); ``SnapshotUnsupported`` otherwise.
    ``SandboxNotFound`` when sandboxd no longer holds the snapshot."""
    spec = spec or snapshot.spec
    if isinstance(opener, SharedSetups):
        opener = opener.inner
    if snapshot.kind == "sandboxd":
        client = getattr(opener, "client", None)
        if not callable(client):
            raise SnapshotUnsupported("a sandboxd snapshot needs a sandboxd opener to restore it")
        if replace(spec, network=snapshot.spec.network) != snapshot.spec:
            raise SnapshotUnsupported("sandboxd restores a snapshot under its own spec, with only the network widened")
        network = None if spec.network == snapshot.spec.network else spec.network
        return cast(SandboxSession, await client(project).restore(snapshot.snapshot_id, network=network))
    session = await opener.open(spec, project)
    try:
        if snapshot.kind == "state":
            load_state = getattr(session, "load_state", None)
            if not callable(load_state):
                raise SnapshotUnsupported(f"the rung {session.isolation.driver} cannot load a saved machine state")
            await load_state(snapshot.data)
        else:
            workspace = getattr(session, "host_workspace", None)
            if not isinstance(workspace, str) or not workspace:
                raise SnapshotUnsupported(f"the rung {session.isolation.driver} has no workspace to restore into")
            # Exactly the snapshot: a fresh session's workspace may hold what its image's WORKDIR seeded it with
            # (a Dockerfile root, image_build.py), which the snapshot's setup may have removed.
            await asyncio.to_thread(_empty, workspace)
            await asyncio.to_thread(host_files.restore_tar, workspace, snapshot.data,
                                    max_bytes=snapshot.size * 2 + 1024)
    except BaseException:
        await session.destroy()
        raise
    return session


def _empty(workspace: str) -> None:
    """Remove what a session's opener put in its new workspace (nothing has run in it: no link to follow)."""
    for entry in os.scandir(workspace):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


def setup_key(environment: Environment, spec: SandboxSpec, project: str, run_id: str = "") -> str:
    """What a prepared sandbox depends on: its files, its setup, the sandbox it runs in, the project (whose
    sandboxes are its own) and the run (a later run sets up afresh, even on a long-lived worker). The checker and
    the escalation policy act after the setup, so they are not part of it."""
    doc = {"project": project, "run": run_id, "files": {path: hashlib.sha256(data).hexdigest()
                                         for path, data in sorted(environment.files.items())},
           "setup": [list(argv) for argv in environment.setup], "spec": repr(spec)}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


Prepare = Callable[[SandboxSession], Awaitable[None]]


class SharedSetups:
    """A run's opener (``SandboxOpener``) that also keeps prepared environments between trials: ``session``
    gives a restored sandbox when an earlier trial left a snapshot of the same environment, else opens one and
    runs ``prepare`` (files and setup) in it, snapshotting the result for the next. Bounded: at most
    ``max_entries`` snapshots and ``max_bytes`` held in memory, the least recently used dropped first."""

    def __init__(self, inner: SandboxOpener, *, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_HELD_BYTES
                 ) -> None:
        self.inner = inner
        self.base = inner.base
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, Snapshot] = OrderedDict()
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        # How many times a setup ran and a snapshot was restored: the harness's own counters (tests, benchmarks).
        self.setups = 0
        self.restores = 0

    async def open(self, spec: SandboxSpec, project: str) -> SandboxSession:
        return await self.inner.open(spec, project)

    @contextlib.asynccontextmanager
    async def _locked(self, key: str) -> AsyncIterator[None]:
        """One setup per environment at a time: concurrent trials of it wait for the first one's snapshot."""
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    async def session(self, key: str, spec: SandboxSpec, project: str, open_session: Callable[[], Awaitable[
            SandboxSession]], prepare: Prepare) -> tuple[SandboxSession, dict[str, Any] | None]:
        """A prepared sandbox for the environment ``key`` and what the record says of its snapshot (None when
        there is none: the rung keeps no state, or it was over the limit)."""
        async with self._locked(key):
            snapshot = self._entries.get(key)
            if snapshot is not None:
                try:
                    session = await restore(snapshot, self.inner, project, spec)
                except (SandboxNotFound, SnapshotUnsupported):  # sandboxd evicted it or restarted: set up afresh
                    self._entries.pop(key, None)
                except (SandboxUnavailable, BadInputError):
                    raise  # the request itself cannot run here: a fresh setup would be refused the same way
                except EvalsiError:
                    pass  # sandboxd busy or unreachable: a fresh setup, whose open waits and retries
                else:
                    self._entries.move_to_end(key)
                    self.restores += 1
                    return session, snapshot.to_metadata(restored=True)
            session = await open_session()
            try:
                await prepare(session)
                self.setups += 1
                try:
                    snapshot = await take(session, spec)
                except EvalsiError:  # sandboxd busy or unreachable for the snapshot: this trial goes on without it
                    snapshot = None
            except BaseException:
                await session.destroy()
                raise
            if snapshot is None:
                return session, None
            self._keep(key, snapshot)
            return session, snapshot.to_metadata(restored=False)

    def _keep(self, key: str, snapshot: Snapshot) -> None:
        if snapshot.size > self.max_bytes:
            return
        self._entries[key] = snapshot
        while len(self._entries) > self.max_entries or sum(s.size for s in self._entries.values()) > self.max_bytes:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        """Drop the snapshots held here (sandboxd's own are evicted by its cap, or go with its process)."""
        self._entries.clear()
