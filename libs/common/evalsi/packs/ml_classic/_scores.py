"""The numpy side of the probability metrics (``probabilities``): the probability matrix and each class's sorted
order stacked once, then ROC-AUC, average precision, log-loss, Brier and ECE over the drawn rows per (re)sample
(``_drawn``). Loaded by the first reduce, not by the catalog."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from evalsi.errors import SkipRecord
from evalsi.packs.ml_classic._curves import average_precisions, check, roc_aucs
from evalsi.packs.ml_classic._drawn import Drawn, drawn, of
from evalsi.stats.weighted import codes

NEEDS = "a class label in its reference and class probabilities in its output row"
_EPS = sys.float_info.epsilon  # log_loss clips probabilities to [eps, 1 - eps], as scikit-learn does (float64's)


@dataclass(frozen=True)
class Ranking:
    """One class's scores sorted once (highest first) into groups of tied scores (one threshold each): per record,
    in the records' own order, its group, plus ``count`` if its label is this class, so one ``np.bincount`` of the
    drawn records' keys gives every group's negatives, then every group's positives, each run contiguous (the
    data itself).

    For a resample, which has each record's draw count: the positives' and the negatives' records in rank order,
    and per positive how many positives the groups up to its own hold, and how many negatives the groups before its
    own (``_above``) and up to it (``_through``) hold. Then the drawn records up to a threshold are running totals
    of the counts over the positives and over the negatives (``_prefix``), read at the positives: ROC-AUC and
    average precision are a few passes over the positives, with no count by group."""

    keys: NDArray[np.intp]
    count: int
    positives: NDArray[np.intp]
    negatives: NDArray[np.intp]
    positives_through_positive: NDArray[np.intp]
    negatives_above_positive: NDArray[np.intp]
    negatives_through_positive: NDArray[np.intp]
    tied: bool  # a positive and a negative share a score


@dataclass(frozen=True)
class Probabilities:
    classes: list[str]
    truths: NDArray[np.intp]
    rankings: dict[int, Ranking]
    # Per record, computed once: -ln p(label) clipped as log_loss clips it, the squared distance of the
    # probabilities from the label's one-hot vector, the top probability, and whether its class is the label
    # (1.0 or 0.0) less that probability.
    losses: NDArray[np.float64]
    squared: NDArray[np.float64]
    confidence: NDArray[np.float64]
    gap: NDArray[np.float64]
    bins: dict[int, NDArray[np.intp]] = field(default_factory=dict)  # each record's ECE bin, per ``bins`` param
    # The resamples' grids of running totals, per metric and classes scored (``_curves``): made by the first.
    curves: dict[tuple[str, tuple[int, ...]], Any] = field(default_factory=dict)

    def binned(self, count: int) -> NDArray[np.intp]:
        """Each record's confidence bin of ``count``: ((m-1)/count, m/count], 0 in the first; made once a count."""
        if count not in self.bins:
            self.bins[count] = np.clip(np.ceil(self.confidence * count).astype(np.intp) - 1, 0, count - 1)
        return self.bins[count]


def _ranking(scores: NDArray[np.float64], positive: NDArray[np.bool_]) -> Ranking:
    order = np.argsort(-scores, kind="stable")
    ranked = scores[order]
    groups = np.concatenate(([0], np.cumsum(ranked[1:] != ranked[:-1]))).astype(np.intp)
    count = int(groups[-1]) + 1
    keys = np.empty_like(groups)
    ranked_positive = positive[order]
    keys[order] = groups + count * ranked_positive
    in_group = np.bincount(groups, ranked_positive, minlength=count).astype(np.intp)  # positives a group
    through = np.cumsum(in_group)
    negatives_in_group = np.bincount(groups, minlength=count) - in_group
    negatives_through = np.cumsum(negatives_in_group)
    negatives_above = negatives_through - negatives_in_group
    of_positives = groups[ranked_positive]
    return Ranking(keys, count, order[ranked_positive], order[~ranked_positive], through[of_positives],
                   negatives_above[of_positives], negatives_through[of_positives],
                   bool((negatives_above[of_positives] != negatives_through[of_positives]).any()))


def stack(pairs: list[tuple[str, dict[str, float]]]) -> Drawn[Probabilities]:
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
    confidence = matrix[rows, predicted]
    stacked = Probabilities(
        classes, labels, rankings, losses=-np.log(np.clip(matrix[rows, labels], _EPS, 1.0 - _EPS)),
        squared=((onehot - matrix) ** 2).sum(axis=1), confidence=confidence,
        gap=(predicted == labels).astype(np.float64) - confidence,
    )
    return drawn(stacked, len(pairs))


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


def _counts(ranking: Ranking, data: Drawn[Probabilities], name: str) -> tuple[NDArray[np.intp], ...]:
    """Per tie group (highest score first): the drawn positives and negatives, and the running total of positives
    (integers: every sum below is exact, so the order numpy adds them in cannot change a figure)."""
    misses, hits = data.count(ranking.keys, 2 * ranking.count).reshape(2, ranking.count)
    true_positives = np.cumsum(hits)
    check(int(true_positives[-1]), data.drawn, name)
    return hits, misses, true_positives


def _roc_auc(ranking: Ranking, data: Drawn[Probabilities], name: str) -> float:
    hits, misses, true_positives = _counts(ranking, data, name)
    # Trapezoids of the ROC curve: each threshold adds its false positives times the mean height across it (twice
    # the area here, in integers).
    twice = int(np.dot(misses, 2 * true_positives - hits))
    positives = int(true_positives[-1])
    return twice / 2.0 / float(positives * (data.drawn - positives))


def _average_precision(ranking: Ranking, data: Drawn[Probabilities], name: str) -> float:
    hits, misses, true_positives = _counts(ranking, data, name)
    # Sum over thresholds of the recall gained times the precision there (scikit-learn's step-wise AP).
    listed = true_positives + np.cumsum(misses)
    precision = true_positives / listed  # every threshold lists a record of the data
    return float((hits * precision).sum() / true_positives[-1])


def one_vs_rest(values: Any, positive_label: str, metric: Any, resampled: Any) -> float:
    """The metric of the positive class, or the mean over the classes: on the data, by tie group a class; on a
    resample, every class at once from the draw counts (``_curves``)."""
    data = of(values, NEEDS)
    stacked: Probabilities = data.columns
    positive = _positive_class(stacked, positive_label)
    at_classes = tuple(range(len(stacked.classes))) if positive is None else (positive,)
    if not data.whole:
        return _mean(resampled(data, at_classes))
    return _mean([metric(stacked.rankings[at], data, stacked.classes[at]) for at in at_classes])


def _mean(figures: list[float]) -> float:
    """``np.mean`` of the figures, as it computes it (``np.add.reduce``, then a division by the count) without its
    Python layers: a few µs a resample."""
    return float(np.add.reduce(np.array(figures, dtype=np.float64)) / len(figures))


def roc_auc(values: Any, positive_label: str) -> float:
    return one_vs_rest(values, positive_label, _roc_auc, roc_aucs)


def average_precision(values: Any, positive_label: str) -> float:
    return one_vs_rest(values, positive_label, _average_precision, average_precisions)


def log_loss(values: Any) -> float:
    data = of(values, NEEDS)
    stacked: Probabilities = data.columns
    if len(stacked.classes) < 2:
        raise SkipRecord(f"only one class ({stacked.classes[0]!r}): log-loss needs two")
    return data.mean(stacked.losses)


def brier(values: Any) -> float:
    data = of(values, NEEDS)
    stacked: Probabilities = data.columns
    k = len(stacked.classes)
    if k < 2:
        raise SkipRecord(f"only one class ({stacked.classes[0]!r}): the Brier score needs two")
    halved = 0.5 if k < 3 else 1.0
    return halved * data.mean(stacked.squared)


def ece(values: Any, bins: int) -> float:
    data = of(values, NEEDS)
    stacked: Probabilities = data.columns
    gaps = data.sum_by(stacked.binned(bins), stacked.gap, bins)
    return float(np.abs(gaps).sum() / data.drawn)
