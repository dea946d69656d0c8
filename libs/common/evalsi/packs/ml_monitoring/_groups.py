"""The numpy side of the fairness metrics (``fairness``): each record's cell (its group, whether its label is
positive, whether it was selected) coded once, and the per-group rates from one ``bincount`` of the drawn cells
per (re)sample (``ml_classic._drawn``). Loaded by the first reduce, not by the catalog."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from evalsi.errors import SkipRecord
from evalsi.packs.ml_classic._drawn import Drawn, drawn, of

Groups = tuple[NDArray[np.intp], int]  # each record's cell: 4 x group + 2 x positive label + selected; the groups


def stack(triples: list[tuple[str, bool, bool]]) -> Drawn[Groups]:
    names = sorted({group for group, _, _ in triples})
    index = {name: at for at, name in enumerate(names)}
    cells = np.fromiter((4 * index[group] + 2 * truth + chosen for group, truth, chosen in triples), dtype=np.intp,
                        count=len(triples))
    return drawn((cells, len(names)), len(triples), cells=(cells, 4 * len(names)))  # every figure counts cells


def _gap(top: NDArray[np.float64], bottom: NDArray[np.float64]) -> float | None:
    held = bottom > 0
    if held.sum() < 2:
        return None
    rates = top[held] / bottom[held]
    return float(rates.max() - rates.min())


def figures(values: Any, sensitive: str) -> dict[str, float]:
    data = of(values, "the sensitive attribute, a label and a prediction")
    cells, count = data.columns
    # Per group: negatives not selected, negatives selected, positives not selected, positives selected.
    table = data.count(cells, 4 * count).reshape(count, 4).astype(np.float64)
    members = table.sum(axis=1)
    if np.count_nonzero(members) < 2:
        raise SkipRecord(f"fewer than two groups of {sensitive!r}: fairness compares groups")
    false_positives, true_positives = table[:, 1], table[:, 3]
    selected = false_positives + true_positives
    rates = selected[members > 0] / members[members > 0]
    figures = {"demographic_parity_difference": float(rates.max() - rates.min())}
    if rates.max() > 0:
        figures["demographic_parity_ratio"] = float(rates.min() / rates.max())
    positives = table[:, 2] + true_positives
    gaps = [gap for gap in (_gap(true_positives, positives), _gap(false_positives, members - positives))
            if gap is not None]
    if gaps:
        figures["equalized_odds_difference"] = max(gaps)
    return figures
