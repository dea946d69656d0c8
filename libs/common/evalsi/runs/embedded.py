"""The embedded Run path: ``evalsi run -f run.yaml`` executes a target over a dataset, then grades it.

In-process with asyncio, on the same planner, runner and summaries as ``evalsi eval`` and the server:
the numbers of a run over given outputs are exactly those of ``evalsi eval`` on the same file.

Per trial and shard (planning.py), generation then evaluation, pipelined: a shard's evaluation starts as
soon as its outputs exist; session- and dataset-scope evaluators run once at the end over everything.
Target calls, judge calls and evaluator concurrency are bounded by ``spec.concurrency`` (16 by default).

Budgets are checked as usage comes in (each target answer, each judge answer): once ``spec.budget.tokens``
or ``spec.budget.usd`` is exceeded, or ``wallClock`` has elapsed, calls in flight finish and everything not
yet started ends ``CANCELLED``; the run's state is ``RUN_STATE_BUDGET_EXCEEDED`` with a message naming the
budget and the overrun.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalsi.datasets import Dataset, load_dataset
from evalsi.errors import BadInputError
from evalsi.evaluators import BoundEvaluator, EvalContext, Registry
from evalsi.evaluators.runner import RunnerOptions, run_evaluators, units_total
from evalsi.judges import Completion, JudgeClient, JudgeConfig, RateLimiter, RetryPolicy
from evalsi.judges.panel import JudgeSet
from evalsi.records import has_content
from evalsi.runs.gates import evaluate_gates
from evalsi.runs.outcome import TargetCalls, bootstrap_seed, final_state, run_manifest, target_calls_of
from evalsi.runs.plan import (
    DEFAULT_SHARD_SIZE,
    Plan,
    Projection,
    budget_exceeded,
    plan_run,
    projection,
    wall_clock_exceeded,
    wall_clock_seconds,
)
from evalsi.runs.results import EvaluationResults
from evalsi.runs.spec import (
    bind_evaluators,
    judge_configs_of,
    resolve_dataset_path,
    target_kind,
    validate_eval_run,
)
from evalsi.runs.summary import summarize_results
from evalsi.sdk import interrupt_sets, progress_bar, progress_counts, timestamp_of
from evalsi.stats.defaults import DEFAULT_BOOTSTRAP_RESAMPLES
from evalsi.targets.generation import generate
from evalsi.targets.models import Generation, TargetClient, TargetFailure
from evalsi.v1alpha1.record_pb2 import Record, Usage
from evalsi.v1alpha1.run_pb2 import EvalRun, Run, RunState
from evalsi.v1alpha1.score_pb2 import (
    ERROR_KIND_INFRA,
    OUTCOME_CANCELLED,
    OUTCOME_ERROR,
    OUTCOME_SKIPPED,
    EvaluationResult,
    SummaryOptions,
)

DEFAULT_CONCURRENCY = 16
# Shards whose generate->evaluate pipelines run at once; the semaphores bound the calls themselves.
_PIPELINES = 4


@dataclass
class PreparedRun:
    """A validated run with everything resolved, before anything is called (``--dry-run`` stops here)."""

    run: EvalRun
    run_id: str
    evaluators: list[BoundEvaluator]
    judges: dict[str, JudgeConfig]
    dataset: Dataset
    plan: Plan


@dataclass
class RunOutcome:
    """What ``execute_run`` returns: the result document, the records evaluated (with generated outputs,
    trial-major then dataset order) and the plan it followed."""

    results: EvaluationResults
    records: list[Record]
    plan: Plan


def new_run_id() -> str:
    return f"local-{uuid.uuid4().hex[:12]}"


def load_run_dataset(run: EvalRun, *, base_dir: Path | None = None, datasets_dir: Path | None = None) -> Dataset:
    """The spec's dataset: ``path`` (relative to ``base_dir``) or ``hf``; a stored ``ref`` needs a server."""
    source = run.spec.dataset
    kind = source.WhichOneof("kind")
    mapping = dict(source.mapping) or None
    limit = source.limit or None
    if kind == "ref":
        raise BadInputError(
            f"spec.dataset.ref: {source.ref!r} is a stored dataset, which needs the server; embedded runs read "
            "files (spec.dataset.path) or Hugging Face datasets (spec.dataset.hf)"
        )
    if kind == "hf":
        return load_dataset(source.hf, mapping=mapping, limit=limit, split=source.split or None)
    if kind != "path":
        raise BadInputError("spec.dataset: required: a path (a file) or hf (hf://owner/name)")
    path = resolve_dataset_path(run, base_dir=base_dir, datasets_dir=datasets_dir)
    if source.split:
        raise BadInputError(f"spec.dataset.split: applies to hf datasets only, not to the file {source.path!r}")
    return load_dataset(path, mapping=mapping, limit=limit, format=source.format or None)


def prepare_run(
    run: EvalRun,
    *,
    base_dir: Path | None = None,
    datasets_dir: Path | None = None,
    registry: Registry | None = None,
    run_id: str | None = None,
    shard_size: int = DEFAULT_SHARD_SIZE,
    source: str = "",
) -> PreparedRun:
    """Validate, bind the evaluators, read the dataset and plan; calls nothing."""
    registry = registry or Registry.from_entry_points()
    validate_eval_run(run, registry=registry, datasets_dir=datasets_dir, base_dir=base_dir, source=source)
    evaluators = bind_evaluators(run, registry)
    judges = judge_configs_of(run)
    dataset = load_run_dataset(run, base_dir=base_dir, datasets_dir=datasets_dir)
    if target_kind(run) == "outputs" and not any(has_content(r, "output") for r in dataset.records):
        raise BadInputError(
            f"{dataset.source}: no record has an output; with target.outputs (or no target) the dataset must "
            "carry the outputs; to generate them, give spec.target.model"
        )
    run_id = run_id or new_run_id()
    plan = plan_run(run, dataset.records, evaluators=evaluators, run_id=run_id, shard_size=shard_size)
    return PreparedRun(run, run_id, evaluators, judges, dataset, plan)


def dry_run(
    run: EvalRun,
    *,
    base_dir: Path | None = None,
    datasets_dir: Path | None = None,
    registry: Registry | None = None,
    source: str = "",
) -> tuple[PreparedRun, Projection]:
    """The plan and its projection (tasks, evaluations, tokens, cost), without calling any model."""
    prepared = prepare_run(run, base_dir=base_dir, datasets_dir=datasets_dir, registry=registry, source=source)
    return prepared, projection(prepared.plan, prepared.dataset.records)


# --- usage and budgets ---------------------------------------------------------------------------------


@dataclass
class _Meter:
    """Target and judge usage as it arrives; stops the run when a budget is exceeded."""

    run: EvalRun
    stop: asyncio.Event
    target: Usage = field(default_factory=Usage)
    judges: Usage = field(default_factory=Usage)
    exceeded: str = ""

    def total(self) -> Usage:
        usage = Usage()
        for part in (self.target, self.judges):
            usage.input_tokens += part.input_tokens
            usage.output_tokens += part.output_tokens
            usage.cost_usd += part.cost_usd
        usage.total_tokens = usage.input_tokens + usage.output_tokens
        return usage

    def add_target(self, usage: Usage) -> None:
        self.target.input_tokens += usage.input_tokens
        self.target.output_tokens += usage.output_tokens
        self.target.total_tokens += usage.input_tokens + usage.output_tokens
        self.target.cost_usd += usage.cost_usd
        self._check()

    def add_judge(self, completion: Completion) -> None:
        if completion.cached:
            return
        self.judges.input_tokens += completion.input_tokens
        self.judges.output_tokens += completion.output_tokens
        self.judges.total_tokens += completion.input_tokens + completion.output_tokens
        self._check()

    def exceed(self, message: str) -> None:
        if not self.exceeded:
            self.exceeded = message
            self.stop.set()

    def _check(self) -> None:
        if not self.exceeded:
            message = budget_exceeded(self.run.spec.budget, self.total())
            if message:
                self.exceed(message)


class _MeteredJudge:
    """A judge client seen through the run: calls share one concurrency bound, and usage is metered."""

    def __init__(self, client: JudgeClient, semaphore: asyncio.Semaphore, meter: _Meter) -> None:
        self._client = client
        self._semaphore = semaphore
        self._meter = meter

    async def complete(self, messages: Sequence[Mapping[str, Any]], *, template_hash: str = "") -> Completion:
        async with self._semaphore:
            completion = await self._client.complete(messages, template_hash=template_hash)
        self._meter.add_judge(completion)
        return completion

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


# --- results of records that got no output -------------------------------------------------------------


def failure_result(record: Record, bound: BoundEvaluator, failure: TargetFailure) -> EvaluationResult:
    """The result of an evaluator on a record the target produced nothing for."""
    result = EvaluationResult(
        record_id=record.id, evaluator=bound.alias, evaluator_ref=bound.evaluator.ref, trial=record.provenance.trial
    )
    result.reason = failure.reason
    if failure.kind == "infra":
        result.outcome, result.error_kind = OUTCOME_ERROR, ERROR_KIND_INFRA
    elif failure.kind == "skipped":
        result.outcome = OUTCOME_SKIPPED
    else:
        result.outcome = OUTCOME_CANCELLED
    return result


def _merge(generation: Generation, results: list[EvaluationResult], bound: BoundEvaluator) -> list[EvaluationResult]:
    """Shard results in record order, the failed records' results in their places."""
    if not generation.failures:
        return results
    out: list[EvaluationResult] = []
    position = 0
    span = bound.evaluator.scope == "span"
    for index, record in enumerate(generation.records):
        failure = generation.failures.get(index)
        if failure is not None:
            out.append(failure_result(record, bound, failure))
            continue
        count = len(record.trajectory.steps) if span else 1
        out.extend(results[position : position + count])
        position += count
    out.extend(results[position:])
    return out


# --- the run -------------------------------------------------------------------------------------------


async def run_embedded(
    run: EvalRun,
    *,
    base_dir: Path | None = None,
    cache: bool = True,
    progress: bool = False,
    cancel: asyncio.Event | None = None,
    **options: Any,
) -> EvaluationResults:
    """Run ``run`` in-process and return its result document (see :func:`execute_run` for options)."""
    outcome = await execute_run(run, base_dir=base_dir, cache=cache, progress=progress, cancel=cancel, **options)
    return outcome.results


async def execute_run(
    run: EvalRun,
    *,
    base_dir: Path | None = None,
    datasets_dir: Path | None = None,
    registry: Registry | None = None,
    cache: bool = True,
    cache_dir: str | Path | None = None,
    progress: bool = False,
    cancel: asyncio.Event | None = None,
    stop_on_interrupt: bool = False,
    run_id: str | None = None,
    shard_size: int = DEFAULT_SHARD_SIZE,
    retry: RetryPolicy | None = None,
    source: str = "",
    prepared: PreparedRun | None = None,
) -> RunOutcome:
    """Validate, plan, generate, evaluate, summarize and gate ``run``.

    ``base_dir`` is the spec file's folder (relative dataset paths); ``datasets_dir`` confines dataset
    paths; ``cache`` is the judge cache (target outputs are never cached); setting ``cancel`` stops the
    run (state CANCELLED), and with ``stop_on_interrupt`` the first Ctrl-C sets it. ``retry`` overrides
    the target connector's waits between retries (tests).
    """
    started = time.time()
    if prepared is None:
        prepared = prepare_run(
            run, base_dir=base_dir, datasets_dir=datasets_dir, registry=registry, run_id=run_id,
            shard_size=shard_size, source=source,
        )
    run, plan, bound, dataset = prepared.run, prepared.plan, prepared.evaluators, prepared.dataset
    spec = run.spec
    concurrency = spec.concurrency or DEFAULT_CONCURRENCY
    summary_options = spec.summary
    runner_options = RunnerOptions(
        concurrency=concurrency,
        confidence=summary_options.confidence or 0.95,
        seed=bootstrap_seed(summary_options),
        bootstrap_resamples=summary_options.bootstrap_resamples or DEFAULT_BOOTSTRAP_RESAMPLES,
    )
    stop = asyncio.Event()
    meter = _Meter(run, stop)
    cancel = cancel or asyncio.Event()
    by_alias = {b.alias: b for b in bound}
    shard_bound = [by_alias[ev.alias] for ev in plan.shard_evaluators]
    reduce_bound = [by_alias[ev.alias] for ev in plan.reduce_evaluators]
    generations: dict[tuple[int, int], Generation] = {}
    slots: dict[tuple[str, int, int], list[EvaluationResult]] = {}
    total = units_total(dataset.records, shard_bound) * plan.trials + units_total(dataset.records, reduce_bound)
    limiter = RateLimiter()
    watchers: list[asyncio.Task[None]] = []

    async def watch_cancel() -> None:
        await cancel.wait()
        stop.set()

    async def watch_clock(seconds: float) -> None:
        await asyncio.sleep(seconds)
        meter.exceed(wall_clock_exceeded(spec.budget, seconds) or "")

    async with JudgeSet(prepared.judges, cache=cache, cache_dir=cache_dir, limiter=limiter) as judge_set:
        judge_semaphore = asyncio.Semaphore(concurrency)
        judges = {name: _MeteredJudge(c, judge_semaphore, meter) for name, c in judge_set.clients.items()}
        contexts = {
            b.alias: EvalContext(judge=judges.get(b.judge), judges=judges, project=run.metadata.project)  # type: ignore[arg-type]
            for b in bound
        }
        client = TargetClient(spec.target.model, limiter=limiter, retry=retry) if plan.generation == "model" else None
        target_semaphore = asyncio.Semaphore(concurrency)
        pipelines = asyncio.Semaphore(_PIPELINES)
        watchers.append(asyncio.create_task(watch_cancel()))
        wall_clock = wall_clock_seconds(spec.budget)
        if wall_clock > 0:
            watchers.append(asyncio.create_task(watch_clock(wall_clock)))
        try:
            with progress_bar(progress, total) as advance, interrupt_sets(cancel, stop_on_interrupt):

                async def evaluate_shard(b: BoundEvaluator, generation: Generation, trial: int, shard: int) -> None:
                    results = await run_evaluators(
                        generation.succeeded(),
                        [b],
                        lambda _: contexts[b.alias],
                        options=runner_options,
                        progress=advance,
                        cancel=stop,
                    )
                    slots[(b.alias, trial, shard)] = _merge(generation, results, b)

                async def pipeline(trial: int, shard_index: int) -> None:
                    shard = plan.shards[shard_index]
                    async with pipelines:
                        generation = await generate(
                            dataset.records[shard.start : shard.stop],
                            spec.target,
                            trial=trial,
                            seed=spec.seed,
                            client=client,
                            concurrency=target_semaphore,
                            cancel=stop,
                            on_usage=meter.add_target,
                            run_id=prepared.run_id,
                            harness=spec.harness,
                            retry=retry,
                        )
                        generations[(trial, shard_index)] = generation
                        async with asyncio.TaskGroup() as group:
                            for b in shard_bound:
                                group.create_task(evaluate_shard(b, generation, trial, shard_index))

                await _all(pipeline(trial, shard.index) for trial in range(plan.trials) for shard in plan.shards)
                ordered = [generations[(t, s.index)] for t in range(plan.trials) for s in plan.shards]
                succeeded = [r for g in ordered for r in g.succeeded()]
                reduce_results: dict[str, list[EvaluationResult]] = {}

                async def reduce(b: BoundEvaluator) -> None:
                    if not succeeded:  # nothing to reduce over: the failed records' results say why
                        reduce_results[b.alias] = []
                        return
                    reduce_results[b.alias] = await run_evaluators(
                        succeeded, [b], lambda _: contexts[b.alias], options=runner_options, progress=advance,
                        cancel=stop,
                    )

                await _all(reduce(b) for b in reduce_bound)
        finally:
            for watcher in watchers:
                watcher.cancel()
            if client is not None:
                await client.aclose()

    results: list[EvaluationResult] = []
    for b in bound:
        if b.alias in reduce_results:
            results.extend(reduce_results[b.alias])
            for generation in ordered:
                for index, failure in sorted(generation.failures.items()):
                    results.append(failure_result(generation.records[index], b, failure))
            continue
        for trial in range(plan.trials):
            for shard in plan.shards:
                results.extend(slots[(b.alias, trial, shard.index)])
    records = [r for g in ordered for r in g.records]
    document = _document(prepared, results, records, meter, cancel, ordered, started)
    return RunOutcome(EvaluationResults(document), records, plan)


async def _all(coroutines: Any) -> None:
    """Run coroutines together; the first failure cancels the rest and is raised as itself."""
    try:
        async with asyncio.TaskGroup() as group:
            for coroutine in coroutines:
                group.create_task(coroutine)
    except BaseExceptionGroup as group_error:
        raise _first(group_error) from None


def _first(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


def _document(
    prepared: PreparedRun,
    results: list[EvaluationResult],
    records: list[Record],
    meter: _Meter,
    cancel: asyncio.Event,
    generations: Sequence[Generation],
    started: float,
) -> Run:
    run, bound = prepared.run, prepared.evaluators
    spec = run.spec
    document = Run(
        id=prepared.run_id,
        project=run.metadata.project,
        name=run.metadata.name,
        spec=spec,
        create_time=timestamp_of(started),
        start_time=timestamp_of(started),
        end_time=timestamp_of(time.time()),
    )
    document.labels.update(dict(run.metadata.labels))
    document.results.extend(results)
    options = SummaryOptions()
    options.CopyFrom(spec.summary)
    document.summaries.extend(summarize_results(results, bound, records=records, options=options))
    document.gates.extend(evaluate_gates(list(spec.gates), document.summaries))
    document.manifest.CopyFrom(run_manifest(spec, bound, prepared.dataset, prepared.judges))
    document.progress.CopyFrom(progress_counts(document))
    usage = document.progress.usage
    usage.input_tokens += meter.target.input_tokens
    usage.output_tokens += meter.target.output_tokens
    usage.total_tokens = usage.input_tokens + usage.output_tokens
    usage.cost_usd = meter.target.cost_usd + meter.judges.cost_usd
    document.state, document.message = _state(prepared, meter, cancel, generations, document)
    return document


def _state(
    prepared: PreparedRun, meter: _Meter, cancel: asyncio.Event, generations: Sequence[Generation], document: Run
) -> tuple[RunState, str]:
    calls = sum(
        (target_calls_of(((f.kind, f.reason) for f in g.failures.values()), len(g.records)) for g in generations),
        TargetCalls(),
    )
    return final_state(
        budget_exceeded=meter.exceeded,
        cancelled=cancel.is_set(),
        generates=prepared.plan.generates,
        target_calls=calls,
        cancelled_evaluations=document.progress.cancelled,
    )
