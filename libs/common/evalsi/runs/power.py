"""How many records a comparison needs: per metric, the sample size to detect a difference, and the minimum
detectable effect at the size a result already has, for the test ``compare_runs`` uses on that metric.

From one result, the spread of a future comparison is assumed from the result alone (B independent of A given
nothing else, which overstates it when the runs agree on most records); from two results, it is measured on their
pairs. Trials are averaged per record first: the record is the unit the tests count.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from evalsi.runs.compare import values_by_metric
from evalsi.stats.paired import minimum_detectable_effect
from evalsi.stats.paired_proportions import mcnemar_mde
from evalsi.stats.power import mcnemar_sample_size, t_sample_size
from evalsi.v1alpha1.run_pb2 import Run
from evalsi.v1alpha1.score_pb2 import VALUE_KIND_BOOLEAN, VALUE_KIND_NUMBER


@dataclass(frozen=True)
class MetricPower:
    """One metric's sizing: ``spread`` is the discordant share (mcnemar) or the sd of the per-record differences
    (paired-t), ``measured`` whether it came from pairs of two results rather than assumed from one."""

    metric: str
    test: str
    spread: float | None
    measured: bool
    records: int
    mde: float | None
    needed: int | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan(diff: float, *, test: str, spread: float, alpha: float, power: float) -> int | None:
    """Records needed to detect ``diff`` with ``test`` ("mcnemar": spread is the discordant share; "paired-t": the
    sd of the differences); ``None`` for a paired t with no spread to size from, or a pass/fail difference
    beyond 1."""
    if test == "mcnemar":  # a pass rate moves by at most 1
        return mcnemar_sample_size(diff, spread, alpha, power) if abs(diff) <= 1.0 else None
    return None if spread <= 0.0 else t_sample_size(diff, spread, alpha, power)


def size_metrics(a: Run, b: Run | None, diff: float, *, alpha: float, power: float) -> list[MetricPower]:
    """Per comparable metric of ``a`` (numbers and pass/fail, not pass@k), its sizing for a difference ``diff``."""
    values_a = values_by_metric(a)
    values_b = values_by_metric(b) if b is not None else None
    out = []
    for summary in a.summaries:
        if summary.kind not in (VALUE_KIND_NUMBER, VALUE_KIND_BOOLEAN) or summary.k:
            continue
        per_record_a = _per_record(values_a.get(summary.metric, {}))
        if values_b is None:
            test, spread, records = _assumed(per_record_a, summary.kind == VALUE_KIND_BOOLEAN,
                                             _has_trials(values_a.get(summary.metric, {})))
        else:
            pairs_a, pairs_b = values_a.get(summary.metric, {}), values_b.get(summary.metric, {})
            test, spread, records = _measured(pairs_a, pairs_b, summary.kind == VALUE_KIND_BOOLEAN)
        mde = _mde(test, spread, records, alpha, power)
        needed = plan(diff, test=test, spread=spread, alpha=alpha, power=power) if spread is not None else None
        out.append(MetricPower(summary.metric, test, spread, values_b is not None, records, mde, needed))
    return out


def _per_record(values: dict[tuple[str, int], float]) -> dict[str, float]:
    sums: dict[str, list[float]] = defaultdict(list)
    for (record, _trial), value in values.items():
        sums[record].append(value)
    return {record: sum(v) / len(v) for record, v in sums.items()}


def _has_trials(values: dict[tuple[str, int], float]) -> bool:
    return len({record for record, _ in values}) < len(values)


def _assumed(per_record: dict[str, float], pass_fail: bool, trials: bool) -> tuple[str, float | None, int]:
    x = np.fromiter(per_record.values(), dtype=np.float64)
    if pass_fail and not trials:
        rate = float(x.mean()) if x.size else math.nan
        return "mcnemar", (2.0 * rate * (1.0 - rate) if x.size else None), int(x.size)
    spread = math.sqrt(2.0) * float(np.std(x, ddof=1)) if x.size >= 2 else None
    return "paired-t", spread, int(x.size)


def _measured(a: dict[tuple[str, int], float], b: dict[tuple[str, int], float],
              pass_fail: bool) -> tuple[str, float | None, int]:
    keys = sorted(set(a) & set(b))
    if pass_fail and not _has_trials({k: 0.0 for k in keys}):
        n = len(keys)
        discordant = sum(1 for k in keys if a[k] != b[k])
        return "mcnemar", (discordant / n if n else None), n
    diffs = _per_record({k: b[k] - a[k] for k in keys})
    x = np.fromiter(diffs.values(), dtype=np.float64)
    return "paired-t", (float(np.std(x, ddof=1)) if x.size >= 2 else None), int(x.size)


def _mde(test: str, spread: float | None, records: int, alpha: float, power: float) -> float | None:
    if spread is None or records < 2:
        return None
    if test == "mcnemar":
        return mcnemar_mde(spread, records, alpha, power)
    return minimum_detectable_effect(spread, records, alpha, power)
