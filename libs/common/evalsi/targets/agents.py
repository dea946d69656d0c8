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
import dataclasses
import random
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from evalsi.errors import BadInputError, InfraError
from evalsi.judges import RetryPolicy
from evalsi.judges.redaction import redact
from evalsi.records import content_text, to_value
from evalsi.runs.spec import target_config, target_prices
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
    model_connection_identity,
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
    from evalsi.cases.transport import Transport
    from evalsi.harness import HarnessConfig

DEFAULT_AGENT_TIMEOUT_S = 120.0
AGENT_RETRIES = 2  # after the first attempt; each retry starts a fresh conversation
AGENT_TOKEN_ENV = "EVALSI_AGENT_TOKEN"  # the Bearer token sent to http and a2a agents, as `evalsi cases run`
TENANT = "platform"  # seed 002's default tenant: runs have no case tenant to send
_AGENT_KINDS = ("http", "a2a", "openai_responses", "python")
_JSON_NAMES = {"openai_responses": "openaiResponses"}
_STATUSES = {"ok": TOOL_CALL_STATUS_OK, "error": TOOL_CALL_STATUS_ERROR, "blocked": TOOL_CALL_STATUS_BLOCKED,
             None: TOOL_CALL_STATUS_UNSPECIFIED}


def generation_kind(target: Target, harness: HarnessSpec | None = None) -> str:
    """How a run gets its outputs: ``outputs`` (given), ``model``, ``agent`` or ``harness`` (the built-in
    reference agent on the target model)."""
    kind = target.WhichOneof("kind") or "outputs"
    if kind == "model" and harness is not None and harness.HasField("builtin"):
        return "harness"
    return kind


# --- identity and validation ------------------------------------------------------------------------------


def _where(kind: str) -> str:
    return f"spec.target.agent.{_JSON_NAMES.get(kind, kind)}"


def agent_identity(agent: AgentTarget) -> str:
    """What the manifest and provenance name: ``agent:http:http://host:8080 (agent shop)``."""
    kind = agent.WhichOneof("kind")
    if kind == "http":
        return f"agent:http:{agent.http.url} (agent {agent.http.agent})"
    if kind == "a2a":
        return f"agent:a2a:{agent.a2a.url}"
    if kind == "openai_responses":
        return f"agent:openai-responses:{agent.openai_responses.model} @ {agent.openai_responses.base_url}"
    if kind == "python":
        return f"agent:python:{agent.python.callable}"
    if kind == "connection":
        return f"agent:connection:{agent.connection}"
    return "agent:unknown"


def harness_identity(spec: RunSpec) -> str:
    """``evalsi-harness(maxSteps=5, tools=[py:tools:get_weather]) on openai-compatible:m @ http://host/v1``."""
    from evalsi.harness.config import DEFAULT_MAX_STEPS

    builtin = spec.harness.builtin
    tools = [f"py:{t}" for t in builtin.tools.python] + [f"mcp:{m.url or ' '.join(m.command)}" for m in
                                                         builtin.tools.mcp]
    model = spec.target.model
    head = f"evalsi-harness(maxSteps={builtin.max_steps or DEFAULT_MAX_STEPS}, tools=[{', '.join(tools)}]) on "
    if model.connection:
        return head + model_connection_identity(model)
    config = target_config(model)
    return head + f"{model.connector or 'openai'}:{config.model} @ {config.base_url}"


def _url_problem(where: str, url: str) -> str | None:
    if not url:
        return f"{where}: required (the agent's http:// or https:// URL)"
    if not url.startswith(("http://", "https://")):
        return f"{where}: expected an http:// or https:// URL, got {url!r}"
    return None


def agent_problems(agent: AgentTarget) -> list[str]:
    """What is wrong with ``spec.target.agent``, each naming its field path."""
    kind = agent.WhichOneof("kind")
    if kind is None:
        return ["spec.target.agent: give one transport: http (docs/agent-protocol.md), a2a, openaiResponses or "
                "python (an in-process callable)"]
    where = _where(kind)
    problems: list[str | None] = []
    if kind == "http":
        problems.append(_url_problem(f"{where}.url", agent.http.url))
        if not agent.http.agent:
            problems.append(f"{where}.agent: required (the agent id the deployment serves, sent with every turn)")
    elif kind == "a2a":
        problems.append(_url_problem(f"{where}.url", agent.a2a.url))
    elif kind == "openai_responses":
        problems.append(_url_problem(f"{where}.baseUrl", agent.openai_responses.base_url))
        if not agent.openai_responses.model:
            problems.append(f"{where}.model: required (the model or agent the endpoint answers as)")
    elif kind == "connection":
        if not agent.connection:
            problems.append(f"{where}: required (the name of an agent the server configures)")
    else:
        module, sep, attr = agent.python.callable.partition(":")
        if not (module and sep and attr):
            problems.append(f"{where}.callable: expected \"package.module:callable\", got {agent.python.callable!r}")
    for name in ("http", "a2a"):
        if kind == name and getattr(agent, name).HasField("timeout"):
            timeout = getattr(agent, name).timeout
            if timeout.seconds < 0 or timeout.nanos < 0 or timeout.ToNanoseconds() == 0:
                problems.append(f"{where}.timeout: must be longer than zero")
    return [p for p in problems if p]


def harness_problems(spec: RunSpec) -> list[str]:
    """What is wrong with ``spec.harness`` given the target, each naming its field path."""
    if not spec.harness.HasField("builtin"):
        return ["spec.harness: give builtin (the built-in reference agent); no other harness is built yet"]
    kind = spec.target.WhichOneof("kind")
    if kind == "agent":
        return ["spec.harness.builtin: the built-in harness runs the reference agent on spec.target.model; an agent "
                "target runs its own loop and tools (giving it the harness's tools, budgets or simulated user is "
                "not built yet): remove spec.harness, or use target.model"]
    if kind != "model":
        return ["spec.harness.builtin: needs spec.target.model, the model the reference agent runs on"]
    builtin = spec.harness.builtin
    problems = []
    if builtin.HasField("user_simulator"):
        problems.append("spec.harness.builtin.userSimulator: the simulated user is not built yet in runs; remove it "
                        "(persona cases run with `evalsi cases simulate`)")
    if builtin.max_steps < 0:
        problems.append(f"spec.harness.builtin.maxSteps: must be >= 1 (0 means the default), got {builtin.max_steps}")
    if builtin.budget.usd and target_prices(spec.target.model) is None:
        problems.append("spec.harness.builtin.budget.usd: needs the target's prices (price_per_1k_input and "
                        "price_per_1k_output in spec.target.model.params) to count dollars")
    if problems:
        return problems
    try:
        target_config(spec.target.model)
    except BadInputError:
        return problems  # the model target's own checks report it
    try:
        harness_config_of(spec)
    except BadInputError as exc:
        problems.append(str(exc))
    return problems


def harness_config_of(spec: RunSpec, *, seed: int | None = None, endpoints: Endpoints | None = None) -> HarnessConfig:
    """The reference agent's config: the target model (its connector, params and system prompt, ``seed`` when
    given), prices per million tokens from the target's per-thousand prices, and the BuiltinHarness's step limit,
    per-task budget and tools. Errors name ``spec.harness.builtin``."""
    from evalsi.harness import Pricing, config_from_mapping

    builtin = spec.harness.builtin
    budget: dict[str, Any] = {}
    if builtin.budget.tokens:
        budget["tokens"] = builtin.budget.tokens
    if builtin.budget.usd:
        budget["usd"] = builtin.budget.usd
    if builtin.budget.HasField("wall_clock"):
        budget["wall_clock"] = builtin.budget.wall_clock.ToTimedelta().total_seconds()
    prices = target_prices(spec.target.model)
    document: dict[str, Any] = {
        # The model is the target's, built below; this stand-in only lets the shared validation run.
        "model": {"model": "target"},
        "budget": budget,
        "tools": {"python": list(builtin.tools.python),
                  "mcp": [{"url": m.url} if m.url else {"command": list(m.command)} for m in builtin.tools.mcp]},
        "seed": max(0, spec.seed),
    }
    if builtin.max_steps:
        document["max_steps"] = builtin.max_steps
    if prices is not None:
        document["pricing"] = {"input_per_mtok": prices[0] * 1000, "output_per_mtok": prices[1] * 1000}
    config = config_from_mapping(document, source="spec.harness.builtin")
    pricing = Pricing(prices[0] * 1000, prices[1] * 1000) if prices is not None else None
    # No endpoints: validation, which names no credential and calls nothing.
    model = (endpoints.model_config(spec.target.model, seed=seed) if endpoints is not None
             else target_config(spec.target.model, seed=seed))
    return dataclasses.replace(config, model=model,
                               system=spec.target.model.system_prompt, pricing=pricing)


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


def _duration_s(message: Any, field: str) -> float:
    if not message.HasField(field):
        return DEFAULT_AGENT_TIMEOUT_S
    return float(getattr(message, field).ToTimedelta().total_seconds())


def open_transport(agent: AgentTarget, environ: Mapping[str, str]) -> tuple[Transport, str]:
    """The case transport for ``agent`` and the agent name its turns carry."""
    from evalsi.cases.transport import CallableTransport, HttpTransport
    from evalsi.cases.transport_a2a import A2ATransport
    from evalsi.cases.transport_responses import ResponsesTransport

    problems = agent_problems(agent)
    if problems:
        raise BadInputError("; ".join(problems))
    kind = agent.WhichOneof("kind")
    if kind == "connection":
        raise BadInputError(f"{_where(kind)}: {agent.connection!r} names an agent a server configures; an embedded "
                            "run gives http, a2a, openaiResponses or python instead")
    token = environ.get(AGENT_TOKEN_ENV) or None
    if kind == "http":
        return HttpTransport(agent.http.url, token=token, timeout=_duration_s(agent.http, "timeout")), agent.http.agent
    if kind == "a2a":
        return A2ATransport(agent.a2a.url, token=token, timeout=_duration_s(agent.a2a, "timeout")), "agent"
    if kind == "openai_responses":
        responses = agent.openai_responses
        key = environ.get(responses.api_key_env) if responses.api_key_env else token
        return ResponsesTransport(responses.base_url, model=responses.model, token=key or None), responses.model
    try:
        return CallableTransport.from_spec(agent.python.callable), "agent"
    except BadInputError as exc:
        raise BadInputError(f"{_where('python')}.callable: {str(exc).removeprefix('--agent-callable ')}") from None


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
        from evalsi.cases.transport import TransportError

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
    """The built-in reference agent on the target model: one harness (tools started once) per generate call."""

    def __init__(self, spec: RunSpec, harness: Any) -> None:
        self.identity = harness_identity(spec)
        self._spec = spec
        self._harness = harness

    def _task_input(self, record: Record) -> Any:
        model = self._spec.target.model
        messages = build_messages(record, model)
        if model.system_prompt:  # the harness sends its system prompt itself
            messages = messages[1:]
        if len(messages) == 1:
            return str(messages[0]["content"])
        return {"messages": [{"role": m["role"], "content": m["content"]} for m in messages]}

    async def respond(self, record: Record, *, trial: int, run_id: str) -> None:
        from evalsi.harness import Task

        result = await self._harness.run(Task(id=record.id, input=self._task_input(record)), trial=trial,
                                         run_id=run_id)
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
                     retry: RetryPolicy | None = None, endpoints: Endpoints | None = None) -> AsyncIterator[Agent]:
    """The agent that answers this trial's records: a transport, or the reference agent with the trial's seed."""
    if generation_kind(target, harness) == "agent":
        agent = TransportAgent(target.agent, retry=retry, endpoints=endpoints)
        try:
            yield agent
        finally:
            await agent.aclose()
        return
    from evalsi.harness import Harness

    assert harness is not None  # generation_kind says harness
    endpoints = endpoints or LocalEndpoints()
    endpoints.check_harness(harness)
    spec = RunSpec(seed=seed)
    spec.target.CopyFrom(target)
    spec.harness.CopyFrom(harness)
    config = harness_config_of(spec, seed=target_seed(target.model, seed, trial), endpoints=endpoints)
    connector: dict[str, Any] = {"retry": retry} if retry is not None else {}
    async with Harness.open(config, **connector) as opened:
        yield HarnessAgent(spec, opened)


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
) -> Generation:
    """Copies of ``records`` answered by the agent (see ``evalsi.targets.models.generate``)."""
    generation = Generation([copy_record(r) for r in records])
    for record in generation.records:
        stamp_for_generation(record, trial=trial, identity=identity, run_id=run_id)
        record.ClearField("trajectory")  # the agent's own steps replace any the dataset carried
    async with contextlib.AsyncExitStack() as stack:
        try:
            agent = await stack.enter_async_context(open_agent(target, harness, trial=trial, seed=seed, retry=retry,
                                                                    endpoints=endpoints))
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
