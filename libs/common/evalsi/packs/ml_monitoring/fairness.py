"""Group fairness of a classifier over a sensitive attribute: demographic parity and equalized odds.

The attribute is a row feature or, when the row has none of that name, a metadata key (``sensitive``). Per group:
the selection rate (share predicted positive), the true positive rate (among labels positive) and the false
positive rate (among labels negative). As fairlearn's ``demographic_parity_difference``/``_ratio`` and
``equalized_odds_difference`` (agg ``worst_case``): the largest gap in selection rate, the smallest over the largest
selection rate, and the larger of the TPR and FPR gaps. A group with no positive labels has no TPR and one with no
negative labels no FPR; they are left out of that gap (fairlearn would count them as 0).
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
from numpy.typing import NDArray

from evalsi.errors import SkipRecord
from evalsi.evaluators import Output, evaluator
from evalsi.packs.ml_classic._values import label
from evalsi.packs.ml_classic._weighted import Weighted, ones, weighted
from evalsi.packs.ml_monitoring._features import features
from evalsi.records import from_value
from evalsi.v1alpha1.record_pb2 import Record

Groups = tuple[NDArray[np.intp], int, NDArray[np.float64], NDArray[np.float64]]


def _mapper(record: Record, *, sensitive: str, positive_label: str) -> tuple[str, bool, bool]:
    group: Any = None
    with contextlib.suppress(SkipRecord):  # a prediction without a row: the attribute may be in the metadata
        group = features(record).get(sensitive)
    if group is None and sensitive in record.metadata:
        group = from_value(record.metadata[sensitive])
    if group is None:
        raise SkipRecord(f"sensitive attribute {sensitive!r} is neither a row feature nor a metadata key")
    truth = label(record.reference, "reference") == positive_label
    return str(group), truth, label(record.output, "output") == positive_label


def _stack(triples: list[tuple[str, bool, bool]]) -> Weighted[Groups]:
    names = sorted({group for group, _, _ in triples})
    index = {name: at for at, name in enumerate(names)}
    codes = np.fromiter((index[group] for group, _, _ in triples), dtype=np.intp, count=len(triples))
    truths = np.fromiter((truth for _, truth, _ in triples), dtype=np.float64, count=len(triples))
    chosen = np.fromiter((chosen for _, _, chosen in triples), dtype=np.float64, count=len(triples))
    return ones((codes, len(names), truths, chosen), len(triples))


def _sums(codes: NDArray[np.intp], weights: NDArray[np.float64], count: int) -> NDArray[np.float64]:
    """Each group's sum of ``weights`` (float: numpy's stub types every bincount as int)."""
    return np.asarray(np.bincount(codes, weights, minlength=count), dtype=np.float64)


def _gap(top: NDArray[np.float64], bottom: NDArray[np.float64]) -> float | None:
    held = bottom > 0
    if held.sum() < 2:
        return None
    rates = top[held] / bottom[held]
    return float(rates.max() - rates.min())


@evaluator(
    "builtin/fairness",
    version="1.0.0",
    pack="ml-monitoring",
    scope="dataset",
    requires=["output", "reference"],
    mapper=_mapper,
    stack=_stack,
    outputs=[
        Output("demographic_parity_difference", "number", 0.0, 1.0, higher_is_better=False,
               description="Largest minus smallest selection rate across groups."),
        Output("demographic_parity_ratio", "number", 0.0, 1.0,
               description="Smallest over largest selection rate (none when no group is ever selected)."),
        Output("equalized_odds_difference", "number", 0.0, 1.0, higher_is_better=False,
               description="The larger of the TPR gap and the FPR gap across groups."),
    ],
    params={"sensitive": "The row feature (or metadata key) whose values are the groups.",
            "positive_label": "The favourable class (as text: 1, true, approved...)."},
)
def fairness(values: Any, *, sensitive: str, positive_label: str) -> dict[str, float]:
    """Demographic parity difference and ratio and equalized odds difference of the predictions across the groups
    of ``sensitive``; skipped with the reason when the records hold fewer than two groups."""
    data = weighted(values, "the sensitive attribute, a label and a prediction")
    codes, count, truths, chosen = data.columns
    weights = data.weights
    members = _sums(codes, weights, count)
    if np.count_nonzero(members) < 2:
        raise SkipRecord(f"fewer than two groups of {sensitive!r}: fairness compares groups")
    selected = _sums(codes, weights * chosen, count)
    rates = selected[members > 0] / members[members > 0]
    figures = {"demographic_parity_difference": float(rates.max() - rates.min())}
    if rates.max() > 0:
        figures["demographic_parity_ratio"] = float(rates.min() / rates.max())
    positives = _sums(codes, weights * truths, count)
    true_positives = _sums(codes, weights * truths * chosen, count)
    false_positives = _sums(codes, weights * (1.0 - truths) * chosen, count)
    gaps = [gap for gap in (_gap(true_positives, positives), _gap(false_positives, members - positives))
            if gap is not None]
    if gaps:
        figures["equalized_odds_difference"] = max(gaps)
    return figures


EVALUATORS = (fairness,)
