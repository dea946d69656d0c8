"""``evalsi.evaluate``: the embedded Score path, in-process with asyncio, no server."""

from __future__ import annotations

import asyncio
import hashlib
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

from google.protobuf import json_format, timestamp_pb2

from evalsi.datasets import Dataset, load_dataset, records_from_rows
from evalsi.errors import BadInputError
from evalsi.evaluators import BoundEvaluator, EvalContext, Evaluator, Registry
from evalsi.evaluators.runner import RunnerOptions, run_evaluators, units_total
from evalsi.judges.panel import JudgeInput, JudgeSet, judge_configs, judge_spec_from_config
from evalsi.limits import check_resamples
from evalsi.projects import DEFAULT_PROJECT, check_project
from evalsi.records import canonical_json, struct_to_dict
from evalsi.runs.results import EvaluationResults
from evalsi.runs.summary import summarize_results
from evalsi.stats.defaults import DEFAULT_BOOTSTRAP_RESAMPLES, DEFAULT_CONFIDENCE
from evalsi.v1alpha1.evaluator_pb2 import EvaluatorRef
from evalsi.v1alpha1.run_pb2 import (
    RUN_STATE_SUCCEEDED,
    DatasetSource,
    EvaluatorVersion,
    Run,
    RunManifest,
    RunProgress,
    RunSpec,
)
from evalsi.v1alpha1.score_pb2 import (
    OUTCOME_CANCELLED,
    OUTCOME_ERROR,
    OUTCOME_SCORED,
    OUTCOME_SKIPPED,
    SummaryOptions,
)

EvaluatorSpec = str | Evaluator | BoundEvaluator | EvaluatorRef | Mapping[str, Any]
Data = str | Path | Dataset | Sequence[Any] | Any


def _as_dataset(data: Data, mapping: Any, limit: int | None) -> Dataset:
    if isinstance(data, Dataset):
        return data
    if isinstance(data, str | Path):
        return load_dataset(data, mapping=mapping, limit=limit)
    rows = data.to_dict("records") if hasattr(data, "to_dict") else list(data)
    if limit is not None:
        rows = rows[:limit]
    return records_from_rows(rows, mapping=mapping)


def resolve_evaluators(
    specs: Sequence[EvaluatorSpec],
    registry: Registry,
    params: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[BoundEvaluator]:
    """Bind every evaluator spec; ``params`` adds params by alias (or short name), as ``--param`` does."""
    if not specs:
        raise BadInputError("no evaluators given; `evalsi catalog list` shows what is installed")
    bound: list[BoundEvaluator] = []
    extra = {alias: dict(values) for alias, values in (params or {}).items()}
    for spec in specs:
        values: dict[str, Any]
        if isinstance(spec, BoundEvaluator):
            bound.append(spec)
            continue
        if isinstance(spec, Evaluator):
            ev, alias, values, judge = spec, "", {}, ""
        elif isinstance(spec, str):
            ev, alias, values, judge = registry.resolve(spec), "", {}, ""
        else:
            ref = spec if isinstance(spec, EvaluatorRef) else _ref_from_mapping(spec)
            ev = registry.resolve(ref.ref)
            alias, judge = ref.alias, ref.judge
            values = struct_to_dict(ref.params) if ref.HasField("params") else {}
        alias = alias or ev.short_name
        values = {**values, **extra.pop(alias, {})}
        bound.append(ev.bind(values, alias=alias, judge=judge))
    if extra:
        aliases = ", ".join(b.alias for b in bound)
        raise BadInputError(
            f"--param given for {', '.join(sorted(extra))}, which is not among the evaluators ({aliases})"
        )
    seen: set[str] = set()
    for b in bound:
        if b.alias in seen:
            raise BadInputError(f"evaluator alias {b.alias!r} is used twice; give one of them an alias")
        seen.add(b.alias)
    return bound


def _ref_from_mapping(spec: Mapping[str, Any]) -> EvaluatorRef:
    try:
        return json_format.ParseDict(dict(spec), EvaluatorRef())
    except json_format.ParseError as exc:
        raise BadInputError(
            f"evaluator spec {dict(spec)!r}: {exc} (accepted keys: ref, alias, params, judge)"
        ) from None


def timestamp_of(seconds: float) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts


def _package_versions() -> dict[str, str]:
    versions = {}
    for name in ("evalsi", "protobuf", "numpy", "scipy"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "unknown"
    versions["python"] = sys.version.split()[0]
    return versions


def _spec(
    dataset: Dataset, bound: Sequence[BoundEvaluator], judges: Mapping[str, Any], options: SummaryOptions
) -> RunSpec:
    spec = RunSpec(summary=options, dataset=DatasetSource(path=dataset.source))
    spec.target.outputs.SetInParent()
    spec.evaluators.extend(b.to_ref() for b in bound)
    for name, config in judges.items():
        spec.judges[name].CopyFrom(judge_spec_from_config(config))
    return spec


def build_manifest(
    dataset: Dataset, spec: RunSpec, bound: Sequence[BoundEvaluator], judges: Mapping[str, Any]
) -> RunManifest:
    canonical = canonical_json(json_format.MessageToDict(spec))
    manifest = RunManifest(
        spec_hash=hashlib.sha256(canonical.encode()).hexdigest(),
        dataset=dataset.source,
        dataset_version=dataset.version,
        target="outputs given",
        seed=spec.summary.seed,
        evalsi_version=_package_versions()["evalsi"],
        created=timestamp_of(time.time()),
    )
    manifest.package_versions.update(_package_versions())
    for b in bound:
        entry = EvaluatorVersion(alias=b.alias, ref=b.evaluator.ref)
        if b.params:
            entry.params.update(b.params)
        if "judge" in b.evaluator.requires and b.judge in judges:
            entry.judge = b.judge
        manifest.evaluators.append(entry)
    for name, config in judges.items():
        manifest.judges[name] = f"{config.provider}:{config.model} @ {config.base_url}"
        manifest.unpinned.append(
            f"judge {name}: {config.provider} model {config.model!r} is served by an API and cannot be pinned"
        )
    return manifest


def progress_counts(run: Run) -> RunProgress:
    progress = RunProgress(total_tasks=len(run.results), completed=len(run.results))
    for result in run.results:
        if result.outcome == OUTCOME_SCORED:
            progress.scored += 1
        elif result.outcome == OUTCOME_SKIPPED:
            progress.skipped += 1
        elif result.outcome == OUTCOME_ERROR:
            progress.errors += 1
        elif result.outcome == OUTCOME_CANCELLED:
            progress.cancelled += 1
        for score in result.scores:
            progress.usage.input_tokens += score.cost.input_tokens
            progress.usage.output_tokens += score.cost.output_tokens
    # Cancelled work did not complete, as on a server: a cancelled run shows how far it got.
    progress.completed -= progress.cancelled
    return progress


@contextmanager
def progress_bar(enabled: bool, total: int) -> Iterator[Callable[[int], None] | None]:
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("evaluating"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("evaluating", total=total)
        yield lambda n: bar.advance(task, n)


@contextmanager
def interrupt_sets(
    cancel: asyncio.Event,
    enabled: bool,
    *,
    what_happens: str = "calls in flight finish, the rest are skipped",
) -> Iterator[None]:
    """While active, the first SIGINT sets ``cancel`` and says ``what_happens``; the handler then steps aside so a
    second one aborts."""
    if not enabled:
        yield
        return
    loop = asyncio.get_running_loop()

    def on_interrupt() -> None:
        sys.stderr.write(f"\ncancelling: {what_happens} (Ctrl-C again to abort)\n")
        cancel.set()
        loop.remove_signal_handler(signal.SIGINT)

    loop.add_signal_handler(signal.SIGINT, on_interrupt)
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)


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
) -> EvaluationResults:
    """The async form of :func:`evaluate`, for callers that already run an event loop.

    Setting ``cancel`` stops the evaluation early: calls in flight finish, the rest end cancelled, and the
    results hold what was done. With ``stop_on_interrupt`` the first Ctrl-C sets it (the CLI uses this);
    a second Ctrl-C aborts.
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
    for b in bound:
        if "judge" in b.evaluator.requires and configs and b.judge not in configs:
            raise BadInputError(
                f"evaluator {b.alias} uses judge {b.judge!r}, which is not configured ({', '.join(configs)})"
            )
    check_resamples(bootstrap_resamples, "bootstrap_resamples")
    check_project(project, "project")
    dataset = _as_dataset(data, mapping, limit)
    others = [_as_dataset(compare_to, mapping, limit).records] if compare_to is not None else []
    options = SummaryOptions(
        confidence=confidence,
        cluster_by=cluster_by or "",
        interval=interval,
        seed=seed,
        bootstrap_resamples=bootstrap_resamples,
    )
    started = time.time()
    async with JudgeSet(configs, cache=cache, cache_dir=cache_dir) as judge_set:
        contexts = {
            b.alias: EvalContext(judge=judge_set.get(b.judge), judges=judge_set.clients, project=project) for b in bound
        }
        total = units_total(dataset.records, bound)
        runner_options = RunnerOptions(
            concurrency=concurrency,
            confidence=confidence,
            seed=seed,
            bootstrap_resamples=bootstrap_resamples or DEFAULT_BOOTSTRAP_RESAMPLES,
        )
        cancel = cancel or asyncio.Event()
        with progress_bar(progress, total) as advance, interrupt_sets(cancel, stop_on_interrupt):
            results = await run_evaluators(
                dataset.records,
                bound,
                lambda b: contexts[b.alias],
                options=runner_options,
                progress=advance,
                compare_with=others,
                cancel=cancel,
            )
    spec = _spec(dataset, bound, configs, options)
    run = Run(
        id=f"local-{uuid.uuid4().hex[:12]}",
        project=project,
        name=name,
        spec=spec,
        state=RUN_STATE_SUCCEEDED,
        create_time=timestamp_of(started),
        start_time=timestamp_of(started),
        end_time=timestamp_of(time.time()),
    )
    run.results.extend(results)
    run.summaries.extend(summarize_results(results, bound, records=dataset.records, options=options))
    run.manifest.CopyFrom(build_manifest(dataset, spec, bound, configs))
    run.progress.CopyFrom(progress_counts(run))
    return EvaluationResults(run)


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
