"""The numpy side of the regression metrics (``regression``), loaded by the first reduce, not by the catalog."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from numpy.typing import NDArray

from evalsi.stats.weighted import Weighted, ones, weighted

_EPS = sys.float_info.epsilon  # MAPE's floor under |label|, as scikit-learn's (float64's machine epsilon)
Pairs = tuple[NDArray[np.float64], NDArray[np.float64]]


def stack(pairs: list[tuple[float, float]]) -> Weighted[Pairs]:
    both = np.asarray(pairs, dtype=np.float64)
    return ones((both[:, 0], both[:, 1]), len(pairs))


def figures(values: Any) -> dict[str, float]:
    data = weighted(values, "a numeric label in its reference and a numeric prediction in its output")
    truths, predictions = data.columns
    weights = data.weights
    total = weights.sum()
    errors = truths - predictions
    squared = float((weights * errors**2).sum())
    mse = squared / total
    figures = {
        "mae": float((weights * np.abs(errors)).sum() / total),
        "mse": mse,
        "rmse": float(np.sqrt(mse)),
        "mape": float((weights * np.abs(errors) / np.maximum(np.abs(truths), _EPS)).sum() / total),
    }
    if np.count_nonzero(weights) >= 2:
        spread = float((weights * (truths - (weights * truths).sum() / total) ** 2).sum())
        figures["r2"] = 1.0 - squared / spread if spread != 0 else (1.0 if squared == 0 else 0.0)
    return figures
