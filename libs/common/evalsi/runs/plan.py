"""Run planning: a run's work as shards and tasks with deterministic keys, its projected size and cost.

Pure functions over the spec, the bound evaluators and the records: the embedded runner, the server's
scheduler and ``evalsi run --dry-run`` all use them, so the same spec plans the same tasks everywhere.

Decomposition (plan §14): samples are split into shards (contiguous ranges of sample indexes, 500 by
default). Per shard and trial there is one ``generate`` task (when the target generates outputs) and one
``evaluate`` task per record- or span-scope evaluator, which depends only on that shard's generation, so
evaluation of a shard starts as soon as its outputs exist. Session- and dataset-scope evaluators need
every record, so they run once in a ``reduce`` task after all generation.

Task keys (the JetStream message id and the store's upsert key, so redelivery and resume never
double-count)::

    {run_id}/{shard}/generate/{trial}/target
    {run_id}/{shard}/evaluate/{trial}/{alias}@{version}
    {run_id}/*/reduce/*/{alias}@{version}

``shard`` and ``trial`` are decimal indexes from 0 (``*`` where a task spans all of them); ``alias`` is
the evaluator's alias in the spec and ``version`` its semantic version. With outputs given, trials come
from the data, and the single planned trial is 0. A per-record result's key is
``{run_id}/{sample_id}/{trial}/{alias}`` (``result_key``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from evalsi.datasets.shards import DEFAULT_SHARD_SIZE  # a run's shards are its stored dataset's shards
from evalsi.evaluators import BoundEvaluator, Registry
from evalsi.evaluators.runner import session_key
from evalsi.records import content_text
from evalsi.runs.binding import resolve_evaluators
from evalsi.runs.spec import trials_of
from evalsi.targets.config import target_config, target_prices
from evalsi.targets.identity import generation_kind
from evalsi.targets.models import PromptError, build_messages
from evalsi.v1alpha1.record_pb2 import Record, Usage
from evalsi.v1alpha1.run_pb2 import Budget, EvalRun, ModelTarget, Run, RunSpec

Stage = Literal["generate", "evaluate", "reduce"]
STAGES: tuple[Stage, ...] = ("generate", "evaluate", "reduce")
GENERATE_POOL = "judge"  # provider-bound I/O, like judges (plan §14 pools)
AGENT_POOL = "harness"  # agent and harness trials: long, tool-running tasks (DESIGN.md pools)
CLI_AGENT_POOL = "sandbox"  # a CLI agent is a caller's command: it runs where sandboxd is (compose: worker-sandbox)
ALL = "*"

# Projection assumptions, stated in the projection's notes.
CHARS_PER_TOKEN = 4
JUDGE_TEMPLATE_TOKENS = 250  # the built-in judge templates are about 1,000 characters
JUDGE_OUTPUT_TOKENS = 200  # a judge's reasoning and score when its params set no max_tokens


@dataclass(frozen=True)
class Shard:
    """Samples ``start`` (inclusive) to ``stop`` (exclusive), by position in the dataset."""

    index: int
    start: int
    stop: int

    @property
    def size(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class PlannedEvaluator:
    alias: str
    ref: str  # builtin/exact-match@1.0.0
    version: str
    scope: str
    pool: str
    stage: Stage  # evaluate (per shard) or reduce (once, over everything)
    judge: str  # the named judge it uses, "" when it needs none

    @property
    def key_name(self) -> str:
        return f"{self.alias}@{self.version}"


@dataclass(frozen=True)
class Task:
    key: str
    stage: Stage
    pool: str
    shard: int | None  # None: all shards
    trial: int | None  # None: all trials
    evaluator: str = ""  # alias; "" for generate
    ref: str = ""
    start: int = 0
    stop: int = 0
    depends_on: tuple[str, ...] = ()


@dataclass(frozen=True)
class Plan:
    run_id: str
    spec: RunSpec
    samples: int
    shard_size: int
    shards: tuple[Shard, ...]
    trials: int
    generates: bool
    evaluators: tuple[PlannedEvaluator, ...]
    # How outputs are generated: outputs (given), model, agent or harness (evalsi.targets.identity.generation_kind).
    generation: str = "outputs"

    @property
    def generate_pool(self) -> str:
        """The pool of generate tasks: ``harness`` for agents and the built-in harness, ``judge`` for models, and
        ``sandbox`` for a CLI agent (a command run in sandboxd's sandboxes, like the code evaluators)."""
        if self.generation == "agent" and self.spec.target.agent.WhichOneof("kind") == "cli":
            return CLI_AGENT_POOL
        return AGENT_POOL if self.generation in ("agent", "harness") else GENERATE_POOL

    @property
    def pools(self) -> dict[str, tuple[str, ...]]:
        """Evaluator aliases by worker pool (``cpu``, ``judge``, ...)."""
        pools: dict[str, list[str]] = {}
        for ev in self.evaluators:
            pools.setdefault(ev.pool, []).append(ev.alias)
        return {pool: tuple(aliases) for pool, aliases in pools.items()}

    @property
    def shard_evaluators(self) -> tuple[PlannedEvaluator, ...]:
        return tuple(ev for ev in self.evaluators if ev.stage == "evaluate")

    @property
    def reduce_evaluators(self) -> tuple[PlannedEvaluator, ...]:
        return tuple(ev for ev in self.evaluators if ev.stage == "reduce")

    def task_counts(self) -> dict[str, int]:
        units = len(self.shards) * self.trials
        return {
            "generate": units if self.generates else 0,
            "evaluate": units * len(self.shard_evaluators),
            "reduce": len(self.reduce_evaluators),
        }

    @property
    def task_count(self) -> int:
        return sum(self.task_counts().values())

    def tasks(self) -> Iterator[Task]:
        """Every task, generated lazily (a large run's plan never needs all of them in memory)."""
        generate_keys: list[str] = []
        for trial in range(self.trials):
            for shard in self.shards:
                depends: tuple[str, ...] = ()
                if self.generates:
                    key = task_key(self.run_id, shard.index, "generate", trial, "target")
                    generate_keys.append(key)
                    depends = (key,)
                    yield Task(key, "generate", self.generate_pool, shard.index, trial, start=shard.start,
                               stop=shard.stop)
                for ev in self.shard_evaluators:
                    yield Task(
                        task_key(self.run_id, shard.index, "evaluate", trial, ev.key_name),
                        "evaluate",
                        ev.pool,
                        shard.index,
                        trial,
                        evaluator=ev.alias,
                        ref=ev.ref,
                        start=shard.start,
                        stop=shard.stop,
                        depends_on=depends,
                    )
        for ev in self.reduce_evaluators:
            yield Task(
                task_key(self.run_id, ALL, "reduce", ALL, ev.key_name),
                "reduce",
                ev.pool,
                None,
                None,
                evaluator=ev.alias,
                ref=ev.ref,
                start=0,
                stop=self.samples,
                depends_on=tuple(generate_keys),
            )


def task_key(run_id: str, shard: int | str, stage: Stage, trial: int | str, name: str) -> str:
    """``{run_id}/{shard}/{stage}/{trial}/{name}``; name is ``target`` or ``alias@version``."""
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {', '.join(STAGES)}, got {stage!r}")
    return f"{run_id}/{shard}/{stage}/{trial}/{name}"


def result_key(run_id: str, sample_id: str, trial: int, alias: str) -> str:
    """The upsert key of one per-record result: (run, sample, trial, evaluator alias)."""
    return f"{run_id}/{sample_id}/{trial}/{alias}"


def plan_run(
    run: EvalRun,
    records: Sequence[Record] | int,
    *,
    evaluators: Sequence[BoundEvaluator],
    run_id: str,
    shard_size: int = DEFAULT_SHARD_SIZE,
) -> Plan:
    """The plan of ``run`` over ``records`` (or their number) with its bound evaluators."""
    if shard_size < 1:
        raise ValueError(f"shard_size must be >= 1, got {shard_size}")
    if "/" in run_id or not run_id:
        raise ValueError(f"run_id must be non-empty and without '/', got {run_id!r}")
    samples = records if isinstance(records, int) else len(records)
    shards = tuple(
        Shard(index, start, min(start + shard_size, samples))
        for index, start in enumerate(range(0, samples, shard_size))
    )
    generation = generation_kind(run.spec.target, run.spec.harness)
    generates = generation != "outputs"
    planned = []
    for b in evaluators:
        ev = b.evaluator
        stage: Stage = "reduce" if ev.scope in ("session", "dataset") else "evaluate"
        planned.append(
            PlannedEvaluator(
                alias=b.alias,
                ref=ev.ref,
                version=ev.version,
                scope=ev.scope,
                pool=ev.pool,
                stage=stage,
                judge=b.judge if "judge" in ev.requires else "",
            )
        )
    return Plan(
        run_id=run_id,
        spec=run.spec,
        samples=samples,
        shard_size=shard_size,
        shards=shards,
        trials=trials_of(run) if generates else 1,
        generates=generates,
        evaluators=tuple(planned),
        generation=generation,
    )


# --- projection ----------------------------------------------------------------------------------------


@dataclass
class Projection:
    """What a run is expected to do and cost, before it runs. ``None`` figures could not be projected;
    ``unknown`` says why, ``notes`` states the assumptions."""

    tasks: int = 0
    tasks_by_stage: dict[str, int] = field(default_factory=dict)
    tasks_by_pool: dict[str, int] = field(default_factory=dict)
    evaluations: int = 0
    target_calls: int = 0
    target_input_tokens: int = 0
    target_output_tokens: int | None = 0
    target_cost_usd: float | None = 0.0
    judge_calls: int = 0
    judge_input_tokens: int = 0
    judge_output_tokens: int = 0
    judge_cost_usd: float | None = 0.0
    unknown: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def total_tokens(self) -> int:
        """Target plus judge tokens (the figure ``spec.budget.tokens`` limits); a lower bound when the
        target's output could not be bounded."""
        return self.target_input_tokens + (self.target_output_tokens or 0) + self.judge_input_tokens + (
            self.judge_output_tokens
        )

    @property
    def total_cost_usd(self) -> float | None:
        if self.target_cost_usd is None and self.judge_cost_usd is None:
            return None
        return (self.target_cost_usd or 0.0) + (self.judge_cost_usd or 0.0)

    def to_dict(self) -> dict[str, object]:
        return {
            "tasks": self.tasks,
            "tasksByStage": self.tasks_by_stage,
            "tasksByPool": self.tasks_by_pool,
            "evaluations": self.evaluations,
            "target": {
                "calls": self.target_calls,
                "inputTokens": self.target_input_tokens,
                "outputTokens": self.target_output_tokens,
                "costUsd": self.target_cost_usd,
            },
            "judges": {
                "calls": self.judge_calls,
                "inputTokens": self.judge_input_tokens,
                "outputTokens": self.judge_output_tokens,
                "costUsd": self.judge_cost_usd,
            },
            "totalTokens": self.total_tokens,
            "totalCostUsd": self.total_cost_usd,
            "unknown": self.unknown,
            "notes": self.notes,
        }


def _tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


def _record_chars(record: Record) -> int:

    chars = sum(len(content_text(getattr(record, f))) for f in ("input", "reference", "output") if record.HasField(f))
    return chars + sum(len(content_text(c)) for c in record.context)


@dataclass
class RecordTally:
    """What a projection needs to know of a dataset, gathered one record at a time and keeping none: a dry run of
    any size holds one record (and the session ids, when a session evaluator counts them)."""

    model: ModelTarget | None = None  # the target's model: its prompts are counted
    count_sessions: bool = False
    records: int = 0
    prompt_tokens: int = 0  # one trial's target prompts
    chars: int = 0  # of inputs, references, outputs and contexts: what judge prompts carry
    steps: int = 0
    _sessions: set[str] = field(default_factory=set)

    @classmethod
    def for_spec(cls, spec: RunSpec, scopes: Iterable[str]) -> RecordTally:
        """The tally a run of ``spec`` with evaluators of these ``scopes`` needs."""
        return cls(model=spec.target.model if spec.target.HasField("model") else None,
                   count_sessions="session" in set(scopes))

    def add(self, record: Record) -> None:
        self.records += 1
        if self.model is not None:
            try:
                messages = build_messages(record, self.model)
            except PromptError:
                messages = []
            self.prompt_tokens += _tokens(sum(len(str(m.get("content", ""))) for m in messages))
        self.chars += _record_chars(record)
        self.steps += len(record.trajectory.steps)
        if self.count_sessions:
            self._sessions.add(session_key(record) or record.id)

    def add_all(self, records: Iterable[Record]) -> RecordTally:
        for record in records:
            self.add(record)
        return self

    @property
    def sessions(self) -> int:
        return len(self._sessions)


def projection(plan: Plan, tally: RecordTally) -> Projection:
    """Tasks, evaluations, tokens and cost the plan is expected to need (≈ 4 characters per token), from the
    dataset's tally (``RecordTally.for_spec(...).add_all(records)``)."""
    spec = plan.spec
    out = Projection()
    counts = plan.task_counts()
    out.tasks = plan.task_count
    out.tasks_by_stage = {stage: n for stage, n in counts.items() if n}
    pools: dict[str, int] = {}
    units = len(plan.shards) * plan.trials
    if plan.generates:
        pools[plan.generate_pool] = pools.get(plan.generate_pool, 0) + units
    for ev in plan.evaluators:
        pools[ev.pool] = pools.get(ev.pool, 0) + (units if ev.stage == "evaluate" else 1)
    out.tasks_by_pool = pools
    trials = plan.trials
    out.notes.append(f"tokens are estimated at {CHARS_PER_TOKEN} characters per token")

    max_tokens = None
    if plan.generation in ("agent", "harness"):
        out.target_calls = tally.records * trials
        out.target_output_tokens = out.target_cost_usd = None
        out.unknown.append(
            "target tokens and cost: an agent takes as many steps as it needs (the harness's per-task budget bounds "
            "each task)"
        )
    elif plan.generates:
        model = spec.target.model
        config = target_config(model)
        max_tokens = config.params.get("max_tokens") or config.params.get("max_completion_tokens")
        out.target_calls = tally.records * trials
        out.target_input_tokens = tally.prompt_tokens * trials
        if isinstance(max_tokens, int):
            out.target_output_tokens = max_tokens * out.target_calls
            out.notes.append(f"target output tokens are the upper bound max_tokens ({max_tokens}) per call")
        else:
            out.target_output_tokens = None
            out.unknown.append("target output tokens: the target's params set no max_tokens, so they are unbounded")
        prices = target_prices(model)
        if prices is None:
            out.target_cost_usd = None
            out.unknown.append(
                "target cost: no prices (set price_per_1k_input and price_per_1k_output in spec.target.model.params)"
            )
        elif out.target_output_tokens is None:
            out.target_cost_usd = None
            out.unknown.append("target cost: the output tokens are unbounded (no max_tokens)")
        else:
            out.target_cost_usd = (
                out.target_input_tokens / 1000 * prices[0] + out.target_output_tokens / 1000 * prices[1]
            )

    judged_outputs = max_tokens if isinstance(max_tokens, int) else 0
    for ev in plan.evaluators:
        if ev.scope == "record":
            n = tally.records * trials
        elif ev.scope == "span":
            n = tally.steps * trials
        elif ev.scope == "session":
            n = tally.sessions
        else:
            n = 1
        out.evaluations += n
        if ev.pool != "judge" or ev.scope not in ("record", "span"):
            continue
        out.judge_calls += n
        chars = tally.chars * trials
        out.judge_input_tokens += _tokens(chars) + (JUDGE_TEMPLATE_TOKENS + judged_outputs) * n
        judge = spec.judges.get(ev.judge) if ev.judge else None
        judge_max = None
        if judge is not None and judge.HasField("params") and "max_tokens" in judge.params.fields:
            judge_max = int(judge.params.fields["max_tokens"].number_value)
        out.judge_output_tokens += (judge_max or JUDGE_OUTPUT_TOKENS) * n
    if out.judge_calls:
        out.judge_cost_usd = None
        out.unknown.append("judge cost: judges carry no prices; only their tokens are projected")
        out.notes.append(
            f"judge prompts are the record's text plus about {JUDGE_TEMPLATE_TOKENS} tokens of template; judge "
            f"answers take max_tokens from the judge's params, or about {JUDGE_OUTPUT_TOKENS} tokens"
        )
        if plan.generates and not isinstance(max_tokens, int):
            out.notes.append("judge prompts leave out the generated outputs, whose length is unbounded")
        out.notes.append("cached judge answers cost nothing; the projection assumes none are cached")
    return out


# --- budgets -------------------------------------------------------------------------------------------


def budget_exceeded(budget: Budget, usage: Usage) -> str | None:
    """Which budget ``usage`` (target plus judges) is over, and by how much; None while within both.

    ``spec.budget.tokens`` limits input plus output tokens; ``spec.budget.usd`` the cost known so far
    (0 in either means no limit). The wall clock: :func:`wall_clock_exceeded`.
    """
    tokens = usage.total_tokens or usage.input_tokens + usage.output_tokens
    if budget.tokens and tokens > budget.tokens:
        over = tokens - budget.tokens
        return f"token budget exceeded: {tokens:,} tokens used of {budget.tokens:,} (over by {over:,})"
    if budget.usd and usage.cost_usd > budget.usd:
        over_usd = usage.cost_usd - budget.usd
        return f"cost budget exceeded: ${usage.cost_usd:.4f} spent of ${budget.usd:.4f} (over by ${over_usd:.4f})"
    return None


def wall_clock_seconds(budget: Budget) -> float:
    """``spec.budget.wallClock`` in seconds; 0 means no limit."""
    return budget.wall_clock.ToTimedelta().total_seconds() if budget.HasField("wall_clock") else 0.0


def wall_clock_exceeded(budget: Budget, elapsed_s: float) -> str | None:
    """Why a run that has been running ``elapsed_s`` seconds (from its start) is over its wall-clock budget;
    None while within it or without one."""
    limit = wall_clock_seconds(budget)
    if limit > 0 and elapsed_s >= limit:
        return f"wall-clock budget exceeded: {limit:g} s elapsed"
    return None


def bound_of(run: Run, registry: Registry) -> list[BoundEvaluator]:
    return resolve_evaluators(list(run.spec.evaluators), registry)


def generates_outputs(run: Run) -> bool:
    """Whether a target (a model, an agent or the built-in harness) generates the run's outputs."""
    return generation_kind(run.spec.target, run.spec.harness) != "outputs"


def plan_of(run: Run, n_records: int, bound: Sequence[BoundEvaluator], shard_size: int = DEFAULT_SHARD_SIZE) -> Plan:
    """The run's plan: the same planner as the embedded mode, so keys and shards agree everywhere."""
    return plan_run(EvalRun(spec=run.spec), n_records, evaluators=bound, run_id=run.id, shard_size=shard_size)


def planned_task_count(
    document: EvalRun, n_records: int, *, registry: Registry, shard_size: int = DEFAULT_SHARD_SIZE
) -> int:
    """How many tasks the scheduler will plan for ``document``: a run's ``progress.total_tasks`` from PENDING on."""
    bound = resolve_evaluators(list(document.spec.evaluators), registry)
    return plan_run(document, n_records, evaluators=bound, run_id="pending", shard_size=shard_size).task_count
