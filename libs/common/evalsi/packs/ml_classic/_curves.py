"""ROC-AUC and average precision of a bootstrap resample, every class scored at once (numpy; loaded with
``_scores``).

A resample is each record's draw count. Per class, the drawn records up to a threshold are running totals of the
counts over the class's positives and over its negatives in rank order; these are taken for every class scored
in one grid (``_prefix``) and read at the positives, so a resample costs a few passes over every record at once
rather than a ``cumsum`` and a few passes a class. Counts and totals are whole numbers held as float64 (exact), so
each figure is the one integer prefix sums gave: the same terms, summed in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from evalsi.errors import SkipRecord
from evalsi.packs.ml_classic._drawn import Drawn
from evalsi.packs.ml_classic._prefix import Runs, Scratch, runs

if TYPE_CHECKING:  # ``_scores`` calls these
    from evalsi.packs.ml_classic._scores import Probabilities


@dataclass(frozen=True)
class Curves:
    """The grid of the classes' runs, and per class's positives (one after another, each class's in rank order)
    the cells to read: ``ends`` per class, the cell of the total of its positives (precision) or negatives
    (ROC)."""

    runs: Runs
    positives: NDArray[np.intp]  # the classes' positives, records
    bounds: tuple[int, ...]  # class j's positives are positives[bounds[j]:bounds[j + 1]]
    ends: NDArray[np.intp]
    through: NDArray[np.intp]  # the running total at each positive's threshold (its group included)
    other: NDArray[np.intp] | None  # a second such total, or None when not needed
    scratch: Scratch = field(default_factory=Scratch, compare=False)

    def read(self, data: Drawn[Probabilities]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The resample's draw count of each record, then a 0 for the grid's empty cells, and the grid's running
        totals of them, in this thread's arrays."""
        assert data.positions is not None
        counts = self.scratch.get("counts", data.size + 1)
        counts.fill(0.0)
        # Into this array, as float64 (whole numbers: exact): about half the time of ``np.bincount``, then a copy.
        # Added as float64: another type (a Python int, the weights' int64) takes numpy's casting path, 50 times
        # slower.
        np.add.at(counts, data.positions, 1.0 if data.weights is None else data.weights.astype(np.float64))
        return counts, self.runs.totals(counts, self.scratch)

    def weights(self, counts: NDArray[np.float64]) -> NDArray[np.float64]:
        """Each positive's count."""
        return counts.take(self.positives, out=self.scratch.get("weights", len(self.positives)), mode="wrap")

    def at(self, totals: NDArray[np.float64], cells: NDArray[np.intp], name: str) -> NDArray[np.float64]:
        return totals.take(cells, out=self.scratch.get(name, len(cells)), mode="wrap")


def _bounds(data: Probabilities, classes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(end) for end in np.cumsum([0, *(len(data.rankings[at].positives) for at in classes)]))


def _precision_curves(data: Probabilities, classes: tuple[int, ...]) -> Curves:
    """Runs: each class's positives, then its negatives. ``through``: the drawn positives up to a positive's
    threshold; ``other``: the drawn negatives up to it."""
    rankings = [data.rankings[at] for at in classes]
    grid = runs([run for ranking in rankings for run in (ranking.positives, ranking.negatives)], len(data.truths))
    return Curves(
        grid, np.concatenate([ranking.positives for ranking in rankings]), _bounds(data, classes),
        np.array([grid.at(2 * j, np.array(len(ranking.positives))) for j, ranking in enumerate(rankings)]),
        np.concatenate([grid.at(2 * j, ranking.positives_through_positive) for j, ranking in enumerate(rankings)]),
        np.concatenate([grid.at(2 * j + 1, ranking.negatives_through_positive)
                        for j, ranking in enumerate(rankings)]),
    )


def _roc_curves(data: Probabilities, classes: tuple[int, ...]) -> Curves:
    """Runs: each class's negatives. ``through``: the drawn negatives up to a positive's threshold; ``other``:
    those above it (None where no positive ties a negative: then the same)."""
    rankings = [data.rankings[at] for at in classes]
    grid = runs([ranking.negatives for ranking in rankings], len(data.truths))
    tied = any(ranking.tied for ranking in rankings)
    return Curves(
        grid, np.concatenate([ranking.positives for ranking in rankings]), _bounds(data, classes),
        np.array([grid.at(j, np.array(len(ranking.negatives))) for j, ranking in enumerate(rankings)]),
        np.concatenate([grid.at(j, ranking.negatives_through_positive) for j, ranking in enumerate(rankings)]),
        np.concatenate([grid.at(j, ranking.negatives_above_positive) for j, ranking in enumerate(rankings)])
        if tied else None,
    )


def _curves(data: Probabilities, metric: str, classes: tuple[int, ...]) -> Curves:
    key = (metric, classes)
    if key not in data.curves:  # two threads may both make it: the same arrays either way
        data.curves[key] = (_precision_curves if metric == "precision" else _roc_curves)(data, classes)
    found: Curves = data.curves[key]
    return found


def check(positives: float, drawn: int, name: str) -> None:
    """A resample (or the data) without a positive, or without a negative, is a skip."""
    if positives <= 0 or positives >= drawn:
        side = "no record has" if positives <= 0 else "every record has"
        raise SkipRecord(f"{side} the label {name!r}: the metric needs both it and another class among the labels")


def average_precisions(data: Drawn[Probabilities], classes: tuple[int, ...]) -> list[float]:
    """Each class's average precision over the resample: the sum over its drawn positives of the precision at
    their threshold (drawn positives over drawn records up to it), over its drawn positives."""
    stacked = data.columns
    curves = _curves(stacked, "precision", classes)
    counts, totals = curves.read(data)
    true_positives = curves.at(totals, curves.through, "through")
    assert curves.other is not None
    listed = curves.at(totals, curves.other, "other")
    listed += true_positives
    # 0 listed only where no draw reached a threshold yet, so 0 are true: a precision of 0 there (and a division by
    # 1 rather than a masked one, several times slower).
    np.maximum(listed, 1.0, out=listed)
    precision = np.divide(true_positives, listed, out=true_positives)
    weights = curves.weights(counts)
    drawn = data.drawn
    figures = []
    for j, at in enumerate(classes):
        positives = float(totals[curves.ends[j]])
        check(positives, drawn, stacked.classes[at])
        start, stop = curves.bounds[j], curves.bounds[j + 1]
        figures.append(float(np.dot(weights[start:stop], precision[start:stop]) / positives))
    return figures


def roc_aucs(data: Drawn[Probabilities], classes: tuple[int, ...]) -> list[float]:
    """Each class's ROC-AUC over the resample: the share of (drawn positive, drawn negative) pairs the positive
    ranks above, a tie counting half. Twice the pairs it wins, per drawn positive: its negatives below the
    threshold twice and those tied once, i.e. twice all negatives less those up to and those above its threshold."""
    stacked = data.columns
    curves = _curves(stacked, "roc", classes)
    counts, totals = curves.read(data)
    passed = curves.at(totals, curves.through, "through")
    if curves.other is not None:
        passed += curves.at(totals, curves.other, "other")
    weights = curves.weights(counts)
    drawn = data.drawn
    figures = []
    for j, at in enumerate(classes):
        negatives = float(totals[curves.ends[j]])
        positives = drawn - negatives
        check(positives, drawn, stacked.classes[at])
        start, stop = curves.bounds[j], curves.bounds[j + 1]
        lost = float(np.dot(weights[start:stop], passed[start:stop]))  # whole numbers below 2**53: exact
        twice = 2.0 * negatives * positives - (lost if curves.other is not None else 2.0 * lost)
        figures.append(twice / 2.0 / (positives * negatives))
    return figures
