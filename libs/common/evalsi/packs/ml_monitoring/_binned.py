"""The numpy side of the drift metrics (``drift``): each record's value and sample stacked once, bins made per
``bins`` param, and PSI, Jensen-Shannon and the KS statistic by weights per (re)sample. Loaded by the first reduce,
not by the catalog."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from evalsi.errors import SkipRecord
from evalsi.packs.ml_monitoring._features import as_number
from evalsi.stats.weighted import Weighted, ones, weighted

PSI_FLOOR = 1e-4  # a bin's share floored here before the log: an empty bin would make PSI infinite
_ONE_SAMPLE = ("no reference records, or no current ones: the reference records carry metadata.<split_key> = "
               "<reference_split> (split = reference by default), the others are the current sample")


@dataclass(frozen=True)
class Samples:
    """Whether each record is a reference record, and its value: a number (``values``; then also, per record in
    its own order, 2 x the tie group of its value among the pooled sorted values + 1 for a reference record: the
    KS statistic's steps from one weighted bincount) or a category's code. Bins are made per ``bins`` param on
    first use and kept."""

    reference: NDArray[np.float64]  # 1.0 for a reference record
    numeric: bool
    values: NDArray[np.float64]
    steps: NDArray[np.intp]
    step_count: int
    categories: tuple[NDArray[np.intp], int]
    binned: dict[int, tuple[NDArray[np.intp], int]] = field(default_factory=dict)

    def bins(self, count: int) -> tuple[NDArray[np.intp], int]:
        """Each record's bin and the number of bins: reference quantile bins of a number, else its category."""
        if not self.numeric:
            return self.categories
        if count not in self.binned:
            if not self.reference.any() or self.reference.all():
                raise SkipRecord(_ONE_SAMPLE)
            edges = np.unique(np.quantile(self.values[self.reference == 1.0], np.linspace(0.0, 1.0, count + 1)))
            codes = np.searchsorted(edges[1:-1], self.values, side="right").astype(np.intp)
            self.binned[count] = (codes, max(len(edges) - 1, 1))
        return self.binned[count]


def stack(pairs: list[tuple[bool, Any]]) -> Weighted[Samples]:
    reference = np.fromiter((is_ref for is_ref, _ in pairs), dtype=np.float64, count=len(pairs))
    numbers = [as_number(value) for _, value in pairs]
    empty = np.zeros(0, dtype=np.intp)
    if all(number is not None for number in numbers):
        values = np.asarray(numbers, dtype=np.float64)
        order = np.argsort(values, kind="stable")
        ranked = values[order]
        groups = np.concatenate(([0], np.cumsum(ranked[1:] != ranked[:-1]))).astype(np.intp)
        steps = np.empty_like(groups)
        steps[order] = 2 * groups + (reference[order] == 1.0)
        samples = Samples(reference, True, values, steps, int(groups[-1]) + 1, (empty, 0))
    else:
        texts = [value if isinstance(value, str) else json.dumps(value, sort_keys=True) for _, value in pairs]
        index = {name: at for at, name in enumerate(sorted(set(texts)))}
        codes = np.fromiter(map(index.__getitem__, texts), dtype=np.intp, count=len(texts))
        samples = Samples(reference, False, np.zeros(0), empty, 0, (codes, len(index)))
    return ones(samples, len(pairs))


def _shares(data: Weighted[Samples], bins: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    samples = data.columns
    codes, count = samples.bins(bins)
    reference = np.bincount(codes, data.weights * samples.reference, minlength=count)
    current = np.bincount(codes, data.weights * (1.0 - samples.reference), minlength=count)
    if reference.sum() <= 0 or current.sum() <= 0:
        raise SkipRecord(_ONE_SAMPLE)
    return (np.asarray(reference, dtype=np.float64) / reference.sum(),
            np.asarray(current, dtype=np.float64) / current.sum())


def _values(values: Any) -> Weighted[Samples]:
    return weighted(values, "the feature in its row")


def psi(values: Any, bins: int) -> float:
    reference, current = (np.maximum(share, PSI_FLOOR) for share in _shares(_values(values), bins))
    return float(((current - reference) * np.log(current / reference)).sum())


def js(values: Any, bins: int) -> dict[str, float]:
    reference, current = _shares(_values(values), bins)
    middle = (reference + current) / 2.0
    divergence = 0.0
    for share in (reference, current):
        held = share > 0
        divergence += 0.5 * float((share[held] * np.log2(share[held] / middle[held])).sum())
    divergence = max(divergence, 0.0)
    return {"distance": float(np.sqrt(divergence)), "divergence": divergence}


def ks(values: Any, feature: str) -> dict[str, float]:
    data = _values(values)
    samples = data.columns
    if not samples.numeric:
        raise SkipRecord(f"feature {feature!r} is not numeric in every record: KS compares numbers")
    count = samples.step_count
    both = np.bincount(samples.steps, data.weights, minlength=2 * count).reshape(count, 2)
    reference, current = np.cumsum(both[:, 1]), np.cumsum(both[:, 0])
    if reference[-1] <= 0 or current[-1] <= 0:
        raise SkipRecord(_ONE_SAMPLE)
    statistic = float(np.abs(reference / reference[-1] - current / current[-1]).max())
    figures = {"statistic": statistic}
    if data.whole:
        from scipy.stats import ks_2samp  # scipy: only when a KS is reduced

        held = samples.reference == 1.0
        figures["pvalue"] = float(ks_2samp(samples.values[held], samples.values[~held]).pvalue)
    return figures
