"""Agents as run targets: each record is a task an agent performs, its answer the output and its tool calls
the trajectory the agent pack scores (docs/runs.md, "Agents").

- ``spec.target.agent``: an agent deployment, spoken to through the case transports of ``evalsi.cases``
  (``http``: docs/agent-protocol.md, ``openaiResponses``, ``a2a``, or an in-process ``python`` callable). A
  record is one fresh conversation: a text input is one user turn; a chat input (messages) replays its user
  messages as turns, in order (the agent answers each itself, so the input's assistant messages are not sent).
  The output is the last reply; every turn's tool calls, with how each ended, become ``TOOL`` steps.
- ``spec.harness.builtin`` with ``spec.target.model``: the built-in reference agent (``evalsi.harness``) runs
  on the target model, with the spec's tools, step limit and per-task budgets; the record gets the trial's
  trajectory (model and tool steps), usage and stop reason.

A transport failure (the agent unreachable, a dropped stream, a failed task) is retried on a fresh
conversation (``AGENT_RETRIES`` times, with backoff); when it still fails, and when the harness stops with an
infrastructure error, the record is an infrastructure error (``TargetFailure`` kind ``infra``), never a
failure of the agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from evalsi.cases.transport import TransportError
from evalsi.errors import InfraError
from evalsi.harness import Harness, Task
from evalsi.harness.environment import Environment
from evalsi.harness.environment_run import environment_mcp_tools
from evalsi.harness.environment_session import EnvironmentSession
from evalsi.harness.tools import Tool
from evalsi.judges import RetryPolicy
from evalsi.judges.redaction import redact
from evalsi.records import content_text, to_value
from evalsi.sandbox.access import LadderOpener, SandboxOpener
from evalsi.sandbox.model import SandboxSession
from evalsi.targets.cli_agent import CliAgent
from evalsi.targets.environments import any_environment, in_environment, record_environment, spec_environment
from evalsi.targets.identity import agent_identity, generation_kind, harness_config_of, harness_identity
from evalsi.targets.models import (
    Endpoints,
    Generation,
    LocalEndpoints,
    PromptError,
    TargetFailure,
    UsageCallback,
    add_usage,
    build_messages,
    copy_record,
    failed_generation,
    stamp_for_generation,
    target_seed,
)
from evalsi.v1alpha1.record_pb2 import (
    STEP_STATUS_ERROR,
    STEP_STATUS_OK,
    STEP_TYPE_AGENT,
    STEP_TYPE_TOOL,
    TOOL_CALL_STATUS_BLOCKED,
    TOOL_CALL_STATUS_ERROR,
    TOOL_CALL_STATUS_OK,
    TOOL_CALL_STATUS_UNSPECIFIED,
    Record,
    Step,
    Trajectory,
)
from evalsi.v1alpha1.run_pb2 import AgentTarget, HarnessSpec, RunSpec, Target

if TYPE_CHECKING:
    from evalsi.cases.transcript import Turn

AGENT_RETRIES = 2  # after the first attempt; each retry starts a fresh conversation
TENANT = "platform"  # seed 002's default tenant: runs have no case tenant to send
_AGENT_KINDS = ("http", "a2a", "openai_responses", "python", "cli")
_STATUSES = {"ok": TOOL_CALL_STATUS_OK, "error": TOOL_CALL_STATUS_ERROR, "blocked": TOOL_CALL_STATUS_BLOCKED,
             None: TOOL_CALL_STATUS_UNSPECIFIED}



# --- identity and validation ------------------------------------------------------------------------------









# --- running one record -----------------------------------------------------------------------------------


class AgentError(InfraError):
    """The agent could not answer this record (after retries): an infrastructure error of the record."""


class Agent(Protocol):
    identity: str

    async def respond(self, record: Record, *, trial: int, run_id: str) -> None:
        """Fill ``record``'s output, trajectory and usage; ``AgentError`` when it cannot, ``PromptError``
        when the record has nothing to send."""


def user_turns(record: Record) -> list[str]:
    """The user messages a record sends: its text, or the user messages of a chat input, in order."""
    kind = record.input.WhichOneof("kind") if record.HasField("input") else None
    if kind is None:
        raise PromptError("the record has no input to send to the agent")
    if kind == "messages":
        turns = [m.content for m in record.input.messages.messages if m.role == "user"]
        if not turns:
            raise PromptError("the record's messages have no user message to send to the agent")
        return turns
    return [content_text(record.input)]


def trajectory_of(turns: Sequence[Turn], identity: str, conversation: str) -> Trajectory:
    """A root ``AGENT`` step and a ``TOOL`` step per call, in order (``tool-<turn>-<n>``), each call's end as
    its status: ``ok``, ``error`` (with the error), ``blocked`` (with its gate) or unspecified (not reported)."""
    trajectory = Trajectory(session_id=conversation)
    root = Step(id="agent", type=STEP_TYPE_AGENT, name=identity, status=STEP_STATUS_OK)
    latency_ms = sum(t.latency_ms or 0.0 for t in turns)
    root.duration.FromNanoseconds(round(latency_ms * 1e6))
    root.attributes["evalsi.agent.turns"].number_value = len(turns)
    steps = [root]
    for number, turn in enumerate(turns, 1):
        for n, call in enumerate(turn.tool_calls, 1):
            step = Step(id=f"tool-{number}-{n}", parent_id="agent", type=STEP_TYPE_TOOL, name=call.name,
                        status=STEP_STATUS_ERROR if call.end == "error" else STEP_STATUS_OK, error=call.error or "")
            step.tool_call.id = call.id or ""
            step.tool_call.name = call.name
            step.tool_call.arguments.CopyFrom(to_value(call.arguments if call.arguments is not None else {}))
            step.tool_call.status = _STATUSES[call.end]
            step.tool_call.error = call.error or ""
            step.attributes["evalsi.turn"].number_value = number
            if call.gate:
                step.attributes["evalsi.tool.gate"].string_value = call.gate
            steps.append(step)
    trajectory.steps.extend(steps)
    return trajectory




class TransportAgent:
    """An agent deployment behind a case transport; one fresh conversation per record and attempt."""

    def __init__(self, agent: AgentTarget, *, retry: RetryPolicy | None = None,
                 environ: Mapping[str, str] | None = None, retries: int = AGENT_RETRIES,
                 endpoints: Endpoints | None = None) -> None:
        self.identity = agent_identity(agent)
        self.transport, self.agent = (endpoints or LocalEndpoints(environ)).agent_transport(agent)
        self._retry = retry or RetryPolicy()
        self._retries = retries
        self._rng = random.Random()

    async def _conversation(self, record: Record, messages: Sequence[str], trial: int) -> tuple[str, list[Turn]]:

        conversation = f"eval-{record.id}-t{trial}-{uuid.uuid4().hex[:8]}"
        turns = []
        for message in messages:
            try:
                turns.append(await self.transport.turn(conversation, self.agent, TENANT, message))
            except TransportError as exc:
                # The agent's error body may echo the token it was sent.
                token = getattr(self.transport, "token", None)
                raise AgentError(redact(f"turn {len(turns) + 1}: {exc}", (token,))) from None
        return conversation, turns

    async def respond(self, record: Record, *, trial: int, run_id: str) -> None:
        messages = user_turns(record)
        started = time.perf_counter_ns()
        for attempt in range(self._retries + 1):
            try:
                conversation, turns = await self._conversation(record, messages, trial)
                break
            except AgentError as exc:
                if attempt == self._retries:
                    raise AgentError(f"{exc} (after {attempt + 1} attempts)") from None
                await asyncio.sleep(self._retry.backoff(attempt + 1, self._rng))
        record.output.text = turns[-1].reply
        record.trajectory.CopyFrom(trajectory_of(turns, self.identity, conversation))
        # Latency includes retries, as a model target's does; the first byte is the first turn's.
        record.usage.latency.FromNanoseconds(time.perf_counter_ns() - started)
        if turns[0].ttfb_ms is not None:
            record.usage.time_to_first_token.FromNanoseconds(round(turns[0].ttfb_ms * 1e6))

    async def aclose(self) -> None:
        await self.transport.close()


class HarnessAgent:
    """The built-in reference agent on the target model: one harness (tools started once) per generate call.
    A record with an environment (its own, or the spec's) is worked in its sandbox with the shell and file
    tools, and graded by its checker (``evalsi.targets.environments``)."""

    def __init__(self, spec: RunSpec, harness: Any, *, opener: SandboxOpener | None = None, project: str = "",
                 environment: Environment | None = None) -> None:
        self.identity = harness_identity(spec)
        self._spec = spec
        self._harness = harness
        self._opener = opener
        self._project = project
        self._environment = environment

    def _task_input(self, record: Record) -> Any:
        model = self._spec.target.model
        messages = build_messages(record, model)
        if model.system_prompt:  # the harness sends its system prompt itself
            messages = messages[1:]
        if len(messages) == 1:
            return str(messages[0]["content"])
        return {"messages": [{"role": m["role"], "content": m["content"]} for m in messages]}

    async def respond(self, record: Record, *, trial: int, run_id: str) -> None:
        environment = record_environment(record, self._environment) if self._opener is not None else None
        if environment is None:
            await self._respond(record, trial=trial, run_id=run_id, session=None)
            return
        assert self._opener is not None

        async def act(session: EnvironmentSession) -> None:
            # The environment's MCP servers run in its sandbox while the agent works, their tools beside its own.
            async with environment_mcp_tools(environment, session) as tools:
                await self._respond(record, trial=trial, run_id=run_id, session=session, tools=tools)

        await in_environment(record, environment, self._opener, self._project, act)

    async def _respond(self, record: Record, *, trial: int, run_id: str, session: SandboxSession | None,
                       tools: Mapping[str, Tool] | None = None) -> None:
        result = await self._harness.run(Task(id=record.id, input=self._task_input(record)), trial=trial,
                                         run_id=run_id, session=session, tools=tools)
        if result.infra_error:
            raise AgentError(f"evalsi-harness: {result.error}")
        trial_record = result.record
        record.output.CopyFrom(trial_record.output)
        record.trajectory.CopyFrom(trial_record.trajectory)
        record.usage.CopyFrom(trial_record.usage)
        record.provenance.trace_id = trial_record.provenance.trace_id
        for key, value in trial_record.metadata.items():
            if key.startswith("harness."):
                record.metadata[key].CopyFrom(value)


@contextlib.asynccontextmanager
async def open_agent(target: Target, harness: HarnessSpec | None, *, trial: int, seed: int,
                     retry: RetryPolicy | None = None, endpoints: Endpoints | None = None,
                     sandbox: SandboxOpener | None = None, project: str = "",
                     environments: bool = False) -> AsyncIterator[Agent]:
    """The agent that answers this trial's records: a transport, a CLI agent in each record's sandbox, or the
    reference agent with the trial's seed. ``environments``: some record runs in an environment, opened with
    ``sandbox`` (the in-process ladder when None) in ``project``."""
    default = spec_environment(harness)
    if environments and sandbox is None:
        sandbox = LadderOpener()
    if generation_kind(target, harness) == "agent" and target.agent.WhichOneof("kind") == "cli":
        # A server's cli_agents: policy (checked at submit) is applied again here; embedded, none.
        policy = endpoints.cli_policy() if endpoints is not None else None
        yield CliAgent(target.agent.cli, opener=sandbox or LadderOpener(), project=project, default=default,
                       policy=policy)
        return
    if generation_kind(target, harness) == "agent":
        agent = TransportAgent(target.agent, retry=retry, endpoints=endpoints)
        try:
            yield agent
        finally:
            await agent.aclose()
        return

    assert harness is not None  # generation_kind says harness
    endpoints = endpoints or LocalEndpoints()
    endpoints.check_harness(harness)
    spec = RunSpec(seed=seed)
    spec.target.CopyFrom(target)
    spec.harness.CopyFrom(harness)
    config = harness_config_of(spec, seed=target_seed(target.model, seed, trial), endpoints=endpoints)
    connector: dict[str, Any] = {"retry": retry} if retry is not None else {}
    async with Harness.open(config, sandbox_tools=environments, **connector) as opened:
        yield HarnessAgent(spec, opened, opener=sandbox if environments else None, project=project,
                           environment=default)


async def generate_with_agent(
    records: Sequence[Record],
    target: Target,
    harness: HarnessSpec | None,
    *,
    trial: int,
    seed: int,
    identity: str,
    semaphore: asyncio.Semaphore,
    cancel: asyncio.Event | None,
    on_usage: UsageCallback | None,
    run_id: str,
    retry: RetryPolicy | None,
    endpoints: Endpoints | None = None,
    sandbox: SandboxOpener | None = None,
    project: str = "",
) -> Generation:
    """Copies of ``records`` answered by the agent (see ``evalsi.targets.generation.generate``); records with an
    environment run in a sandbox from ``sandbox`` (the in-process ladder when None)."""
    generation = Generation([copy_record(r) for r in records])
    for record in generation.records:
        stamp_for_generation(record, trial=trial, identity=identity, run_id=run_id)
        record.ClearField("trajectory")  # the agent's own steps replace any the dataset carried
    async with contextlib.AsyncExitStack() as stack:
        try:
            agent = await stack.enter_async_context(open_agent(
                target, harness, trial=trial, seed=seed, retry=retry, endpoints=endpoints, sandbox=sandbox,
                project=project, environments=any_environment(records, harness)))
        except InfraError as exc:  # the harness's tool servers could not start: no record can be answered
            return failed_generation(generation.records, trial=trial, kind="infra", reason=f"target {identity}: {exc}")

        async def one(index: int, record: Record) -> None:
            async with semaphore:
                if cancel is not None and cancel.is_set():
                    generation.failures[index] = TargetFailure("cancelled", "cancelled before the agent was called")
                    return
                try:
                    await agent.respond(record, trial=trial, run_id=run_id)
                except PromptError as exc:
                    generation.failures[index] = TargetFailure("skipped", f"target: {exc}")
                    return
                except InfraError as exc:
                    generation.failures[index] = TargetFailure("infra", f"target {identity}: {exc}")
                    return
            add_usage(generation.usage, record.usage)
            if on_usage is not None:
                on_usage(record.usage)

        await asyncio.gather(*(one(i, r) for i, r in enumerate(generation.records)))
    return generation
