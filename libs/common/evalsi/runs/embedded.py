"""The embedded Run path: ``evalsi run -f run.yaml`` executes a target over a dataset, then grades it.

Validation, the dataset and the plan are resolved here (``prepare_run``; ``--dry-run`` stops there); the run itself
is driven by the served engine in this process (``runs.local``: the scheduler's driver and the worker's executor over
an in-process bus and store), so an embedded run and a served run of one spec agree result for result. The numbers
of a run over given outputs are exactly those of ``evalsi eval`` on the same file.

Budgets: a token or cost budget is checked as each target call answers and as each task reports its judges' usage;
once it is exceeded, or ``wallClock`` has elapsed, the tasks running are abandoned, nothing more starts, and every
evaluation that did not run ends ``CANCELLED``; the run's state is ``RUN_STATE_BUDGET_EXCEEDED`` with a message
naming the budget and the overrun.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalsi.datasets import RecordStream
from evalsi.evaluators import BoundEvaluator, Registry
from evalsi.judges import JudgeConfig, RetryPolicy
from evalsi.runs.cluster_keys import Warn, warn_by_default
from evalsi.runs.console import interrupt_sets, progress_bar
from evalsi.runs.intake import take_records
from evalsi.runs.local import DEFAULT_CONCURRENCY, new_run_id, run_locally
from evalsi.runs.memory_budget import memory_budget_mb
from evalsi.runs.plan import DEFAULT_SHARD_SIZE, Plan, Projection, RecordTally, plan_run, projection
from evalsi.runs.results import EvaluationResults
from evalsi.runs.run_dataset import DatasetChecks, open_run_dataset
from evalsi.runs.spec import bind_evaluators, judge_configs_of, validate_eval_run
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import EvalRun

_TALLY_BATCH = 1024  # records of a dry run checked at once (one batch held, never the dataset)


@dataclass
class PreparedRun:
    """A validated run with everything resolved, before anything is called (``--dry-run`` stops here). ``dataset``
    is the stream its records were read from, read through (its ``source``, ``count`` and ``version``)."""

    run: EvalRun
    run_id: str
    evaluators: list[BoundEvaluator]
    judges: dict[str, JudgeConfig]
    dataset: RecordStream
    plan: Plan


@dataclass
class RunOutcome:
    """What ``execute_run`` returns: the result document, the records evaluated (with generated outputs,
    trial-major then dataset order; none unless ``collect_records``) and the plan it followed."""

    results: EvaluationResults
    records: list[Record]
    plan: Plan


def _resolved(
    run: EvalRun, *, base_dir: Path | None, datasets_dir: Path | None, registry: Registry, source: str
) -> tuple[list[BoundEvaluator], dict[str, JudgeConfig]]:
    """The run validated: its evaluators bound and its judges."""
    validate_eval_run(run, registry=registry, datasets_dir=datasets_dir, base_dir=base_dir, source=source)
    return bind_evaluators(run, registry), judge_configs_of(run)


def prepare_run(
    run: EvalRun,
    *,
    base_dir: Path | None = None,
    datasets_dir: Path | None = None,
    registry: Registry | None = None,
    run_id: str | None = None,
    shard_size: int = DEFAULT_SHARD_SIZE,
    source: str = "",
    warn: Warn | None = None,
) -> PreparedRun:
    """Validate, bind the evaluators, read the dataset through (a batch of records held at a time) and plan; calls
    nothing. A ``spec.summary.clusterBy`` key some records lack is a warning given to ``warn`` (default: Python's
    ``warnings``)."""
    prepared, _ = _prepare(run, base_dir=base_dir, datasets_dir=datasets_dir, registry=registry, run_id=run_id,
                           shard_size=shard_size, source=source, warn=warn, tallied=False)
    return prepared


def dry_run(
    run: EvalRun,
    *,
    base_dir: Path | None = None,
    datasets_dir: Path | None = None,
    registry: Registry | None = None,
    source: str = "",
    warn: Warn | None = None,
) -> tuple[PreparedRun, Projection]:
    """The plan and its projection (tasks, evaluations, tokens, cost), without calling any model; the dataset is
    read through once, holding a batch of records at a time."""
    prepared, tally = _prepare(run, base_dir=base_dir, datasets_dir=datasets_dir, registry=registry, run_id=None,
                               shard_size=DEFAULT_SHARD_SIZE, source=source, warn=warn, tallied=True)
    assert tally is not None
    return prepared, projection(prepared.plan, tally)


def _prepare(
    run: EvalRun,
    *,
    base_dir: Path | None,
    datasets_dir: Path | None,
    registry: Registry | None,
    run_id: str | None,
    shard_size: int,
    source: str,
    warn: Warn | None,
    tallied: bool,
) -> tuple[PreparedRun, RecordTally | None]:
    """``prepare_run``, and the projection's tally of the records when ``tallied``, in the same one pass."""
    registry = registry or Registry.from_entry_points()
    evaluators, judges = _resolved(run, base_dir=base_dir, datasets_dir=datasets_dir, registry=registry,
                                   source=source)
    tally = RecordTally.for_spec(run.spec, (b.evaluator.scope for b in evaluators)) if tallied else None
    stream = open_run_dataset(run, base_dir=base_dir, datasets_dir=datasets_dir)
    checks = DatasetChecks.of(run)
    records = iter(stream)
    while batch := list(itertools.islice(records, _TALLY_BATCH)):
        checks.add(batch)
        if tally is not None:
            tally.add_all(batch)
    checks.settle(stream.source, source=source, warn=warn or warn_by_default)
    run_id = run_id or new_run_id()
    plan = plan_run(run, stream.count, evaluators=evaluators, run_id=run_id, shard_size=shard_size)
    return PreparedRun(run, run_id, evaluators, judges, stream, plan), tally


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
    memory_budget: float | None = None,
    store_dir: str | Path | None = None,
    warn: Warn | None = None,
    collect_records: bool = True,
) -> RunOutcome:
    """Validate, plan, generate, evaluate, summarize and gate ``run``.

    ``base_dir`` is the spec file's folder (relative dataset paths); ``datasets_dir`` confines dataset
    paths; ``cache`` is the judge cache (target outputs are never cached); setting ``cancel`` stops the
    run (state CANCELLED), and with ``stop_on_interrupt`` the first Ctrl-C sets it. ``retry`` overrides
    the target connector's waits between retries (tests). ``memory_budget`` and ``store_dir``: where the records
    and results go, in memory or a local store (``runs.intake``, ``runs.local.run_locally``). The dataset is read
    once, as ``evaluate()`` reads its rows: held while the run fits the budget, else stored as shards as it is
    read, never all held. ``collect_records`` (the default) returns the records as evaluated in the outcome, all
    of them in memory at the end; the CLI, which does not print them, leaves them out.
    """
    registry = registry or Registry.from_entry_points()
    evaluators, _judges = _resolved(run, base_dir=base_dir, datasets_dir=datasets_dir, registry=registry,
                                    source=source)
    stream = open_run_dataset(run, base_dir=base_dir, datasets_dir=datasets_dir)
    taken = await take_records(
        stream, run, budget_mb=memory_budget_mb(memory_budget), store_dir=store_dir, shard_size=shard_size
    )
    try:
        checks = DatasetChecks.of(run)
        async for batch in taken.batches():  # stored records a shard at a time, and only while a check needs them
            if not checks.wanted:
                break
            checks.add(batch)
        checks.settle(taken.source, source=source, warn=warn or warn_by_default)
        plan = plan_run(run, taken.count, evaluators=evaluators, run_id=run_id or new_run_id(), shard_size=shard_size)
        by_alias = {b.alias: b for b in evaluators}
        per_shard = await taken.units([by_alias[ev.alias] for ev in plan.shard_evaluators])
        once = await taken.units([by_alias[ev.alias] for ev in plan.reduce_evaluators])
        total = per_shard * plan.trials + once  # the progress bar's evaluations
        cancel = cancel or asyncio.Event()
        evaluated: list[Record] | None = [] if collect_records else None
        with progress_bar(progress, total) as advance, interrupt_sets(cancel, stop_on_interrupt):
            results = await run_locally(
                run,
                taken,
                registry=registry,
                source=taken.source,
                version=taken.version,
                run_id=plan.run_id,
                cache=cache,
                cache_dir=cache_dir,
                concurrency=run.spec.concurrency or DEFAULT_CONCURRENCY,
                shard_size=plan.shard_size,
                retry=retry,
                cancel=cancel,
                progress=advance,
                evaluated=evaluated,
            )
    except BaseException:
        taken.discard()  # run_locally removes it too once it has it; removing twice is harmless
        raise
    return RunOutcome(results, evaluated or [], plan)
