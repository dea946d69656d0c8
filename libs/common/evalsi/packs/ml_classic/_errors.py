"""The numpy side of the regression metrics (``regression``): each record's absolute, squared and percentage error
computed once, then summed over the drawn rows per (re)sample (``_drawn``). Loaded by the first reduce, not by the
catalog."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from evalsi.packs.ml_classic._drawn import Drawn, drawn, of

_EPS = sys.float_info.epsilon  # MAPE's floor under |label|, as scikit-learn's (float64's machine epsilon)


@dataclass(frozen=True)
class Errors:
    truths: NDArray[np.float64]
    absolute: NDArray[np.float64]
    squared: NDArray[np.float64]
    relative: NDArray[np.float64]  # |error| / max(|label|, eps)


def stack(pairs: list[tuple[float, float]]) -> Drawn[Errors]:
    both = np.asarray(pairs, dtype=np.float64)
    truths = both[:, 0]
    errors = truths - both[:, 1]
    absolute = np.abs(errors)
    return drawn(Errors(truths, absolute, errors**2, absolute / np.maximum(np.abs(truths), _EPS)), len(pairs))


def figures(values: Any) -> dict[str, float]:
    data = of(values, "a numeric label in its reference and a numeric prediction in its output")
    errors: Errors = data.columns
    total = data.drawn
    squared = float(data.at(errors.squared).sum())
    mse = squared / total
    figures = {
        "mae": data.mean(errors.absolute),
        "mse": mse,
        "rmse": float(np.sqrt(mse)),
        "mape": data.mean(errors.relative),
    }
    positions = data.positions
    if total >= 2 and (positions is None or bool((positions != positions[0]).any())):  # two records at least
        truths = data.at(errors.truths)
        spread = float(((truths - truths.sum() / total) ** 2).sum())
        figures["r2"] = 1.0 - squared / spread if spread != 0 else (1.0 if squared == 0 else 0.0)
    return figures
