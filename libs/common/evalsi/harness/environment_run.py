"""An environment's life: a sandbox created, its files written, its setup run, the agent's turn, the checker, and
the sandbox destroyed whatever happened (§11).

Anything that goes wrong before the agent starts (no rung meets the environment's minimum, a file refused, a
setup command failing) is the environment's failure: ``EnvironmentFailure``, an infrastructure error the run
reports and never scores. The checker's verdict is ``evalsi.harness.checker``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

from evalsi.errors import BadInputError, InfraError
from evalsi.records import to_value
from evalsi.sandbox.access import SandboxOpener
from evalsi.sandbox.model import IsolationReport, SandboxSession, SandboxSpec, SandboxUnavailable
from evalsi.sandbox.provenance import provenance_isolation
from evalsi.sandbox.spawned import SpawnUnsupported
from evalsi.v1alpha1.record_pb2 import Record

from .checker import MAX_REPORT_BYTES, CheckerError, Verdict, output_tail, verdict_of
from .environment import Environment
from .environment_session import EnvironmentSession
from .environment_snapshots import SharedSetups, setup_key
from .loop import TrialResult
from .mcp import McpError
from .mcp_sandbox import sandbox_mcp_tools
from .runner import Harness
from .tasks import Task
from .tools import Tool

__all__ = ["EnvironmentFailure", "environment_mcp_tools", "isolation_metadata", "prepared", "run_checker", "stamp",
           "trial_in_environment"]

_TAIL = 1000
# About 30 s in all: sandboxd probes its rungs (a microVM boot among them) before it listens.
OPEN_RETRY_DELAYS_S = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0)


class EnvironmentFailure(InfraError):
    """The environment could not be prepared (or its sandbox failed): nothing the agent did, never scored."""


async def _open(opener: SandboxOpener, spec: SandboxSpec, project: str) -> SandboxSession:
    """A session, retried while the sandbox service is unreachable or full (sandboxd starting or restarting,
    every slot taken): ``OPEN_RETRY_DELAYS_S`` apart, then its error."""
    for delay in (*OPEN_RETRY_DELAYS_S, None):
        try:
            return await opener.open(spec, project)
        except (SandboxUnavailable, BadInputError):
            raise
        except InfraError:
            if delay is None:
                raise
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")


async def _opened(opener: SandboxOpener, spec: SandboxSpec, project: str) -> SandboxSession:
    try:
        return await _open(opener, spec, project)
    except SandboxUnavailable as exc:  # nothing ran: the run's machine cannot give the isolation asked for
        raise EnvironmentFailure(str(exc)) from exc
    except BadInputError as exc:  # a root this machine does not have (or sandboxd refuses): this record cannot run
        raise EnvironmentFailure(f"environment sandbox: {exc}") from exc


async def _set_up(environment: Environment, session: SandboxSession, spec: SandboxSpec) -> None:
    """The environment's files written and its setup run in ``session``; ``EnvironmentFailure`` naming the
    command that failed."""
    try:
        if environment.files:
            await session.write_files(dict(environment.files))
    except BadInputError as exc:
        raise EnvironmentFailure(f"environment files: {exc}") from exc
    for index, argv in enumerate(environment.setup):
        result = await session.exec(list(argv), timeout_s=spec.resources.timeout_s)
        outcome = result.outcome
        if outcome.kind == "exit" and outcome.code == 0:
            continue
        how = {"exit": f"exited {outcome.code}", "timeout": "timed out",
               "denied": f"was denied by the sandbox ({outcome.effect})",
               "runner_failure": f"could not run ({outcome.signature})"}[outcome.kind]
        output = output_tail(result.stderr, _TAIL) or output_tail(result.stdout, _TAIL)
        raise EnvironmentFailure(f"environment setup[{index}] {' '.join(argv)[:200]!r} {how}"
                                 + (f": {output}" if output else ""))


@contextlib.asynccontextmanager
async def prepared(environment: Environment, opener: SandboxOpener, project: str, *, run_id: str = ""
                   ) -> AsyncIterator[EnvironmentSession]:
    """A sandbox with the environment's files written and its setup run; destroyed on exit. ``opener``: the
    in-process ladder embedded, evalsi-sandboxd on a server; its base fills what the environment leaves unset.
    With ``SharedSetups``, a sandbox restored from an earlier trial's snapshot of the same environment in the same
    run (``run_id``), where the rung can snapshot (and the environment does not say ``snapshot: false``)."""
    spec = environment.sandbox_spec(opener.base)
    snapshot = None
    if isinstance(opener, SharedSetups) and environment.snapshot:
        async def prepare(session: SandboxSession) -> None:
            await _set_up(environment, session, spec)

        try:
            session, snapshot = await opener.session(
                setup_key(environment, spec, project, run_id), spec, project, lambda: _opened(opener, spec, project),
                prepare)
        except (SandboxUnavailable, BadInputError) as exc:  # a restore refused (the first open says it the same way)
            raise EnvironmentFailure(f"environment sandbox: {exc}") from exc
    else:
        session = await _opened(opener, spec, project)
        try:
            await _set_up(environment, session, spec)
        except BaseException:
            await session.destroy()
            raise
    current = EnvironmentSession(session, opener=opener, project=project, spec=spec, policy=environment.escalation,
                                 snapshot=snapshot)
    try:
        yield current
    finally:
        await current.destroy()


async def run_checker(environment: Environment, session: SandboxSession) -> Verdict | None:
    """The checker's verdict on the sandbox as the agent left it; None when the environment has no checker."""
    checker = environment.check
    if checker is None:
        return None
    result = await session.exec(list(checker.argv), timeout_s=checker.timeout_s)
    report = None
    if checker.format == "junit" and result.outcome.kind == "exit":
        try:
            report = (await session.read_files([checker.junit], max_bytes=MAX_REPORT_BYTES))[checker.junit]
        except BadInputError:  # no report (or not a regular file): the verdict says so
            report = None
    return verdict_of(checker, result, report)


@contextlib.asynccontextmanager
async def environment_mcp_tools(environment: Environment, session: EnvironmentSession
                                ) -> AsyncIterator[dict[str, Tool]]:
    """The environment's MCP servers running in ``session``; one that cannot start (or a rung that cannot host
    it) is the environment's failure."""
    async with contextlib.AsyncExitStack() as stack:
        try:
            tools = await stack.enter_async_context(sandbox_mcp_tools(environment.mcp, session))
        except (McpError, SpawnUnsupported) as exc:
            raise EnvironmentFailure(str(exc)) from exc
        yield tools


def isolation_metadata(report: IsolationReport) -> dict[str, object]:
    """What a record's metadata says about the sandbox its environment ran in."""
    return {"driver": report.driver, "level": report.level.label, "enforcement": report.enforcement,
            "not_enforced": list(report.not_enforced)}


def stamp(record: Record, isolation: IsolationReport, verdict: Verdict | None, *,
          snapshot: Mapping[str, Any] | None = None) -> None:
    """What a Record says about its environment: ``environment.isolation`` (also as ``provenance.isolation``, which
    the run manifest collects), the checker's verdict as ``task_success``, ``checker_output`` and ``checker``
    (where ``builtin/task-success`` reads it), and ``environment.snapshot`` when its sandbox took or was restored
    from a snapshot of the prepared environment (``EnvironmentSession.snapshot``: restored, kind, digest, size)."""
    record.metadata["environment.isolation"].CopyFrom(to_value(isolation_metadata(isolation)))
    if snapshot is not None:
        record.metadata["environment.snapshot"].CopyFrom(to_value(dict(snapshot)))
    record.provenance.isolation.CopyFrom(provenance_isolation(isolation))
    if verdict is not None:
        record.metadata["task_success"].bool_value = verdict.passed
        record.metadata["checker_output"].string_value = verdict.reason
        record.metadata["checker"].CopyFrom(to_value(verdict.to_metadata()))


async def trial_in_environment(harness: Harness, task: Task, environment: Environment, opener: SandboxOpener,
                               project: str, *, trial: int, run_id: str) -> TrialResult:
    """One trial of the built-in agent in a fresh sandbox of ``environment``, checked and stamped. An environment
    that cannot be prepared or checked gives a trial ended by an infrastructure error (``stop_reason`` error)."""
    try:
        async with prepared(environment, opener, project, run_id=run_id) as session:
            # The servers are stopped before the checker grades: what it sees is what the agent left.
            async with environment_mcp_tools(environment, session) as tools:
                result = await harness.run(task, trial=trial, run_id=run_id, session=session, tools=tools)
            verdict = None if result.infra_error else await run_checker(environment, session)
            stamp(result.record, session.isolation, verdict, snapshot=session.snapshot)
        return result
    except (EnvironmentFailure, CheckerError) as exc:
        record = Record(id=task.id)
        record.provenance.run_id, record.provenance.trial, record.provenance.sample_id = run_id, trial, task.id
        for key, value in {"harness.stop_reason": "error", "harness.error": str(exc), "harness.model_calls": 0,
                           "harness.tool_calls": 0}.items():
            record.metadata[key].CopyFrom(to_value(value))
        return TrialResult(record=record, stop_reason="error", error=str(exc))
