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
_SPECK = 1e-9  # a spread this small next to its terms may be their rounding alone (a million terms: ~1e-10)


@dataclass(frozen=True)
class Errors:
    truths: NDArray[np.float64]
    absolute: NDArray[np.float64]
    squared: NDArray[np.float64]
    relative: NDArray[np.float64]  # |error| / max(|label|, eps)
    # For a resample, one row a term, one column a record: its absolute, squared and relative error, its label less
    # the data's mean label, and that squared. A resample's sums are these times its draw counts (one product);
    # its labels' spread about their own mean is sum(c x d^2) - sum(c x d)^2 / n, where d is centred on the data's
    # mean, so the two terms are of the spread's size and nothing cancels.
    terms: NDArray[np.float64]


def stack(pairs: list[tuple[float, float]]) -> Drawn[Errors]:
    both = np.asarray(pairs, dtype=np.float64)
    truths = both[:, 0]
    errors = truths - both[:, 1]
    absolute = np.abs(errors)
    squared, relative = errors**2, absolute / np.maximum(np.abs(truths), _EPS)
    centred = truths - truths.sum() / len(truths)
    terms = np.array((absolute, squared, relative, centred, centred**2))
    return drawn(Errors(truths, absolute, squared, relative, terms), len(pairs))


def figures(values: Any) -> dict[str, float]:
    data = of(values, "a numeric label in its reference and a numeric prediction in its output")
    errors: Errors = data.columns
    total = data.drawn
    if not data.whole:
        return _resampled(errors, data.drawn_counts, total)
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


def _resampled(errors: Errors, counts: NDArray[np.intp], total: int) -> dict[str, float]:
    """``figures`` of a resample from each record's draw count (the same figures, their sums in another order)."""
    absolute, squared, relative, centred, centred_squared = (errors.terms @ counts.astype(np.float64)).tolist()
    mse = squared / total
    figures = {"mae": absolute / total, "mse": mse, "rmse": float(np.sqrt(mse)), "mape": relative / total}
    if int(counts.max()) < total:  # two records at least
        spread = max(centred_squared - centred * centred / total, 0.0)
        if spread <= _SPECK * centred_squared:
            # As small as the sums' rounding: labels all equal have no spread, exactly, as the data's own test says.
            drawn_truths = errors.truths[counts > 0]
            spread = 0.0 if drawn_truths.min() == drawn_truths.max() else spread
        figures["r2"] = 1.0 - squared / spread if spread != 0 else (1.0 if squared == 0 else 0.0)
    return figures
