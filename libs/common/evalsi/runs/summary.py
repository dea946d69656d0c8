"""Per-record results to metric summaries: n, mean, std and an interval for every metric.

Metric names follow DESIGN.md: the alias for a single-output evaluator, ``alias.output`` for several,
and ``<metric>.pass@k`` / ``<metric>.pass^k`` when samples have several trials.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, islice

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
    """The scored values of one evaluator output, kept compact: no result objects or strings per value, but numbers,
    trials and record ids in typed arrays and one byte buffer (about 24 bytes a value, where a list of floats and a
    list of ids cost over 90), since a run's final summary holds them all."""

    values: array[float] = field(default_factory=lambda: array("d"))
    trials: array[int] = field(default_factory=lambda: array("i"))  # EvaluationResult.trial is an int32
    id_bytes: bytearray = field(default_factory=bytearray)  # the record ids of the values, UTF-8, back to back
    # Where each value's id ends in id_bytes: 4 bytes a value (a column's ids would need over 4 GiB to overflow it).
    id_ends: array[int] = field(default_factory=lambda: array("I"))
    labels: list[str] = field(default_factory=list)


@dataclass
class _Accumulated:
    dataset: bool
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_COUNTED, 0))
    scored: int = 0
    columns: dict[str, _Column] = field(default_factory=dict)
    dataset_results: list[EvaluationResult] = field(default_factory=list)
    # Error kind to [count, the first one's shortened reason]: what a reader needs to see why, results unread.
    error_kinds: dict[int, list[int | str]] = field(default_factory=dict)


_COUNTED: tuple[str, ...] = ("skipped", "errors", "infra_errors", "cancelled")  # read by _Accumulated, above


# A first reason longer than this is cut (a provider's error body can run long); 240 keeps the end of a connection
# error, where its address is.
REASON_CHARS = 240


def short_reason(reason: str) -> str:
    """A reason as one line of at most ``REASON_CHARS`` characters."""
    line = " ".join(reason.split())
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 1] + "…"


def _copy_counts(acc: _Accumulated, summary: MetricSummary) -> None:
    counts = acc.counts
    summary.skipped = counts["skipped"]
    summary.errors = counts["errors"]
    summary.infra_errors = counts["infra_errors"]
    summary.cancelled = counts["cancelled"]
    for kind in sorted(acc.error_kinds):
        count, reason = acc.error_kinds[kind]
        summary.error_kinds.add(kind=kind, count=int(count), first_reason=str(reason))


class SummaryBuilder:
    """Summaries built from results added in batches, so a large run is never held in memory at once."""

    def __init__(self, evaluators: Sequence[BoundEvaluator]) -> None:
        self._evaluators = list(evaluators)
        self._by_alias = {b.alias: _Accumulated(dataset=b.evaluator.scope == "dataset") for b in evaluators}
        # Results of evaluators this builder does not summarize, or of no known outcome, per outcome: counted so
        # that outcome_counts() covers every result added.
        self._uncounted: dict[int, int] = {}

    def outcome_counts(self) -> dict[int, int]:
        """How many results were added, per outcome (those of evaluators this builder does not summarize too)."""
        counts = dict(self._uncounted)
        for acc in self._by_alias.values():
            for outcome, n in (
                (OUTCOME_SCORED, acc.scored),
                (OUTCOME_SKIPPED, acc.counts["skipped"]),
                (OUTCOME_ERROR, acc.counts["errors"]),
                (OUTCOME_CANCELLED, acc.counts["cancelled"]),
            ):
                counts[outcome] = counts.get(outcome, 0) + n
        return {outcome: n for outcome, n in counts.items() if n}

    def add(self, results: Iterable[EvaluationResult]) -> None:
        # The hot loop of a run's summaries (a million results fold here): names bound locally, one dict lookup
        # per score, the record id read and encoded once per result and only when a value needs it. Scores are
        # indexed, not iterated: iterating a protobuf repeated field cost 5 us a result, twice indexing's.
        by_alias, uncounted = self._by_alias, self._uncounted
        for result in results:
            outcome = result.outcome
            acc = by_alias.get(result.evaluator)
            if acc is None:
                uncounted[outcome] = uncounted.get(outcome, 0) + 1
                continue
            if outcome == OUTCOME_SCORED:
                acc.scored += 1
                if acc.dataset:
                    acc.dataset_results.append(result)
                    continue
                columns = acc.columns
                record_id = b""
                trial = -1
                scores = result.scores
                for index in range(len(scores)):
                    score = scores[index]
                    column = columns.get(score.name)
                    if column is None:
                        column = columns[score.name] = _Column()
                    kind = score.WhichOneof("value")
                    if kind == "passed":
                        column.values.append(1.0 if score.passed else 0.0)
                    elif kind == "number":
                        column.values.append(score.number)
                    else:
                        column.labels.append(score.label if kind == "label" else "structured")
                        continue
                    if trial < 0:
                        record_id, trial = result.record_id.encode(), result.trial
                    ids = column.id_bytes
                    ids += record_id
                    column.id_ends.append(len(ids))
                    column.trials.append(trial)
            elif outcome == OUTCOME_SKIPPED:
                acc.counts["skipped"] += 1
            elif outcome == OUTCOME_ERROR:
                acc.counts["errors"] += 1
                if result.error_kind == ERROR_KIND_INFRA:
                    acc.counts["infra_errors"] += 1
                tally = acc.error_kinds.get(result.error_kind)
                if tally is None:
                    acc.error_kinds[result.error_kind] = [1, short_reason(result.reason)]
                else:
                    tally[0] = int(tally[0]) + 1
            elif outcome == OUTCOME_CANCELLED:
                acc.counts["cancelled"] += 1
            else:
                uncounted[outcome] = uncounted.get(outcome, 0) + 1

    def add_scored(
        self, evaluator: str, score_name: str, record_ids: Sequence[str], trials: Sequence[int],
        values: Sequence[float],
    ) -> bool:
        """What ``add`` does for scored results of ``evaluator`` that each have one pass/fail (1.0 or 0.0) or number
        score named ``score_name``, a column at a time (a worker's ``ResultColumns``: runs.result_columns). False, and
        nothing added, for an evaluator ``add`` must see the results of (unknown here, or dataset-scope)."""
        acc = self._by_alias.get(evaluator)
        if acc is None or acc.dataset:
            return False
        column = acc.columns.get(score_name)
        if column is None:
            column = acc.columns[score_name] = _Column()
        acc.scored += len(values)
        column.values.extend(values)
        column.trials.extend(trials)
        ids = "".join(record_ids)
        if ids.isascii():  # one character a byte: the ends follow from the lengths
            column.id_ends.extend(islice(accumulate(map(len, record_ids), initial=len(column.id_bytes)), 1, None))
            column.id_bytes += ids.encode()
        else:
            for record_id in record_ids:
                column.id_bytes += record_id.encode()
                column.id_ends.append(len(column.id_bytes))
        return True

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
    out: list[MetricSummary] = []
    for output, metric in bound.metric_names():
        summary = MetricSummary(
            metric=metric,
            evaluator=bound.alias,
            kind=_KINDS[output.type],
            higher_is_better=output.higher_is_better,
        )
        _copy_counts(acc, summary)
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
        samples = _Samples(bound, column, keep_ids=bool(clusters_of))
        clusters = _clusters(samples, clusters_of)
        _fill_numbers(summary, samples.values, output, clusters, settings)
        out.append(summary)
        if output.type == "boolean" and samples.repeated:
            out.extend(_pass_k(bound, metric, samples, settings, acc))
    return out


class _Samples:
    """A column's values in (record id, trial) order (ties in the order they came), which sample each value is of,
    and whether a sample repeats (trials, or spans of one record). Ids become strings only when asked for.

    Built without copying what it need not: at a million values each copy is 8 MB, and the summaries' peak is the
    scheduler's peak at the end of a run."""

    def __init__(self, bound: BoundEvaluator, column: _Column, *, keep_ids: bool) -> None:
        self.span = bound.evaluator.scope == "span"
        self._strings: list[str] | None = None
        if len(column.values) <= 1 and not (self.span or keep_ids):
            # One value is in order and repeats nothing: no sort keys (an Evaluate of one record, where building
            # them was a fifth of the worker's CPU for the call).
            self.values = np.array(column.values, dtype=np.float64)
            self.repeated = False
            self._keys = np.zeros(0, dtype="S1")
            return
        keys = _sort_keys(column)
        trials = np.frombuffer(column.trials, dtype=f"i{column.trials.itemsize}")
        ascending = keys[1:] >= keys[:-1]
        in_order = bool(np.all(ascending) and np.all((keys[1:] > keys[:-1]) | (trials[1:] >= trials[:-1])))
        del ascending
        values = np.frombuffer(column.values, dtype=np.float64)
        order = None
        if in_order:  # a store streams results in this order already: then nothing is sorted
            self.values = values.copy()  # a copy, not a view: a view would pin the column, which may still grow
        else:
            order = np.lexsort((trials, keys))  # stable: by record id, then trial
            self.values = values[order]
        del trials, values  # the views go, so the column's arrays may grow again (partial summaries)
        # In record order a repeated sample sits next to itself: no set of every id is needed to find one.
        if not (self.span or keep_ids) and not _repeats(keys, order):
            self.repeated = False
            self._keys = np.zeros(0, dtype=keys.dtype)  # no one asks for ids: the ordered keys are never made
            return
        self._keys = keys = keys if order is None else keys[order]
        del order
        if self.span:
            strings = self.strings()
            self.repeated = any(strings[i] == strings[i + 1] for i in range(len(strings) - 1))
        else:
            self.repeated = bool(np.any(keys[1:] == keys[:-1]))

    def strings(self) -> list[str]:
        """The sample id of each value: its record id, or for a span result ("record/span") its record's."""
        if self._strings is None:
            strings = [key.decode() for key in self._keys.tolist()]
            self._strings = [s.rsplit("/", 1)[0] for s in strings] if self.span else strings
        return self._strings

    def runs(self) -> np.ndarray:
        """Where each run of one record's values starts (record scope: its trials sit together)."""
        keys = self._keys
        return np.flatnonzero(np.concatenate((np.ones(1, dtype=bool), keys[1:] != keys[:-1])))


_KEY_CHUNK = 65_536  # values per step when building sort keys: bounds the temporary index arrays


def _sort_keys(column: _Column) -> np.ndarray:
    """One sortable key per value that orders as its record id does (UTF-8 bytes order as code points do).

    Fixed-width bytes (numpy compares them padded with NULs, so a shorter id sorts first, as in Python; a key gives
    its id back exactly) unless an id holds a NUL itself, where padding would tie "a" with "a\\0" and drop a
    trailing one: then Python bytes objects, slower and larger."""
    ids = bytes(column.id_bytes) if b"\0" in column.id_bytes else None
    ends = np.frombuffer(column.id_ends, dtype=f"u{column.id_ends.itemsize}")
    n = len(ends)
    if ids is not None:
        bounds = [0, *ends.tolist()]
        keys_of_ids = np.empty(n, dtype=object)
        keys_of_ids[:] = [ids[bounds[i]:bounds[i + 1]] for i in range(n)]
        return keys_of_ids
    chunks = [(first, min(n, first + _KEY_CHUNK)) for first in range(0, n, _KEY_CHUNK)]
    width = max([1, *(int(_id_spans(ends, first, last)[1].max()) for first, last in chunks)])
    keys = np.zeros(n, dtype=f"S{width}")
    grid = keys.view(np.uint8).reshape(n, width)
    data = np.frombuffer(column.id_bytes, dtype=np.uint8)
    for first, last in chunks:
        starts, lengths = _id_spans(ends, first, last)
        rows = grid[first:last]
        for j in range(int(lengths.max())):  # a column of bytes at a time
            has = lengths > j
            rows[has, j] = data[starts[has] + j]
    return keys


def _repeats(keys: np.ndarray, order: np.ndarray | None) -> bool:
    """Whether two neighbours in (record id) order have one id, read through ``order`` a slice at a time rather than
    by making the ordered keys."""
    if order is None:
        return bool(np.any(keys[1:] == keys[:-1]))
    for first in range(0, len(order) - 1, _KEY_CHUNK):
        ordered = keys[order[first : first + _KEY_CHUNK + 1]]
        if np.any(ordered[1:] == ordered[:-1]):
            return True
    return False


def _id_spans(ends: np.ndarray, first: int, last: int) -> tuple[np.ndarray, np.ndarray]:
    """Where the ids of values ``[first, last)`` start in the column's id buffer, and their lengths."""
    starts = np.empty(last - first, dtype=np.int64)
    starts[0] = ends[first - 1] if first else 0
    starts[1:] = ends[first : last - 1]
    return starts, ends[first:last].astype(np.int64) - starts


def _clusters(samples: _Samples, clusters_of: Mapping[str, str]) -> list[str] | None:
    """Cluster keys when observations are not independent: a cluster key, trials, or spans of a record."""
    if clusters_of:
        return [clusters_of.get(sid, f"record:{sid}") for sid in samples.strings()]
    if samples.span or samples.repeated:
        return samples.strings()
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
    samples: _Samples,
    settings: _Settings,
    acc: _Accumulated,
) -> list[MetricSummary]:
    """pass@k and pass^k over samples with several trials; k is the smallest trial count (plus any asked)."""
    if bound.evaluator.scope != "record" or not samples.repeated:
        return []  # one trial per sample: nothing to estimate
    values = samples.values
    starts = samples.runs()  # values are in record order: each record's trials are one run of the array
    n = np.diff(np.append(starts, len(values))).astype(np.int64)
    if not len(n) or int(n.max()) < 2:
        return []
    c = np.add.reduceat(values, starts).astype(np.int64)
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
            _copy_counts(acc, summary)
            summary.ci.level = settings.level
            if aggregate.mean is not None:
                summary.mean = aggregate.mean
            if aggregate.std is not None:
                summary.std = aggregate.std
            _interval(summary.ci, aggregate)
            out.append(summary)
    return out
