"""Paired comparison of two result sets: per metric, B against A on the records both scored, with the p-values
adjusted across the metrics compared (Holm by default) so that comparing many metrics does not multiply the
chance of a false "worse"."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

import numpy as np

from evalsi import stats
from evalsi.stats.defaults import DEFAULT_ADJUSTMENT, DEFAULT_CONFIDENCE
from evalsi.stats.multiplicity import adjust_p_values
from evalsi.v1alpha1.run_pb2 import Comparison, MetricComparison, Run
from evalsi.v1alpha1.score_pb2 import OUTCOME_SCORED, VALUE_KIND_BOOLEAN, VALUE_KIND_NUMBER

# (record id, trial) -> value, per metric name.
_Values = dict[str, dict[tuple[str, int], float]]


def values_by_metric(run: Run) -> _Values:
    """Per-record values of each numeric or pass/fail metric, named as in the run's summaries."""
    multi_output: dict[str, set[str]] = defaultdict(set)
    for result in run.results:
        for score in result.scores:
            multi_output[result.evaluator].add(score.name)
    summaries = {s.metric for s in run.summaries}
    values: _Values = defaultdict(dict)
    for result in run.results:
        if result.outcome != OUTCOME_SCORED:
            continue
        for score in result.scores:
            kind = score.WhichOneof("value")
            if kind not in ("number", "passed"):
                continue
            metric = f"{result.evaluator}.{score.name}"
            if metric not in summaries:
                metric = result.evaluator
            values[metric][(result.record_id, result.trial)] = float(getattr(score, kind))
    return values


def _clusters_of(run: Run) -> dict[str, str]:
    """Record id to the cluster its results carry (``EvaluationResult.cluster``), for runs clustered by a key."""
    return {result.record_id: result.cluster for result in run.results if result.cluster}


def compare_runs(a: Run, b: Run, *, confidence: float = DEFAULT_CONFIDENCE,
                 adjust: str = DEFAULT_ADJUSTMENT) -> Comparison:
    """B versus A, paired by (record, trial); trials of one record are clustered. The verdicts read the p-values
    adjusted across the metrics compared (``adjust``: holm, bh or none)."""
    values_a, values_b = values_by_metric(a), values_by_metric(b)
    clusters = {**_clusters_of(b), **_clusters_of(a)}
    kinds = {s.metric: s for s in b.summaries}
    comparison = Comparison(run_a=a.id, run_b=b.id, adjust=adjust)
    for metric in [s.metric for s in a.summaries]:
        summary = kinds.get(metric)
        if summary is None or summary.kind not in (VALUE_KIND_NUMBER, VALUE_KIND_BOOLEAN) or summary.k:
            continue
        comparison.metrics.append(
            _compare_metric(metric, values_a.get(metric, {}), values_b.get(metric, {}), summary.higher_is_better,
                            confidence, clusters)
        )
    tested = [m for m in comparison.metrics if m.HasField("p_value")]
    adjusted = adjust_p_values([m.p_value for m in tested], adjust)
    for compared, p_adjusted in zip(tested, adjusted, strict=True):
        compared.p_value_adjusted = p_adjusted
        if p_adjusted >= 1.0 - confidence and compared.verdict in ("better", "worse"):
            compared.verdict = "no significant difference"
    return comparison


def _compare_metric(
    metric: str,
    a: Mapping[tuple[str, int], float],
    b: Mapping[tuple[str, int], float],
    higher_is_better: bool,
    confidence: float,
    cluster_of: Mapping[str, str],
) -> MetricComparison:
    keys = sorted(set(a) & set(b))
    out = MetricComparison(metric=metric, n_pairs=len(keys), unpaired=len(set(a) ^ set(b)))
    xa = np.asarray([a[k] for k in keys], dtype=np.float64)
    xb = np.asarray([b[k] for k in keys], dtype=np.float64)
    # The run's --cluster-by groups (each result carries its record's), else the trials of each record.
    groups = [cluster_of.get(record, record) for record, _ in keys]
    clusters = groups if len(set(groups)) < len(groups) else None
    result = stats.paired_difference(xa, xb, clusters=clusters, level=confidence, higher_is_better=higher_is_better)
    for field in ("mean_a", "mean_b", "diff", "p_value", "mde"):
        value = getattr(result, field)
        if value is not None:
            setattr(out, field, value)
    out.ci.level = confidence
    if result.ci_low is not None and result.ci_high is not None:
        out.ci.low, out.ci.high = result.ci_low, result.ci_high
        out.ci.method = result.method or ""
    out.verdict = result.verdict
    out.test = result.test or ""
    return out
