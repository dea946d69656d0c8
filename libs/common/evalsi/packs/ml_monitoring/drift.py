"""Drift of one feature between the reference records and the current ones: PSI, KS and Jensen-Shannon.

Both samples come from the run's dataset: the records whose ``metadata.<split_key>`` is the reference split, and
every other record. A feature is numeric when every value is a number (or a numeric string, as CSV cells are);
otherwise its values are categories (compared as text). Numeric values are binned by the reference's quantiles
(``bins`` of them, numpy's linear interpolation; repeated edges merged): bin i holds [q_i, q_{i+1}), the first and
last open-ended, so a current value outside the reference's range still counts. Categories are their own bins.
The bins are fixed from the whole data; the bootstrap resamples which records fall in them (weights), so its
re-reduces sort nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from evalsi.errors import BadInputError, SkipRecord
from evalsi.evaluators import Output, evaluator
from evalsi.packs.ml_classic._weighted import Weighted, ones, weighted
from evalsi.packs.ml_monitoring._features import SPLIT_PARAMS, as_number, is_reference
from evalsi.packs.ml_monitoring._features import feature as feature_value
from evalsi.v1alpha1.record_pb2 import Record

PACK = "ml-monitoring"
PSI_FLOOR = 1e-4  # a bin's share floored here before the log: an empty bin would make PSI infinite
_DRIFT_PARAMS = {"feature": "The row feature compared.", "bins": "Quantile bins of a numeric feature (2 to 1000).",
                 **SPLIT_PARAMS}


@dataclass(frozen=True)
class Samples:
    """Whether each record is a reference record, and its value: a number (``values``; then also the pooled
    values' order and tie groups, the KS statistic's steps) or a category's code. Bins are made per ``bins``
    param on first use and kept."""

    reference: NDArray[np.float64]  # 1.0 for a reference record
    numeric: bool
    values: NDArray[np.float64]
    order: NDArray[np.intp]
    groups: NDArray[np.intp]
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


def _mapper(record: Record, *, feature: str, split_key: str = "split", reference_split: str = "reference",
            **_: Any) -> tuple[bool, Any]:
    return is_reference(record, split_key, reference_split), feature_value(record, feature)


def _check(*, feature: str, bins: int = 10, split_key: str = "split", reference_split: str = "reference") -> None:
    if not feature:
        raise BadInputError("param 'feature' must name a row feature")
    if not 2 <= bins <= 1_000:
        raise BadInputError(f"param 'bins' must be between 2 and 1000, got {bins}")


def _stack(pairs: list[tuple[bool, Any]]) -> Weighted[Samples]:
    reference = np.fromiter((is_ref for is_ref, _ in pairs), dtype=np.float64, count=len(pairs))
    numbers = [as_number(value) for _, value in pairs]
    empty = np.zeros(0, dtype=np.intp)
    if all(number is not None for number in numbers):
        values = np.asarray(numbers, dtype=np.float64)
        order = np.argsort(values, kind="stable")
        ranked = values[order]
        groups = np.concatenate(([0], np.cumsum(ranked[1:] != ranked[:-1]))).astype(np.intp)
        samples = Samples(reference, True, values, order, groups, (empty, 0))
    else:
        texts = [value if isinstance(value, str) else json.dumps(value, sort_keys=True) for _, value in pairs]
        index = {name: at for at, name in enumerate(sorted(set(texts)))}
        codes = np.fromiter(map(index.__getitem__, texts), dtype=np.intp, count=len(texts))
        samples = Samples(reference, False, np.zeros(0), empty, empty, (codes, len(index)))
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


_ONE_SAMPLE = ("no reference records, or no current ones: the reference records carry metadata.<split_key> = "
               "<reference_split> (split = reference by default), the others are the current sample")


def _values(values: Any) -> Weighted[Samples]:
    return weighted(values, "the feature in its row")


@evaluator(
    "builtin/psi",
    version="1.0.0",
    pack=PACK,
    scope="dataset",
    requires=["output"],
    mapper=_mapper,
    stack=_stack,
    check=_check,
    outputs=[Output("psi", "number", 0.0, None, higher_is_better=False,
                    description="Population stability index of the feature (0.1: moderate, 0.25: large shift).")],
    params=_DRIFT_PARAMS,
)
def psi(values: Any, *, feature: str, bins: int = 10, split_key: str = "split",
        reference_split: str = "reference") -> float:
    """Population stability index: the sum over bins of (current - reference share) x ln(current / reference
    share), each share floored at 1e-4."""
    reference, current = (np.maximum(share, PSI_FLOOR) for share in _shares(_values(values), bins))
    return float(((current - reference) * np.log(current / reference)).sum())


@evaluator(
    "builtin/js-divergence",
    version="1.0.0",
    pack=PACK,
    scope="dataset",
    requires=["output"],
    mapper=_mapper,
    stack=_stack,
    check=_check,
    outputs=[
        Output("distance", "number", 0.0, 1.0, higher_is_better=False,
               description="Jensen-Shannon distance, base 2: scipy.spatial.distance.jensenshannon."),
        Output("divergence", "number", 0.0, 1.0, higher_is_better=False,
               description="Jensen-Shannon divergence, base 2: the distance squared."),
    ],
    params=_DRIFT_PARAMS,
)
def js_divergence(values: Any, *, feature: str, bins: int = 10, split_key: str = "split",
                  reference_split: str = "reference") -> dict[str, float]:
    """Jensen-Shannon distance (scipy's ``jensenshannon(reference, current, base=2)``) between the binned shares
    of the two samples, and the divergence, its square."""
    reference, current = _shares(_values(values), bins)
    middle = (reference + current) / 2.0
    divergence = 0.0
    for share in (reference, current):
        held = share > 0
        divergence += 0.5 * float((share[held] * np.log2(share[held] / middle[held])).sum())
    divergence = max(divergence, 0.0)
    return {"distance": float(np.sqrt(divergence)), "divergence": divergence}


@evaluator(
    "builtin/ks",
    version="1.0.0",
    pack=PACK,
    scope="dataset",
    requires=["output"],
    mapper=_mapper,
    stack=_stack,
    check=_check,
    outputs=[
        Output("statistic", "number", 0.0, 1.0, higher_is_better=False,
               description="Two-sample Kolmogorov-Smirnov statistic: the largest gap between the samples' CDFs."),
        Output("pvalue", "number", 0.0, 1.0, description="Its two-sided p-value (scipy.stats.ks_2samp); no "
                                                          "interval: a p-value is no bootstrap quantity."),
    ],
    params=_DRIFT_PARAMS,
)
def ks(values: Any, *, feature: str, bins: int = 10, split_key: str = "split",
       reference_split: str = "reference") -> dict[str, float]:
    """The two-sample KS statistic of a numeric feature, reference against current, and its two-sided p-value:
    scipy's ``ks_2samp`` (method ``auto``). ``bins`` is unused here (shared with PSI and JS)."""
    data = _values(values)
    samples = data.columns
    if not samples.numeric:
        raise SkipRecord(f"feature {feature!r} is not numeric in every record: KS compares numbers")
    weights = data.weights[samples.order]
    flags = samples.reference[samples.order]
    count = int(samples.groups[-1]) + 1
    reference = np.cumsum(np.bincount(samples.groups, weights * flags, minlength=count))
    current = np.cumsum(np.bincount(samples.groups, weights * (1.0 - flags), minlength=count))
    if reference[-1] <= 0 or current[-1] <= 0:
        raise SkipRecord(_ONE_SAMPLE)
    statistic = float(np.abs(reference / reference[-1] - current / current[-1]).max())
    figures = {"statistic": statistic}
    if data.whole:
        from scipy.stats import ks_2samp  # scipy: only when a KS is reduced

        held = samples.reference == 1.0
        figures["pvalue"] = float(ks_2samp(samples.values[held], samples.values[~held]).pvalue)
    return figures


EVALUATORS = (psi, js_divergence, ks)
