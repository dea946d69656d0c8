"""The numpy side of the fairness metrics (``fairness``): group codes stacked once and per-group rates by weights
per (re)sample. Loaded by the first reduce, not by the catalog."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from evalsi.errors import SkipRecord
from evalsi.stats.weighted import Weighted, ones, weighted

Groups = tuple[NDArray[np.intp], int, NDArray[np.float64], NDArray[np.float64]]


def stack(triples: list[tuple[str, bool, bool]]) -> Weighted[Groups]:
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


def figures(values: Any, sensitive: str) -> dict[str, float]:
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
