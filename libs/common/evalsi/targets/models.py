"""Targets: what a run executes to get outputs, before grading them.

- ``outputs`` (or no target): the dataset already carries the outputs; records pass through unchanged.
- ``model``: a chat model behind the judges' connectors (OpenAI-compatible or Anthropic), with their
  retries, rate limits and circuit breaker. Each record becomes ``[system_prompt] + user prompt``, the
  prompt rendered from ``prompt_template`` (``{{input}}`` by default; ``{{reference}}``, ``{{id}}`` and
  ``{{metadata.<key>}}`` too). With the default template, an input that is a chat (messages) is sent as
  that conversation. Providers that take a seed (OpenAI-compatible) get ``seed + trial``, so trials differ
  but each is reproducible where the provider honours seeds.
- ``agent``, or ``model`` with ``spec.harness.builtin``: an agent performs each record as a task
  (``evalsi.targets.agents``): its answer is the output, its tool calls the trajectory.

A provider failure after retries is an infrastructure failure of that record (``TargetFailure`` kind
``infra``): its evaluations end ``ERROR``/infra and never count as a model failure. A record the prompt
template cannot be rendered for (no input, no such metadata key) is ``skipped``. Generated outputs are
never cached: the point of a run is to measure the target as it is now.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Protocol

import aiohttp

from evalsi.cli_agent_policy import CliAgentPolicy
from evalsi.errors import BadInputError, InfraError
from evalsi.judges import CircuitBreakers, Completion, Connector, JudgeConfig, ProviderError, RateLimiter, RetryPolicy
from evalsi.judges.connectors import make_connector
from evalsi.records import canonical_json, content_text, from_value, struct_dict
from evalsi.targets.config import DEFAULT_PROMPT_TEMPLATE, TEMPLATE_PLACEHOLDER, target_config, target_prices
from evalsi.targets.transports import open_transport
from evalsi.v1alpha1.record_pb2 import Content, Record, Usage
from evalsi.v1alpha1.run_pb2 import AgentTarget, HarnessSpec, ModelTarget, Target

if TYPE_CHECKING:
    from evalsi.cases.transport import Transport

FailureKind = Literal["infra", "skipped", "cancelled"]
UsageCallback = Callable[[Usage], None]


class Endpoints(Protocol):
    """Where a target's calls go and with which credential: the spec's own (embedded, ``LocalEndpoints``) or a
    server's configured connections (``evalsi.connection_rules.ServerEndpoints``)."""

    def model_config(self, model: ModelTarget, *, seed: int | None = None) -> JudgeConfig:
        """The connector config calling ``model`` (``seed`` replacing any seed in its params)."""

    def agent_transport(self, agent: AgentTarget) -> tuple[Transport, str]:
        """The transport to ``agent`` and the agent name its turns carry."""

    def check_harness(self, harness: HarnessSpec) -> None:
        """Refuse tools of the built-in harness these endpoints do not offer (``BadInputError``)."""

    def cli_policy(self) -> CliAgentPolicy | None:
        """The rules a CLI agent runs under (a server's ``cli_agents:``; ``BadInputError`` when it refuses them);
        None: no rules beyond the spec's (embedded)."""


@dataclass(frozen=True)
class LocalEndpoints:
    """Embedded runs: the spec's base URLs, and keys from this machine's environment (the user's own)."""

    environ: Mapping[str, str] | None = None

    def model_config(self, model: ModelTarget, *, seed: int | None = None) -> JudgeConfig:
        if model.connection:
            raise BadInputError(f"spec.target.model.connection: {model.connection!r} names a connection a server "
                                "configures; an embedded run gives connector, baseUrl and apiKeyEnv instead")
        return target_config(model, seed=seed)

    def agent_transport(self, agent: AgentTarget) -> tuple[Transport, str]:
        return open_transport(agent, os.environ if self.environ is None else self.environ)

    def check_harness(self, harness: HarnessSpec) -> None:
        """Embedded: the user's own tools on the user's own machine."""

    def cli_policy(self) -> CliAgentPolicy | None:
        """Embedded: the user's own command, in the sandbox the spec asks for."""
        return None


@dataclass(frozen=True)
class TargetFailure:
    """Why a record got no output: ``infra`` (provider down after retries), ``skipped`` (nothing to
    prompt with) or ``cancelled`` (the run stopped first)."""

    kind: FailureKind
    reason: str


@dataclass
class Generation:
    """The records of one generate call, in input order; a record in ``failures`` (by index) has no
    output. ``usage`` totals the target calls that answered."""

    records: list[Record]
    failures: dict[int, TargetFailure] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)

    def succeeded(self) -> list[Record]:
        return [r for i, r in enumerate(self.records) if i not in self.failures]





def target_seed(model: ModelTarget, run_seed: int, trial: int) -> int | None:
    """The seed sent for ``trial``: params.seed (or the run's seed) plus the trial; None when the provider takes
    no seed (only OpenAI-compatible APIs do)."""
    if (model.connector or "openai") == "anthropic":
        return None
    base = struct_dict(model, "params").get("seed")
    return int(base if isinstance(base, int) else run_seed) + trial


class PromptError(Exception):
    """The record lacks what the prompt template needs."""


def _render_content(content: Content) -> str:
    if content.WhichOneof("kind") == "messages":
        return "\n".join(f"{m.role}: {m.content}" for m in content.messages.messages)
    return content_text(content)


def render_prompt(record: Record, template: str = DEFAULT_PROMPT_TEMPLATE) -> str:
    """The user prompt for ``record`` (one pass: text from the record is never substituted again)."""

    def value(match: Any) -> str:
        name = match.group(1)
        if name == "id":
            return record.id
        if name in ("input", "reference"):
            if not record.HasField(name) or getattr(record, name).WhichOneof("kind") is None:
                raise PromptError(f"the record has no {name} for {{{{{name}}}}} in the prompt template")
            return _render_content(getattr(record, name))
        if name.startswith("metadata."):
            key = name[len("metadata.") :]
            if key not in record.metadata:
                raise PromptError(f"the record has no metadata {key!r} for {{{{{name}}}}} in the prompt template")
            plain = from_value(record.metadata[key])
            return plain if isinstance(plain, str) else canonical_json(plain)
        raise PromptError(f"unknown placeholder {{{{{name}}}}}")

    return TEMPLATE_PLACEHOLDER.sub(value, template)


def build_messages(record: Record, model: ModelTarget) -> list[dict[str, Any]]:
    """The chat messages sent to a model target for ``record``."""
    messages: list[dict[str, Any]] = []
    if model.system_prompt:
        messages.append({"role": "system", "content": model.system_prompt})
    if not model.prompt_template and record.input.WhichOneof("kind") == "messages":
        for message in record.input.messages.messages:
            item: dict[str, Any] = {"role": message.role, "content": message.content}
            if message.name:
                item["name"] = message.name
            messages.append(item)
        return messages
    prompt = render_prompt(record, model.prompt_template or DEFAULT_PROMPT_TEMPLATE)
    messages.append({"role": "user", "content": prompt})
    return messages


def _unhealthy(error: InfraError) -> bool:
    # As for judges: a 400 about one over-long prompt says nothing about the provider's health.
    return not (isinstance(error, ProviderError) and error.request_specific)


class TargetClient:
    """Calls one model target. Share ``limiter`` (and ``session``) with the run's judges so a model used
    as both draws from one quota. Use as ``async with TargetClient(model) as client``."""

    def __init__(
        self,
        model: ModelTarget,
        *,
        session: aiohttp.ClientSession | None = None,
        limiter: RateLimiter | None = None,
        breakers: CircuitBreakers | None = None,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], Any] = asyncio.sleep,
        rng: random.Random | None = None,
        environ: Mapping[str, str] | None = None,
        endpoints: Endpoints | None = None,
    ) -> None:
        """``endpoints`` resolve the model's endpoint and credential (default: the spec's own, as embedded)."""
        self.model = model
        self._endpoints = endpoints if endpoints is not None else LocalEndpoints(environ)
        self.config = self._endpoints.model_config(model)
        self.prices = target_prices(model)
        self._session = session
        self._owns_session = session is None
        self._limiter = limiter or RateLimiter()
        self._breaker = (breakers or CircuitBreakers()).for_model(self.config.provider, self.config.model)
        self._retry = retry
        self._sleep = sleep
        self._rng = rng
        self._environ = environ
        self._connectors: dict[int | None, Connector] = {}
        self.calls = 0
        self.failures = 0

    def seed_for(self, run_seed: int, trial: int) -> int | None:
        """The seed sent for ``trial``: params.seed (or the run's seed) plus the trial; None when unsupported."""
        return target_seed(self.model, run_seed, trial)

    def _connector(self, seed: int | None) -> Connector:
        connector = self._connectors.get(seed)
        if connector is None:
            config = self._endpoints.model_config(self.model, seed=seed) if seed is not None else self.config
            if self._session is None or self._session.closed:
                self._session = aiohttp.ClientSession()
                self._owns_session = True
            connector = make_connector(
                config,
                session=self._session,
                limiter=self._limiter.for_model(config.provider, config.model, rpm=config.rpm, tpm=config.tpm),
                retry=self._retry,
                sleep=self._sleep,
                rng=self._rng,
                environ=self._environ,
            )
            self._connectors[seed] = connector
        return connector

    async def complete(self, messages: Sequence[Mapping[str, Any]], *, seed: int | None = None) -> Completion:
        """One answer; ``InfraError`` when none could be had after retries (or while the breaker is open)."""
        connector = self._connector(seed)
        try:
            with self._breaker.guard(is_failure=_unhealthy):
                self.calls += 1
                return await connector.complete(messages)
        except InfraError:
            self.failures += 1
            raise

    def cost(self, input_tokens: int, output_tokens: int) -> float | None:
        if self.prices is None:
            return None
        price_in, price_out = self.prices
        return input_tokens / 1000 * price_in + output_tokens / 1000 * price_out

    @property
    def retries(self) -> int:
        return sum(c.retries for c in self._connectors.values())

    async def aclose(self) -> None:
        if self._owns_session and self._session is not None and not self._session.closed:
            await self._session.close()

    async def __aenter__(self) -> TargetClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def failed_generation(records: Sequence[Record], *, trial: int, kind: FailureKind, reason: str) -> Generation:
    """A generation in which no record got an output, each for ``reason`` (copies carry their trial)."""
    generation = Generation([copy_record(r) for r in records])
    for index, record in enumerate(generation.records):
        record.provenance.trial = trial
        generation.failures[index] = TargetFailure(kind, reason)
    return generation


def copy_record(record: Record) -> Record:
    out = Record()
    out.CopyFrom(record)
    return out


def stamp_for_generation(record: Record, *, trial: int, identity: str, run_id: str) -> None:
    """Make a dataset record's copy the target's to answer: its trial, target and run, the answer fields cleared."""
    record.provenance.trial = trial
    record.provenance.target = identity
    record.provenance.sample_id = record.provenance.sample_id or record.id
    if run_id:
        record.provenance.run_id = run_id
    record.ClearField("output")
    record.ClearField("usage")



async def generate_with_model(
    records: Sequence[Record],
    target: Target,
    *,
    trial: int,
    seed: int,
    identity: str,
    kind: str,
    semaphore: asyncio.Semaphore,
    client: TargetClient | None = None,
    cancel: asyncio.Event | None = None,
    on_usage: UsageCallback | None = None,
    run_id: str = "",
    retry: RetryPolicy | None = None,
    endpoints: Endpoints | None = None,
) -> Generation:
    """``generate`` for a model target, or for outputs given (``kind`` "outputs": copies stamped with provenance)."""
    if kind != "model":
        out = []
        for record in records:
            copy = copy_record(record)
            copy.provenance.target = identity
            if run_id:
                copy.provenance.run_id = run_id
            out.append(copy)
        return Generation(out)
    if client is None:
        async with TargetClient(target.model, retry=retry, endpoints=endpoints) as own:
            return await generate_with_model(
                records, target, trial=trial, seed=seed, identity=identity, kind=kind, client=own,
                semaphore=semaphore, cancel=cancel, on_usage=on_usage, run_id=run_id,
            )
    generation = Generation([copy_record(r) for r in records])
    call_seed = client.seed_for(seed, trial)

    async def one(index: int, record: Record) -> None:
        stamp_for_generation(record, trial=trial, identity=identity, run_id=run_id)
        try:
            messages = build_messages(record, target.model)
        except PromptError as exc:
            generation.failures[index] = TargetFailure("skipped", f"target: {exc}")
            return
        async with semaphore:
            if cancel is not None and cancel.is_set():
                generation.failures[index] = TargetFailure("cancelled", "cancelled before the target was called")
                return
            started = time.perf_counter_ns()
            try:
                completion = await client.complete(messages, seed=call_seed)
            except InfraError as exc:
                generation.failures[index] = TargetFailure("infra", f"target {identity}: {exc}")
                return
            elapsed = time.perf_counter_ns() - started
        record.output.text = completion.text
        usage = record.usage
        usage.input_tokens = completion.input_tokens
        usage.output_tokens = completion.output_tokens
        usage.total_tokens = completion.input_tokens + completion.output_tokens
        usage.latency.FromNanoseconds(elapsed)
        cost = client.cost(completion.input_tokens, completion.output_tokens)
        if cost is not None:
            usage.cost_usd = cost
        add_usage(generation.usage, usage)
        if on_usage is not None:
            on_usage(usage)

    await asyncio.gather(*(one(i, r) for i, r in enumerate(generation.records)))
    return generation



def add_usage(total: Usage, usage: Usage) -> None:
    total.input_tokens += usage.input_tokens
    total.output_tokens += usage.output_tokens
    total.total_tokens += usage.total_tokens
    if usage.HasField("cost_usd"):
        total.cost_usd += usage.cost_usd
