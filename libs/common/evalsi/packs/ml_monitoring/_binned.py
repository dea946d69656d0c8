"""The numpy side of the drift metrics (``drift``): each record's value and sample stacked once, bins made per
``bins`` param, and PSI, Jensen-Shannon and the KS statistic over the drawn rows per (re)sample (one ``bincount``
of codes that hold both the bin and the sample: ``ml_classic._drawn``). Loaded by the first reduce, not by the
catalog."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from evalsi.errors import SkipRecord
from evalsi.packs.ml_classic._drawn import Drawn, drawn, of
from evalsi.packs.ml_monitoring._features import as_number

PSI_FLOOR = 1e-4  # a bin's share floored here before the log: an empty bin would make PSI infinite
_ONE_SAMPLE = ("no reference records, or no current ones: the reference records carry metadata.<split_key> = "
               "<reference_split> (split = reference by default), the others are the current sample")


@dataclass(frozen=True)
class Samples:
    """Whether each record is a reference record, and its value: a number (``values``; then also, per record in
    its own order, the tie group of its value among the pooled sorted values, plus ``step_count`` for a reference
    record: the KS statistic's steps from one bincount) or a category. Each record's bin, plus the number of bins
    for a reference record, is made per ``bins`` param on first use and kept."""

    reference: NDArray[np.bool_]
    numeric: bool
    values: NDArray[np.float64]
    steps: NDArray[np.intp]
    step_count: int
    categories: tuple[NDArray[np.intp], int]
    binned: dict[int, tuple[NDArray[np.intp], int]] = field(default_factory=dict)

    def bins(self, count: int) -> tuple[NDArray[np.intp], int]:
        """Each record's bin (plus the number of bins for a reference record) and the number of bins: reference
        quantile bins of a number, else its category."""
        if not self.numeric:
            return self.categories
        if count not in self.binned:
            if not self.reference.any() or self.reference.all():
                raise SkipRecord(_ONE_SAMPLE)
            edges = np.unique(np.quantile(self.values[self.reference], np.linspace(0.0, 1.0, count + 1)))
            codes = np.searchsorted(edges[1:-1], self.values, side="right").astype(np.intp)
            bins = max(len(edges) - 1, 1)
            self.binned[count] = (codes + bins * self.reference, bins)
        return self.binned[count]


def stack(pairs: list[tuple[bool, Any]]) -> Drawn[Samples]:
    reference = np.fromiter((is_ref for is_ref, _ in pairs), dtype=np.bool_, count=len(pairs))
    numbers = [as_number(value) for _, value in pairs]
    empty = np.zeros(0, dtype=np.intp)
    if all(number is not None for number in numbers):
        values = np.asarray(numbers, dtype=np.float64)
        order = np.argsort(values, kind="stable")
        ranked = values[order]
        groups = np.concatenate(([0], np.cumsum(ranked[1:] != ranked[:-1]))).astype(np.intp)
        count = int(groups[-1]) + 1
        steps = np.empty_like(groups)
        steps[order] = groups + count * reference[order]
        samples = Samples(reference, True, values, steps, count, (empty, 0))
    else:
        texts = [value if isinstance(value, str) else json.dumps(value, sort_keys=True) for _, value in pairs]
        index = {name: at for at, name in enumerate(sorted(set(texts)))}
        codes = np.fromiter(map(index.__getitem__, texts), dtype=np.intp, count=len(texts))
        samples = Samples(reference, False, np.zeros(0), empty, 0, (codes + len(index) * reference, len(index)))
    # Every figure counts the drawn rows by a code fixed by the value and the sample (a bin of a value, its KS
    # step, its category): the cells are a number's step or a category, in its sample.
    codes, count = (samples.steps, samples.step_count) if samples.numeric else samples.categories
    return drawn(samples, len(pairs), cells=(codes, 2 * count))


def _shares(data: Drawn[Samples], bins: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    codes, count = data.columns.bins(bins)
    current, reference = data.count(codes, 2 * count).reshape(2, count)
    if reference.sum() <= 0 or current.sum() <= 0:
        raise SkipRecord(_ONE_SAMPLE)
    return reference / reference.sum(), current / current.sum()


def _values(values: Any) -> Drawn[Samples]:
    return of(values, "the feature in its row")


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
    steps = data.count(samples.steps, 2 * count).reshape(2, count)
    reference, current = np.cumsum(steps[1]), np.cumsum(steps[0])
    if reference[-1] <= 0 or current[-1] <= 0:
        raise SkipRecord(_ONE_SAMPLE)
    statistic = float(np.abs(reference / reference[-1] - current / current[-1]).max())
    figures = {"statistic": statistic}
    if data.whole:
        from scipy.stats import ks_2samp  # scipy: only when a KS is reduced

        held = samples.reference
        figures["pvalue"] = float(ks_2samp(samples.values[held], samples.values[~held]).pvalue)
    return figures
