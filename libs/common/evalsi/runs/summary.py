"""Per-record results to metric summaries: n, mean, std and an interval for every metric.

Metric names follow DESIGN.md: the alias for a single-output evaluator, ``alias.output`` for several,
and ``<metric>.pass@k`` / ``<metric>.pass^k`` when samples have several trials.
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from evalsi import stats
from evalsi.evaluators import BoundEvaluator, Output
from evalsi.evaluators.runner import DATASET_RECORD_ID
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
            level=options.confidence or stats.DEFAULT_CONFIDENCE,
            method=method,
            seed=options.seed,
            resamples=options.bootstrap_resamples or stats.DEFAULT_BOOTSTRAP_RESAMPLES,
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
    results: Iterable[EvaluationResult],
    evaluators: Sequence[BoundEvaluator],
    *,
    records: Sequence[Record] = (),
    options: SummaryOptions | None = None,
) -> list[MetricSummary]:
    builder = SummaryBuilder(evaluators)
    builder.add(results)
    return builder.summaries(records=records, options=options)


@dataclass
class _Column:
    """The scored values of one evaluator output, kept compact: no result objects, and numbers and trials in
    typed arrays (8 bytes each, where a list of floats costs 32), since a run's final summary holds them all."""

    values: array[float] = field(default_factory=lambda: array("d"))
    record_ids: list[str] = field(default_factory=list)
    trials: array[int] = field(default_factory=lambda: array("q"))
    labels: list[str] = field(default_factory=list)


@dataclass
class _Accumulated:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_COUNTED, 0))
    scored: int = 0
    columns: dict[str, _Column] = field(default_factory=lambda: defaultdict(_Column))
    dataset_results: list[EvaluationResult] = field(default_factory=list)


_COUNTED: tuple[str, ...] = ("skipped", "errors", "infra_errors", "cancelled")  # read by _Accumulated, above


def _copy_counts(counts: Mapping[str, int], summary: MetricSummary) -> None:
    summary.skipped = counts["skipped"]
    summary.errors = counts["errors"]
    summary.infra_errors = counts["infra_errors"]
    summary.cancelled = counts["cancelled"]


class SummaryBuilder:
    """Summaries built from results added in batches, so a large run is never held in memory at once."""

    def __init__(self, evaluators: Sequence[BoundEvaluator]) -> None:
        self._evaluators = list(evaluators)
        self._by_alias = {b.alias: _Accumulated() for b in evaluators}
        self._dataset_aliases = {b.alias for b in evaluators if b.evaluator.scope == "dataset"}

    def add(self, results: Iterable[EvaluationResult]) -> None:
        for result in results:
            acc = self._by_alias.get(result.evaluator)
            if acc is None:
                continue
            outcome = result.outcome
            if outcome == OUTCOME_SCORED:
                acc.scored += 1
                if result.evaluator in self._dataset_aliases:
                    acc.dataset_results.append(result)
                    continue
                for score in result.scores:
                    column = acc.columns[score.name]
                    kind = score.WhichOneof("value")
                    if kind == "passed":
                        column.values.append(1.0 if score.passed else 0.0)
                    elif kind == "number":
                        column.values.append(score.number)
                    else:
                        column.labels.append(score.label if kind == "label" else "structured")
                        continue
                    column.record_ids.append(result.record_id)
                    column.trials.append(result.trial)
            elif outcome == OUTCOME_SKIPPED:
                acc.counts["skipped"] += 1
            elif outcome == OUTCOME_ERROR:
                acc.counts["errors"] += 1
                if result.error_kind == ERROR_KIND_INFRA:
                    acc.counts["infra_errors"] += 1
            elif outcome == OUTCOME_CANCELLED:
                acc.counts["cancelled"] += 1

    def summaries(
        self, *, records: Sequence[Record] = (), options: SummaryOptions | None = None
    ) -> list[MetricSummary]:
        settings = _Settings.of(options)
        clusters_of = cluster_keys(records, settings.cluster_by) if settings.cluster_by else {}
        out: list[MetricSummary] = []
        for bound in self._evaluators:
            out.extend(_summarize_evaluator(bound, self._by_alias[bound.alias], clusters_of, settings))
        return out


def _summarize_evaluator(
    bound: BoundEvaluator,
    acc: _Accumulated,
    clusters_of: Mapping[str, str],
    settings: _Settings,
) -> list[MetricSummary]:
    counts = acc.counts
    out: list[MetricSummary] = []
    for output, metric in bound.metric_names():
        summary = MetricSummary(
            metric=metric,
            evaluator=bound.alias,
            kind=_KINDS[output.type],
            higher_is_better=output.higher_is_better,
        )
        _copy_counts(counts, summary)
        summary.ci.level = settings.level
        if bound.evaluator.scope == "dataset":
            _fill_dataset(summary, acc.dataset_results, output)
            out.append(summary)
            continue
        column = acc.columns.get(output.name, _Column())
        if not column.values and not column.labels and acc.scored and len(bound.evaluator.outputs) > 1:
            continue  # an optional output this run never produced (e.g. within_budget without a budget)
        if output.type == "label":
            _fill_labels(summary, column.labels, settings)
            out.append(summary)
            continue
        if output.type == "structured":
            summary.n = len(column.labels)
            out.append(summary)
            continue
        # One order (record, trial) whatever order the results came in (dataset order embedded, a store's order
        # served, folded as they arrived), so the same results give the same numbers to the last bit and the
        # same seeded bootstrap.
        values, sample_ids, repeated = _in_record_order(bound, column)
        clusters = _clusters(bound, sample_ids, repeated, clusters_of)
        _fill_numbers(summary, values, output, clusters, settings)
        out.append(summary)
        if output.type == "boolean" and repeated:
            out.extend(_pass_k(bound, metric, values.tolist(), sample_ids, settings, counts))
    return out


def _in_record_order(bound: BoundEvaluator, column: _Column) -> tuple[np.ndarray, list[str], bool]:
    """The column's values and sample ids by (record, trial), and whether a sample repeats (trials or spans).

    A final summary streams results from the store already in that order: then nothing is copied or sorted
    (at a million values the copies, sort keys and sets cost more memory than the column itself).
    """
    ids, trials = column.record_ids, column.trials
    in_order = all(
        ids[i] < ids[i + 1] or (ids[i] == ids[i + 1] and trials[i] <= trials[i + 1]) for i in range(len(ids) - 1)
    )
    if in_order:
        # A copy, not a view: a view would pin the array, and partial summaries keep appending to it.
        values = np.array(column.values, dtype=np.float64)
        ordered_ids: list[str] = ids
    else:
        order = sorted(range(len(column.values)), key=trials.__getitem__)
        order.sort(key=ids.__getitem__)  # stable: by record, then trial (plain keys sort fastest)
        values = np.asarray([column.values[i] for i in order], dtype=np.float64)
        ordered_ids = [ids[i] for i in order]
    if bound.evaluator.scope == "span":
        sample_ids = [_sample_of(bound, record_id) for record_id in ordered_ids]
    else:
        sample_ids = ordered_ids
    # In record order a repeated sample sits next to itself: no set of every id is needed to find one.
    repeated = any(sample_ids[i] == sample_ids[i + 1] for i in range(len(sample_ids) - 1))
    return values, sample_ids, repeated


def _sample_of(bound: BoundEvaluator, record_id: str) -> str:
    # Span results are keyed "record/span": spans of one record share it as their cluster.
    if bound.evaluator.scope == "span":
        return record_id.rsplit("/", 1)[0]
    return record_id


def _clusters(
    bound: BoundEvaluator, sample_ids: list[str], repeated: bool, clusters_of: Mapping[str, str]
) -> list[str] | None:
    """Cluster keys when observations are not independent: a cluster key, trials, or spans of a record."""
    if clusters_of:
        return [clusters_of.get(sid, f"record:{sid}") for sid in sample_ids]
    if bound.evaluator.scope == "span" or repeated:
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
    if bound.evaluator.scope != "record" or len(set(sample_ids)) == len(sample_ids):
        return []  # one trial per sample: nothing to estimate
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
            )
            _copy_counts(counts, summary)
            summary.ci.level = settings.level
            if aggregate.mean is not None:
                summary.mean = aggregate.mean
            if aggregate.std is not None:
                summary.std = aggregate.std
            _interval(summary.ci, aggregate)
            out.append(summary)
    return out
