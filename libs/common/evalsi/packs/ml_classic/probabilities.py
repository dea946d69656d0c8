"""Metrics of predicted class probabilities: ROC-AUC, average precision (PR-AUC), log-loss, Brier score and ECE.

Each record's probabilities (``Content.row.probabilities``) and label are stacked once into a matrix over the
classes (every label and probability key, sorted as text; a class missing from a record's probabilities counts
as 0, except that in a two-class task a record giving only one class's probability gives the other as its
complement). The scores are sorted once per class, ties grouped; a resample is only new weights over that order,
so ROC-AUC and average precision cost two ``np.bincount`` a class per resample and never a sort. Equal to
scikit-learn's ``roc_auc_score`` (binary; ``multi_class="ovr"``, macro), ``average_precision_score``,
``log_loss`` and ``brier_score_loss``; ECE to its definition (tests/packs/test_ml_classic.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from evalsi.errors import BadInputError, SkipRecord
from evalsi.evaluators import Output, evaluator
from evalsi.packs.ml_classic._values import label, probabilities
from evalsi.packs.ml_classic._weighted import Weighted, codes, ones, weighted
from evalsi.v1alpha1.record_pb2 import Record

PACK = "ml-classic"
_NEEDS = "a class label in its reference and class probabilities in its output row"
_EPS = float(np.finfo(np.float64).eps)  # log_loss clips probabilities to [eps, 1 - eps], as scikit-learn does
_POSITIVE = {"positive_label": "The class scored as positive. Empty: the greater of two classes (sorted as text, "
                               "scikit-learn's pos_label), or, with more classes, the macro one-vs-rest average."}


@dataclass(frozen=True)
class Ranking:
    """One class's scores sorted once (highest first): which rows are that class, and the groups of tied scores."""

    order: NDArray[np.intp]
    positive: NDArray[np.float64]  # 1.0 where the row (in ``order``) has this class as its label
    groups: NDArray[np.intp]  # the tie group of each sorted row: equal scores share one threshold
    count: int


@dataclass(frozen=True)
class Probabilities:
    classes: list[str]
    truths: NDArray[np.intp]
    rankings: dict[int, Ranking]
    # Per record, computed once: -ln p(label) clipped as log_loss clips it, the squared distance of the
    # probabilities from the label's one-hot vector, the top probability and whether its class is the label.
    losses: NDArray[np.float64]
    squared: NDArray[np.float64]
    confidence: NDArray[np.float64]
    hit: NDArray[np.float64]


def _pair(record: Record, **_: Any) -> tuple[str, dict[str, float]]:
    return label(record.reference, "reference"), probabilities(record.output)


def _ranking(scores: NDArray[np.float64], positive: NDArray[np.bool_]) -> Ranking:
    order = np.argsort(-scores, kind="stable")
    ranked = scores[order]
    groups = np.concatenate(([0], np.cumsum(ranked[1:] != ranked[:-1]))).astype(np.intp)
    return Ranking(order, positive[order].astype(np.float64), groups, int(groups[-1]) + 1)


def _stack(pairs: list[tuple[str, dict[str, float]]]) -> Weighted[Probabilities]:
    truths = [truth for truth, _ in pairs]
    classes = sorted({*truths, *(name for _, given in pairs for name in given)})
    matrix = np.zeros((len(pairs), len(classes)), dtype=np.float64)
    column = {name: at for at, name in enumerate(classes)}
    two = len(classes) == 2
    for row, (_, given) in enumerate(pairs):
        for name, probability in given.items():
            matrix[row, column[name]] = probability
        if two and len(given) == 1:
            ((name, probability),) = given.items()
            matrix[row, 1 - column[name]] = 1.0 - probability
    labels = codes(truths, classes)
    rankings = {at: _ranking(matrix[:, at], labels == at) for at in range(len(classes))}
    rows = np.arange(len(pairs))
    onehot = np.zeros_like(matrix)
    onehot[rows, labels] = 1.0
    predicted = np.argmax(matrix, axis=1)  # the first class in order on a tie
    stacked = Probabilities(
        classes, labels, rankings, losses=-np.log(np.clip(matrix[rows, labels], _EPS, 1.0 - _EPS)),
        squared=((onehot - matrix) ** 2).sum(axis=1), confidence=matrix[rows, predicted],
        hit=(predicted == labels).astype(np.float64),
    )
    return ones(stacked, len(pairs))


def _positive_class(data: Probabilities, positive_label: str) -> int | None:
    """The column scored as positive, or None for the macro one-vs-rest average over every class."""
    if positive_label:
        if positive_label not in data.classes:
            raise SkipRecord(f"positive_label {positive_label!r} is not a class of any record "
                             f"(classes: {', '.join(data.classes[:10])})")
        return data.classes.index(positive_label)
    if len(data.classes) < 2:
        raise SkipRecord(f"only one class ({data.classes[0]!r}): a score of one class against the rest needs two")
    return 1 if len(data.classes) == 2 else None


def _counts(ranking: Ranking, weights: NDArray[np.float64], name: str) -> tuple[NDArray[np.float64], ...]:
    """Per tie group (highest score first): the weight of positives and negatives, and their running totals."""
    sorted_weights = weights[ranking.order]
    # float with weights (numpy's stub says int)
    hits = np.asarray(np.bincount(ranking.groups, sorted_weights * ranking.positive, minlength=ranking.count),
                      dtype=np.float64)
    misses = np.asarray(np.bincount(ranking.groups, sorted_weights * (1.0 - ranking.positive),
                                    minlength=ranking.count), dtype=np.float64)
    if hits.sum() <= 0 or misses.sum() <= 0:
        side = "no record has" if hits.sum() <= 0 else "every record has"
        raise SkipRecord(f"{side} the label {name!r}: the metric needs both it and another class among the labels")
    return hits, misses, np.cumsum(hits), np.cumsum(misses)


def _roc_auc(ranking: Ranking, weights: NDArray[np.float64], name: str) -> float:
    hits, misses, true_positives, false_positives = _counts(ranking, weights, name)
    # Trapezoids of the ROC curve: each threshold adds its false positives times the mean height across it.
    area = float((misses * (true_positives - hits / 2.0)).sum())
    return area / float(true_positives[-1] * false_positives[-1])


def _average_precision(ranking: Ranking, weights: NDArray[np.float64], name: str) -> float:
    hits, _, true_positives, false_positives = _counts(ranking, weights, name)
    # Sum over thresholds of the recall gained times the precision there (scikit-learn's step-wise AP).
    listed = true_positives + false_positives  # 0 only before the first drawn record of a resample
    precision = np.divide(true_positives, listed, out=np.zeros_like(listed), where=listed > 0)
    return float((hits * precision).sum() / true_positives[-1])


def _one_vs_rest(values: Any, positive_label: str, metric: Any) -> float:
    data = weighted(values, _NEEDS)
    stacked: Probabilities = data.columns
    positive = _positive_class(stacked, positive_label)
    at_classes = range(len(stacked.classes)) if positive is None else (positive,)
    return float(np.mean([metric(stacked.rankings[at], data.weights, stacked.classes[at]) for at in at_classes]))


@evaluator(
    "builtin/roc-auc",
    version="1.0.0",
    pack=PACK,
    scope="dataset",
    requires=["output", "reference"],
    mapper=_pair,
    stack=_stack,
    outputs=[Output("roc_auc", "number", 0.0, 1.0, description="Area under the ROC curve.")],
    params=_POSITIVE,
)
def roc_auc(values: Any, *, positive_label: str = "") -> float:
    """Area under the ROC curve of the positive class's probability (scikit-learn's ``roc_auc_score``); with more
    than two classes and no positive_label, the macro average of each class against the rest (``multi_class=
    "ovr"``). Skipped with the reason when the labels hold one class only."""
    return _one_vs_rest(values, positive_label, _roc_auc)


@evaluator(
    "builtin/pr-auc",
    version="1.0.0",
    pack=PACK,
    scope="dataset",
    requires=["output", "reference"],
    mapper=_pair,
    stack=_stack,
    outputs=[Output("average_precision", "number", 0.0, 1.0, description="Area under the precision-recall "
                                                                          "curve, as average precision.")],
    params=_POSITIVE,
)
def pr_auc(values: Any, *, positive_label: str = "") -> float:
    """Average precision of the positive class's probability (scikit-learn's ``average_precision_score``: the
    step-wise area, not the trapezoidal one); with more than two classes, the macro one-vs-rest average."""
    return _one_vs_rest(values, positive_label, _average_precision)


@evaluator(
    "builtin/log-loss",
    version="1.0.0",
    pack=PACK,
    scope="dataset",
    requires=["output", "reference"],
    mapper=_pair,
    stack=_stack,
    outputs=[Output("log_loss", "number", 0.0, None, higher_is_better=False,
                    description="Mean negative log-probability of the true class (natural log).")],
)
def log_loss(values: Any) -> float:
    """Cross-entropy: the mean of -ln p(label), probabilities clipped to [eps, 1 - eps] (scikit-learn's
    ``log_loss`` with the classes given as labels)."""
    data = weighted(values, _NEEDS)
    stacked: Probabilities = data.columns
    if len(stacked.classes) < 2:
        raise SkipRecord(f"only one class ({stacked.classes[0]!r}): log-loss needs two")
    return float((data.weights * stacked.losses).sum() / data.weights.sum())


@evaluator(
    "builtin/brier",
    version="1.0.0",
    pack=PACK,
    scope="dataset",
    requires=["output", "reference"],
    mapper=_pair,
    stack=_stack,
    outputs=[Output("brier", "number", 0.0, 2.0, higher_is_better=False,
                    description="Mean squared error of the class probabilities.")],
)
def brier(values: Any) -> float:
    """Mean over records of the squared differences between the probabilities and the label's one-hot vector,
    summed over the classes and halved for two classes (so binary is mean (y - p)^2): scikit-learn's
    ``brier_score_loss``."""
    data = weighted(values, _NEEDS)
    stacked: Probabilities = data.columns
    k = len(stacked.classes)
    if k < 2:
        raise SkipRecord(f"only one class ({stacked.classes[0]!r}): the Brier score needs two")
    halved = 0.5 if k < 3 else 1.0
    return halved * float((data.weights * stacked.squared).sum() / data.weights.sum())


def _check_bins(*, bins: int = 10) -> None:
    if not 1 <= bins <= 1_000:
        raise BadInputError(f"evaluator builtin/ece: param 'bins' must be between 1 and 1000, got {bins}")


@evaluator(
    "builtin/ece",
    version="1.0.0",
    pack=PACK,
    scope="dataset",
    requires=["output", "reference"],
    mapper=_pair,
    stack=_stack,
    check=_check_bins,
    outputs=[Output("ece", "number", 0.0, 1.0, higher_is_better=False,
                    description="Expected calibration error of the most probable class.")],
    params={"bins": "Equal-width confidence bins over [0, 1]: bin m holds confidences in ((m-1)/bins, m/bins]."},
)
def ece(values: Any, *, bins: int = 10) -> float:
    """Expected calibration error (top-label): records binned by the highest probability (equal-width bins,
    the first also holding 0), then the sum over bins of |accuracy - mean confidence| weighted by the bin's share
    of records; the predicted class is the most probable one (the first in class order on a tie)."""
    data = weighted(values, _NEEDS)
    stacked: Probabilities = data.columns
    which = np.clip(np.ceil(stacked.confidence * bins).astype(np.intp) - 1, 0, bins - 1)
    gaps = np.bincount(which, data.weights * (stacked.hit - stacked.confidence), minlength=bins)
    return float(np.abs(gaps).sum() / data.weights.sum())


EVALUATORS = (roc_auc, pr_auc, log_loss, brier, ece)
