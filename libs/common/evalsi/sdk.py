"""``evalsi.evaluate``: the embedded Score path, in-process with asyncio, no server.

An evaluation is a run whose target is the outputs given: the same run document, driver and executor as
``evalsi run`` and the served scheduler (``runs.local``), over an in-process bus and store; beyond a memory budget
(``memory_budget``, ``$EVALSI_EMBEDDED_MEMORY_MB``) over a local SQLite store whose results are read back in pages.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evalsi.datasets import Dataset, RecordStream, load_dataset, records_from_rows, stream_dataset, stream_rows
from evalsi.errors import BadInputError
from evalsi.evaluators import BoundEvaluator, Registry
from evalsi.evaluators.runner import units_total
from evalsi.judges import JudgeConfig
from evalsi.judges.panel import JudgeInput, judge_configs, judge_spec_from_config
from evalsi.limits import check_resamples
from evalsi.projects import DEFAULT_PROJECT, check_project
from evalsi.runs.binding import EvaluatorSpec, registry_for, resolve_evaluators
from evalsi.runs.cluster_keys import ClusterKeyCensus, Warn, warn_by_default
from evalsi.runs.collector import collector_paused
from evalsi.runs.console import interrupt_sets, progress_bar
from evalsi.runs.intake import TakenRecords, take_records
from evalsi.runs.local import run_locally
from evalsi.runs.memory_budget import memory_budget_mb
from evalsi.runs.results import EvaluationResults
from evalsi.stats.defaults import DEFAULT_BOOTSTRAP_RESAMPLES, DEFAULT_CONFIDENCE
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import EvalRun
from evalsi.v1alpha1.score_pb2 import SummaryOptions

Data = str | Path | Dataset | Sequence[Any] | Any
# Records per task of an evaluation by deterministic evaluators: the outputs are given, so a task is evaluator calls
# only, and a large shard keeps the per-task costs (a result message, folding it) small beside them.
EVALUATE_SHARD_SIZE = 20_000
# Evaluators that wait on something (a judge, an async call) get tasks of this many rounds of ``concurrency`` calls:
# the progress bar moves as each task ends, and the last round of a task leaves few call slots idle.
ROUNDS_PER_TASK = 16
CLUSTER_BY_FLAG = "--cluster-by"


def _deterministic(bound: Sequence[BoundEvaluator]) -> bool:
    """Whether every evaluator runs on the CPU without waiting on anything (no judge, no async call)."""
    return all(b.evaluator.pool == "cpu" and not b.evaluator.is_async for b in bound)


def _shard_size(bound: Sequence[BoundEvaluator], concurrency: int) -> int:
    if _deterministic(bound):
        return EVALUATE_SHARD_SIZE
    return ROUNDS_PER_TASK * concurrency


def _records_in(data: Data, mapping: Any, limit: int | None) -> Dataset | RecordStream:
    """The records to evaluate: a file, or rows that are objects, as a stream read once (``runs.intake`` holds or
    stores them as they come); Records and a Dataset as they are, in memory already."""
    if isinstance(data, Dataset):
        return data
    if isinstance(data, str | Path):
        return stream_dataset(data, mapping=mapping, limit=limit)
    rows = _rows(data, limit)
    # By the rows' types, a set of them made in C, rather than an isinstance test a row in Python.
    if not rows or any(issubclass(kind, Record) for kind in set(map(type, rows))):
        return records_from_rows(rows, mapping=mapping)
    return stream_rows(rows, mapping=mapping)


async def _units_total(records: Dataset | TakenRecords, bound: Sequence[BoundEvaluator]) -> int:
    """The progress bar's evaluations."""
    if isinstance(records, TakenRecords):
        return await records.units(bound)
    return units_total(records.records, bound)


async def _check_cluster_key(records: Dataset | TakenRecords, key: str, warn: Warn) -> None:
    """Refuse a cluster key no record has; tell ``warn`` when some records lack it. Stored records are read a shard
    at a time."""
    counted = ClusterKeyCensus(key)
    if isinstance(records, TakenRecords):
        async for batch in records.batches():
            counted.add(batch)
    else:
        counted.add(records.records)
    problem = counted.problem(CLUSTER_BY_FLAG)
    if problem:
        raise BadInputError(problem)
    warning = counted.warning(CLUSTER_BY_FLAG)
    if warning:
        warn(warning)


def judge_problem(bound: Sequence[BoundEvaluator]) -> str:
    """The refusal of evaluators that need a judge when none is configured (empty when every one has its judge)."""
    needing = [b.alias for b in bound if "judge" in b.evaluator.requires]
    if not needing:
        return ""
    return (
        f"evaluator {', '.join(needing)} needs a judge and none is configured: give one with --judge-model MODEL "
        "(--judge-base-url URL for a local or other OpenAI-compatible server), or judge= in evaluate(); on a "
        "server, a run's judges are spec.judges, which name the server's evalsi.yaml `judges:` entries "
        "(spec.judges.<name>.connection)"
    )


def _as_dataset(data: Data, mapping: Any, limit: int | None) -> Dataset:
    if isinstance(data, Dataset):
        return data
    if isinstance(data, str | Path):
        return load_dataset(data, mapping=mapping, limit=limit)
    return records_from_rows(_rows(data, limit), mapping=mapping)


def _rows(data: Any, limit: int | None) -> list[Any]:
    """In-memory rows (a DataFrame as its dicts), the first ``limit`` of them."""
    rows = data.to_dict("records") if hasattr(data, "to_dict") else list(data)
    return rows if limit is None else rows[:limit]


def _document(
    source: str,
    bound: Sequence[BoundEvaluator],
    judges: Mapping[str, JudgeConfig],
    options: SummaryOptions,
    *,
    project: str,
    name: str,
) -> EvalRun:
    """The run an evaluation is: the outputs given as its target, the evaluators and judges, the summary options."""
    document = EvalRun()
    document.metadata.project, document.metadata.name = project, name
    spec = document.spec
    spec.summary.CopyFrom(options)
    spec.dataset.path = source
    spec.target.outputs.SetInParent()
    spec.evaluators.extend(b.to_ref() for b in bound)
    for judge_name, config in judges.items():
        spec.judges[judge_name].CopyFrom(judge_spec_from_config(config))
    return document


async def evaluate_async(
    data: Data,
    evaluators: Sequence[EvaluatorSpec],
    *,
    judge: JudgeInput | None = None,
    judges: Mapping[str, JudgeInput] | None = None,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    mapping: Mapping[str, str] | Sequence[str] | None = None,
    limit: int | None = None,
    compare_to: Data | None = None,
    cluster_by: str | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
    interval: str = "auto",
    seed: int = 0,
    bootstrap_resamples: int = DEFAULT_BOOTSTRAP_RESAMPLES,
    concurrency: int = 16,
    cache: bool = True,
    cache_dir: str | Path | None = None,
    progress: bool = False,
    registry: Registry | None = None,
    name: str = "",
    project: str = DEFAULT_PROJECT,
    cancel: asyncio.Event | None = None,
    stop_on_interrupt: bool = False,
    memory_budget: float | None = None,
    store_dir: str | Path | None = None,
    judge_required: bool = False,
    warn: Warn | None = None,
) -> EvaluationResults:
    """The async form of :func:`evaluate`, for callers that already run an event loop.

    Setting ``cancel`` stops the evaluation early: calls in flight finish, nothing new starts, and the results
    hold what was done (the rest ends cancelled). With ``stop_on_interrupt`` the first Ctrl-C sets it (the CLI
    uses this); a second Ctrl-C aborts.

    ``memory_budget`` (MiB; default ``$EVALSI_EMBEDDED_MEMORY_MB`` or 1024) bounds what the run's records and results
    may take in memory, checked as the records are read (a file, or rows that are objects): beyond it the records
    go as shards and the results into a SQLite store in a temporary directory, and the returned results read them
    back in pages (``close()`` them, or use ``with``, to remove the directory at once). ``store_dir`` keeps that
    store in a directory of yours, whatever the budget.

    With deterministic evaluators only (no judge, no async call) the cyclic garbage collector is paused while the
    records are built and the run goes (``runs.collector``): reference counting frees as usual.

    An evaluator that needs a judge, with none configured, skips every record as ``judge_pending``; with
    ``judge_required`` (the CLI) it is refused (``BadInputError``) before anything is read. A ``cluster_by`` key
    no record has is refused before anything runs; one that some records lack is a warning, given to ``warn``
    (default: Python's ``warnings``, as a ``ClusterKeyWarning``).
    """
    if not 0 < confidence < 1:
        raise BadInputError(f"confidence must be between 0 and 1 (e.g. 0.95), got {confidence}")
    if interval not in ("auto", "bootstrap"):
        raise BadInputError(f"interval must be auto or bootstrap, got {interval!r}")
    if concurrency < 1:
        raise BadInputError(f"concurrency must be at least 1, got {concurrency}")
    registry = registry or Registry.from_entry_points()
    bound = resolve_evaluators(evaluators, registry, params)
    configs = judge_configs(judge, judges)
    if judge_required and not configs and judge_problem(bound):
        raise BadInputError(judge_problem(bound))
    for b in bound:
        if "judge" in b.evaluator.requires and configs and b.judge not in configs:
            raise BadInputError(
                f"evaluator {b.alias} uses judge {b.judge!r}, which is not configured ({', '.join(configs)})"
            )
    check_resamples(bootstrap_resamples, "bootstrap_resamples")
    check_project(project, "project")
    # A run of deterministic evaluators is one burst of allocation, which the cyclic collector would pass over
    # again and again for nothing (runs.collector).
    with collector_paused() if _deterministic(bound) else contextlib.nullcontext():
        given = _records_in(data, mapping, limit)
        other = _as_dataset(compare_to, mapping, limit).records if compare_to is not None else None
        comparative = [b.alias for b in bound if b.evaluator.scope == "comparative"]
        if comparative and other is None:
            raise BadInputError(
                f"evaluator {comparative[0]} is comparative: give a second result set to compare with "
                "(--compare-to FILE, or compare_to= in evaluate())"
            )
        options = SummaryOptions(
            confidence=confidence,
            cluster_by=cluster_by or "",
            interval=interval,
            seed=seed,
            bootstrap_resamples=bootstrap_resamples,
        )
        document = _document(given.source, bound, configs, options, project=project, name=name)
        shard_size = _shard_size(bound, concurrency)
        records: Dataset | TakenRecords = given if isinstance(given, Dataset) else await take_records(
            given, document, budget_mb=memory_budget_mb(memory_budget), store_dir=store_dir, shard_size=shard_size
        )
        cancel = cancel or asyncio.Event()
        try:
            if cluster_by:
                await _check_cluster_key(records, cluster_by, warn or warn_by_default)
            total = await _units_total(records, bound) if progress else 0
            with progress_bar(progress, total) as advance, interrupt_sets(cancel, stop_on_interrupt):
                outcome = await run_locally(
                    document,
                    records.records if isinstance(records, Dataset) else records,
                    registry=registry_for(bound, registry),
                    source=records.source,
                    version=records.version,
                    judges=configs,
                    compare_with=other,
                    cache=cache,
                    cache_dir=cache_dir,
                    concurrency=concurrency,
                    shard_size=shard_size,
                    task_workers=1,  # one task at a time: ``concurrency`` bounds the calls in flight, as documented
                    cancel=cancel,
                    progress=advance,
                    memory_budget=memory_budget,
                    store_dir=store_dir,
                )
        except BaseException:
            if isinstance(records, TakenRecords):
                records.discard()  # run_locally removes it too once it has it; removing twice is harmless
            raise
        # The records go here, inside the pause: freed by reference counting now, where the collector resuming would
        # first scan every object they hold (and hold them until then).
        del records, given
    return outcome

def evaluate(data: Data, evaluators: Sequence[EvaluatorSpec], **kwargs: Any) -> EvaluationResults:
    """Grade records you bring with evaluators, embedded: no server.

    ``data`` is a file (JSONL, JSON, CSV, Parquet, ``hf://...``), a list of dicts or Records, or a DataFrame;
    ``evaluators`` are names (``exact-match``, ``builtin/llm-judge@1.0.0``), Evaluator objects, or mappings
    ``{"ref": ..., "alias": ..., "params": {...}, "judge": ...}``. ``judge=`` configures the default judge
    (``{"provider": "openai", "model": ..., "base_url": ...}``). See :func:`evaluate_async` for every option.
    Works inside a running event loop too (a notebook), by running on a helper thread.
    """
    coroutine = evaluate_async(data, evaluators, **kwargs)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    outcome: dict[str, Any] = {}

    def run_in_thread() -> None:
        try:
            outcome["value"] = asyncio.run(coroutine)
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run_in_thread, name="evalsi-evaluate")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
