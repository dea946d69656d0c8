"""The sandbox a trial works in, as the agent's tools, the checker and the record see it: one ``SandboxSession``
whose underlying sandbox a granted escalation replaces (a snapshot restored under the wider spec, so the files
stay), and which remembers whether it came from a snapshot of a prepared environment.

Everything holding the session (the sandbox tools, the checker, ``stamp``) sees the wider sandbox after a grant,
and ``destroy`` ends whichever sandbox is current. A grant waits for the calls in flight (the model's parallel tool
calls) and holds new ones back until the new sandbox is in place, so none runs in a sandbox being replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

from evalsi.errors import EvalsiError, InfraError
from evalsi.sandbox.access import SandboxOpener
from evalsi.sandbox.manager import SnapshotUnsupported
from evalsi.sandbox.model import (
    ExecResult,
    IsolationReport,
    NetworkPolicy,
    OutputSink,
    SandboxSession,
    SandboxSpec,
)

from .environment_snapshots import restore, take
from .escalation import Decision, EscalationPolicy, EscalationRequest, decide

__all__ = ["EnvironmentSession"]


class _Gate:
    """Calls share the sandbox; a swap waits until none is in flight and holds new ones back while it runs."""

    def __init__(self) -> None:
        self._swapping = asyncio.Lock()
        self._calls = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @contextlib.asynccontextmanager
    async def call(self) -> AsyncIterator[None]:
        async with self._swapping:  # only waits while a swap runs
            self._calls += 1
            self._idle.clear()
        try:
            yield
        finally:
            self._calls -= 1
            if not self._calls:
                self._idle.set()

    @contextlib.asynccontextmanager
    async def swap(self) -> AsyncIterator[None]:
        async with self._swapping:
            await self._idle.wait()
            yield


class EnvironmentSession:
    """A ``SandboxSession`` over the environment's current sandbox, with the escalation policy that may widen it.
    ``snapshot``: what the record says of the snapshot this sandbox started from (None: it ran its own setup)."""

    def __init__(self, session: SandboxSession, *, opener: SandboxOpener, project: str, spec: SandboxSpec,
                 policy: EscalationPolicy, snapshot: Mapping[str, Any] | None = None) -> None:
        self._session = session
        self._opener = opener
        self._project = project
        self.spec = spec
        self.policy = policy
        self.snapshot = dict(snapshot) if snapshot is not None else None
        self.id = session.id
        self.isolation: IsolationReport = session.isolation
        self.escalations: list[Decision] = []
        # Called with the new sandbox once a grant replaced the old one, before the old is destroyed (the
        # environment's MCP servers move there); a failure is the trial's infrastructure error.
        self.on_swap: list[Callable[[SandboxSession], Awaitable[None]]] = []
        self._gate = _Gate()

    @property
    def current(self) -> SandboxSession:
        return self._session

    def using(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Held around a use of the current sandbox by something other than these methods (a call to an MCP
        server running in it), so that no escalation replaces the sandbox meanwhile."""
        return self._gate.call()

    async def exec(self, argv: list[str], *, stdin: bytes = b"", env: Mapping[str, str] | None = None,
                   timeout_s: float | None = None, on_output: OutputSink | None = None) -> ExecResult:
        async with self._gate.call():
            return await self._session.exec(argv, stdin=stdin, env=env, timeout_s=timeout_s, on_output=on_output)

    async def write_files(self, files: Mapping[str, bytes]) -> None:
        async with self._gate.call():
            await self._session.write_files(files)

    async def read_files(self, paths: list[str], *, max_bytes: int) -> dict[str, bytes]:
        async with self._gate.call():
            return await self._session.read_files(paths, max_bytes=max_bytes)

    async def destroy(self) -> None:
        await self._session.destroy()

    async def escalate(self, request: EscalationRequest) -> Decision:
        """The policy's decision on ``request``; a grant is applied before it returns (the sandbox replaced by one
        under the wider spec, holding the same files). A grant that cannot be applied here is a denial saying
        why; the sandbox stays as it was. An infrastructure fault while applying it raises ``InfraError``."""
        async with self._gate.swap():  # decided on the mode in force once the calls in flight are done
            decision = decide(request, self.policy, network=self.spec.network.allow,
                              file_access=self.spec.file_access)
            if decision.kind == "granted":
                decision = await self._apply(decision)
        self.escalations.append(decision)
        return decision

    async def _apply(self, decision: Decision) -> Decision:
        wider = replace(self.spec, network=NetworkPolicy(decision.network),
                        file_access=decision.file_access or self.spec.file_access)
        try:
            snapshot = await take(self._session, self.spec)
            if snapshot is None:
                raise SnapshotUnsupported(f"the rung {self.isolation.driver} keeps no state that can move to a wider "
                                          "sandbox")
            session = await restore(snapshot, self._opener, self._project, wider)
        # A fault (sandboxd busy or unreachable, a runner failure) is the trial's infrastructure error, retried
        # like any other: answering "denied" would score the infrastructure as the agent's failure.
        except InfraError:
            raise
        # No snapshot on this rung, a restore refused, a spec the rung cannot give: the old sandbox stays, the
        # agent is told.
        except EvalsiError as exc:
            return Decision("denied", f"allowed by the policy, but it cannot be applied here: {exc}")
        old, self._session = self._session, session
        self.spec, self.id, self.isolation = wider, session.id, session.isolation
        try:
            for moved in self.on_swap:
                await moved(session)
        finally:
            await old.destroy()
        return decision
