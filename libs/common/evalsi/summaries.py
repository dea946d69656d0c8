"""Per-record results to metric summaries: n, mean, std and an interval for every metric.

Metric names follow DESIGN.md: the alias for a single-output evaluator, ``alias.output`` for several,
and ``<metric>.pass@k`` / ``<metric>.pass^k`` when samples have several trials.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from evalsi import stats
from evalsi.evaluators import BoundEvaluator, Output
from evalsi.runner import DATASET_RECORD_ID
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import (
    ERROR_KIND_INFRA,
    OUTCOME_CANCELLED,
    OUTCOME_ERROR,
    OUTCOME_SCORED,
    OUTCOME_SKIPPED,
    VALUE_KIND_BOOLEAN,
    VALUE_KIND_LABEL,
    VALUE_KIND_NUMBER,
    VALUE_KIND_STRUCTURED,
    ConfidenceInterval,
    EvaluationResult,
    MetricSummary,
    SummaryOptions,
)

_KINDS = {
    "number": VALUE_KIND_NUMBER,
    "boolean": VALUE_KIND_BOOLEAN,
    "label": VALUE_KIND_LABEL,
    "structured": VALUE_KIND_STRUCTURED,
}


@dataclass(frozen=True)
class _Settings:
    level: float
    method: str
    seed: int
    resamples: int
    cluster_by: str
    extra_k: tuple[int, ...]

    @classmethod
    def of(cls, options: SummaryOptions | None) -> _Settings:
        options = options or SummaryOptions()
        method = options.interval or "auto"
        if method not in ("auto", "bootstrap"):
            raise ValueError(f"summary.interval must be auto or bootstrap, got {method!r}")
        return cls(
            level=options.confidence or 0.95,
            method=method,
            seed=options.seed,
            resamples=options.bootstrap_resamples or 2000,
            cluster_by=options.cluster_by,
            extra_k=tuple(options.pass_k),
        )


def cluster_keys(records: Sequence[Record], cluster_by: str) -> dict[str, str]:
    """Record id to its cluster value; a record without the key is its own cluster."""
    keys: dict[str, str] = {}
    for record in records:
        value = record.metadata.get(cluster_by)
        if value is None:
            keys[record.id] = f"record:{record.id}"
            continue
        kind = value.WhichOneof("kind")
        keys[record.id] = str(getattr(value, kind)) if kind else f"record:{record.id}"
    return keys


def summarize_results(
    results: Sequence[EvaluationResult],
    evaluators: Sequence[BoundEvaluator],
    *,
    records: Sequence[Record] = (),
    options: SummaryOptions | None = None,
) -> list[MetricSummary]:
    settings = _Settings.of(options)
    clusters_of = cluster_keys(records, settings.cluster_by) if settings.cluster_by else {}
    by_alias: dict[str, list[EvaluationResult]] = defaultdict(list)
    for result in results:
        by_alias[result.evaluator].append(result)
    summaries: list[MetricSummary] = []
    for bound in evaluators:
        summaries.extend(_summarize_evaluator(bound, by_alias.get(bound.alias, []), clusters_of, settings))
    return summaries


def _counts(results: Sequence[EvaluationResult]) -> dict[str, int]:
    counts = {"skipped": 0, "errors": 0, "infra_errors": 0, "cancelled": 0}
    for result in results:
        if result.outcome == OUTCOME_SKIPPED:
            counts["skipped"] += 1
        elif result.outcome == OUTCOME_ERROR:
            counts["errors"] += 1
            if result.error_kind == ERROR_KIND_INFRA:
                counts["infra_errors"] += 1
        elif result.outcome == OUTCOME_CANCELLED:
            counts["cancelled"] += 1
    return counts


def counts_scored(results: Sequence[EvaluationResult]) -> int:
    return sum(1 for result in results if result.outcome == OUTCOME_SCORED)


def _summarize_evaluator(
    bound: BoundEvaluator,
    results: Sequence[EvaluationResult],
    clusters_of: Mapping[str, str],
    settings: _Settings,
) -> list[MetricSummary]:
    counts = _counts(results)
    out: list[MetricSummary] = []
    for output, metric in bound.metric_names():
        summary = MetricSummary(
            metric=metric,
            evaluator=bound.alias,
            kind=_KINDS[output.type],
            higher_is_better=output.higher_is_better,
            **counts,
        )
        summary.ci.level = settings.level
        if bound.evaluator.scope == "dataset":
            _fill_dataset(summary, results, output)
            out.append(summary)
            continue
        values, record_ids, trials, labels = _collect(results, output)
        if not values and not labels and counts_scored(results) and len(bound.evaluator.outputs) > 1:
            continue  # an optional output this run never produced (e.g. within_budget without a budget)
        if output.type == "label":
            _fill_labels(summary, labels, settings)
            out.append(summary)
            continue
        if output.type == "structured":
            summary.n = len(labels)
            out.append(summary)
            continue
        sample_ids = [_sample_of(bound, rid) for rid in record_ids]
        clusters = _clusters(bound, sample_ids, trials, clusters_of)
        _fill_numbers(summary, np.asarray(values, dtype=np.float64), output, clusters, settings)
        out.append(summary)
        if output.type == "boolean":
            out.extend(_pass_k(bound, metric, values, sample_ids, settings, counts))
    return out


def _collect(
    results: Sequence[EvaluationResult], output: Output
) -> tuple[list[float], list[str], list[int], list[str]]:
    values: list[float] = []
    record_ids: list[str] = []
    trials: list[int] = []
    labels: list[str] = []
    for result in results:
        if result.outcome != OUTCOME_SCORED:
            continue
        for score in result.scores:
            if score.name != output.name:
                continue
            kind = score.WhichOneof("value")
            if kind == "passed":
                values.append(1.0 if score.passed else 0.0)
            elif kind == "number":
                values.append(score.number)
            elif kind == "label":
                labels.append(score.label)
                continue
            else:
                labels.append("structured")
                continue
            record_ids.append(result.record_id)
            trials.append(result.trial)
    return values, record_ids, trials, labels


def _sample_of(bound: BoundEvaluator, record_id: str) -> str:
    # Span results are keyed "record/span": spans of one record share it as their cluster.
    if bound.evaluator.scope == "span":
        return record_id.rsplit("/", 1)[0]
    return record_id


def _clusters(
    bound: BoundEvaluator, sample_ids: list[str], trials: list[int], clusters_of: Mapping[str, str]
) -> list[str] | None:
    """Cluster keys when observations are not independent: a cluster key, trials, or spans of a record."""
    if clusters_of:
        return [clusters_of.get(sid, f"record:{sid}") for sid in sample_ids]
    if bound.evaluator.scope == "span" or len(set(sample_ids)) < len(sample_ids):
        return sample_ids
    return None


def _interval(ci: ConfidenceInterval, aggregate: stats.Aggregate) -> None:
    if aggregate.ci_low is not None and aggregate.ci_high is not None:
        ci.low, ci.high = aggregate.ci_low, aggregate.ci_high
        ci.method = aggregate.method or ""


def _fill_numbers(
    summary: MetricSummary,
    values: np.ndarray,
    output: Output,
    clusters: list[str] | None,
    settings: _Settings,
) -> None:
    aggregate = stats.summarize(
        values,
        binary=output.type == "boolean",
        clusters=clusters,
        level=settings.level,
        method=settings.method,  # type: ignore[arg-type]
        seed=settings.seed,
        resamples=settings.resamples,
        bounds=output.bounds,
    )
    summary.n = aggregate.n
    if aggregate.mean is not None:
        summary.mean = aggregate.mean
    if aggregate.std is not None:
        summary.std = aggregate.std
    if clusters is not None:
        summary.clusters = len(set(clusters))
    _interval(summary.ci, aggregate)


def _fill_labels(summary: MetricSummary, labels: list[str], settings: _Settings) -> None:
    summary.n = len(labels)
    for label, share in stats.label_counts(labels, level=settings.level).items():
        entry = summary.labels[label]
        entry.count, entry.share = share.count, share.share
        entry.ci.low, entry.ci.high = share.ci_low, share.ci_high
        entry.ci.level, entry.ci.method = share.level, "wilson"


def _fill_dataset(summary: MetricSummary, results: Sequence[EvaluationResult], output: Output) -> None:
    for result in results:
        if result.outcome != OUTCOME_SCORED or result.record_id != DATASET_RECORD_ID:
            continue
        for score in result.scores:
            if score.name != output.name:
                continue
            kind = score.WhichOneof("value")
            if kind not in ("number", "passed"):
                continue
            summary.mean = float(getattr(score, kind))
            summary.n = int(score.metadata["n"].number_value) if "n" in score.metadata else 0
            summary.skipped = int(score.metadata["skipped"].number_value) if "skipped" in score.metadata else 0
            if "ci_low" in score.metadata:
                summary.ci.low = score.metadata["ci_low"].number_value
                summary.ci.high = score.metadata["ci_high"].number_value
                summary.ci.method = "bootstrap"


def _pass_k(
    bound: BoundEvaluator,
    metric: str,
    values: list[float],
    sample_ids: list[str],
    settings: _Settings,
    counts: Mapping[str, int],
) -> list[MetricSummary]:
    """pass@k and pass^k over samples with several trials; k is the smallest trial count (plus any asked)."""
    if bound.evaluator.scope != "record":
        return []
    trials: dict[str, list[float]] = defaultdict(list)
    for sid, value in zip(sample_ids, values, strict=True):
        trials[sid].append(value)
    if not trials or max(len(v) for v in trials.values()) < 2:
        return []
    n = np.asarray([len(v) for v in trials.values()], dtype=np.int64)
    c = np.asarray([int(sum(v)) for v in trials.values()], dtype=np.int64)
    smallest = int(n.min())
    ks = sorted({smallest, *(k for k in settings.extra_k if 1 <= k <= smallest)})
    out = []
    for k in ks:
        for suffix, fn in (("pass@", stats.summarize_pass_at_k), ("pass^", stats.summarize_pass_hat_k)):
            aggregate = fn(n, c, k, level=settings.level)
            summary = MetricSummary(
                metric=f"{metric}.{suffix}{k}",
                evaluator=bound.alias,
                kind=VALUE_KIND_NUMBER,
                higher_is_better=True,
                k=k,
                n=aggregate.n,
                **counts,
            )
            summary.ci.level = settings.level
            if aggregate.mean is not None:
                summary.mean = aggregate.mean
            if aggregate.std is not None:
                summary.std = aggregate.std
            _interval(summary.ci, aggregate)
            out.append(summary)
    return out
