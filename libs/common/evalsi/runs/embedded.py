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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalsi.datasets import Dataset, load_dataset
from evalsi.errors import BadInputError
from evalsi.evaluators import BoundEvaluator, Registry
from evalsi.evaluators.runner import units_total
from evalsi.judges import JudgeConfig, RetryPolicy
from evalsi.records import has_content
from evalsi.runs.cluster_keys import Warn, census, warn_by_default
from evalsi.runs.console import interrupt_sets, progress_bar
from evalsi.runs.local import DEFAULT_CONCURRENCY, new_run_id, run_locally
from evalsi.runs.plan import DEFAULT_SHARD_SIZE, Plan, Projection, RecordTally, plan_run, projection
from evalsi.runs.results import EvaluationResults
from evalsi.runs.spec import (
    bind_evaluators,
    judge_configs_of,
    resolve_dataset_path,
    target_kind,
    validate_eval_run,
)
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import EvalRun

CLUSTER_BY_FIELD = "spec.summary.clusterBy"


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
    warn: Warn | None = None,
) -> PreparedRun:
    """Validate, bind the evaluators, read the dataset and plan; calls nothing. A ``spec.summary.clusterBy`` key
    some records lack is a warning given to ``warn`` (default: Python's ``warnings``)."""
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
    if run.spec.summary.cluster_by:  # a key no record has would make every record its own cluster, silently
        counted = census(dataset.records, run.spec.summary.cluster_by)
        prefix = f"{source}: " if source else ""
        if counted.problem(CLUSTER_BY_FIELD):
            raise BadInputError(prefix + counted.problem(CLUSTER_BY_FIELD))
        if counted.warning(CLUSTER_BY_FIELD):
            (warn or warn_by_default)(counted.warning(CLUSTER_BY_FIELD))
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
    warn: Warn | None = None,
) -> tuple[PreparedRun, Projection]:
    """The plan and its projection (tasks, evaluations, tokens, cost), without calling any model."""
    prepared = prepare_run(
        run, base_dir=base_dir, datasets_dir=datasets_dir, registry=registry, source=source, warn=warn
    )
    scopes = (b.evaluator.scope for b in prepared.evaluators)
    tally = RecordTally.for_spec(run.spec, scopes).add_all(prepared.dataset.records)
    return prepared, projection(prepared.plan, tally)


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
    memory_budget: float | None = None,
    store_dir: str | Path | None = None,
    warn: Warn | None = None,
) -> RunOutcome:
    """Validate, plan, generate, evaluate, summarize and gate ``run``.

    ``base_dir`` is the spec file's folder (relative dataset paths); ``datasets_dir`` confines dataset
    paths; ``cache`` is the judge cache (target outputs are never cached); setting ``cancel`` stops the
    run (state CANCELLED), and with ``stop_on_interrupt`` the first Ctrl-C sets it. ``retry`` overrides
    the target connector's waits between retries (tests). ``memory_budget`` and ``store_dir``: where the results
    go, in memory or a local store (``runs.local.run_locally``).
    """
    registry = registry or Registry.from_entry_points()
    if prepared is None:
        prepared = prepare_run(
            run, base_dir=base_dir, datasets_dir=datasets_dir, registry=registry, run_id=run_id,
            shard_size=shard_size, source=source, warn=warn,
        )
    plan, dataset = prepared.plan, prepared.dataset
    by_alias = {b.alias: b for b in prepared.evaluators}
    per_shard = units_total(dataset.records, [by_alias[ev.alias] for ev in plan.shard_evaluators])
    once = units_total(dataset.records, [by_alias[ev.alias] for ev in plan.reduce_evaluators])
    total = per_shard * plan.trials + once  # the progress bar's evaluations
    cancel = cancel or asyncio.Event()
    evaluated: list[Record] = []
    with progress_bar(progress, total) as advance, interrupt_sets(cancel, stop_on_interrupt):
        results = await run_locally(
            prepared.run,
            dataset.records,
            registry=registry,
            source=dataset.source,
            version=dataset.version,
            run_id=prepared.run_id,
            cache=cache,
            cache_dir=cache_dir,
            concurrency=prepared.run.spec.concurrency or DEFAULT_CONCURRENCY,
            shard_size=plan.shard_size,
            retry=retry,
            cancel=cancel,
            progress=advance,
            evaluated=evaluated,
            memory_budget=memory_budget,
            store_dir=store_dir,
        )
    return RunOutcome(results, evaluated, plan)
