"""Mapped values stacked once into numpy columns, with how many times each row counts.

A dataset evaluator's reduce runs once on the data and ~2,000 times more in the bootstrap. Each resample here is
the same columns with new weights (how often each record was drawn: ``np.bincount`` of the drawn positions), so
nothing is re-sorted or rebuilt per resample, and a metric computed with weights equals the metric of the
resample's rows repeated that many times (what scikit-learn computes on the resample itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

from evalsi.errors import SkipRecord

C = TypeVar("C")


@dataclass(frozen=True)
class Weighted(Generic[C]):
    """Columns (any structure of arrays, one row per mapped value) and each row's weight."""

    columns: C
    weights: NDArray[np.float64]
    whole: bool = True  # every row once: the data itself, not a resample

    def take(self, positions: NDArray[np.intp]) -> Weighted[C]:
        counts = np.bincount(positions, minlength=self.weights.shape[0])
        return Weighted(self.columns, counts.astype(np.float64), whole=False)


def ones(columns: C, size: int) -> Weighted[C]:
    return Weighted(columns, np.ones(size, dtype=np.float64))


def weighted(values: Any, needs: str) -> Weighted[Any]:
    """The stacked values a reduce was given; an empty list (no record had what the metric needs) is a skip."""
    if isinstance(values, Weighted):
        return values
    raise SkipRecord(f"no record had {needs}")


def codes(labels: list[str], classes: list[str]) -> NDArray[np.intp]:
    """Each label's index in ``classes`` (sorted)."""
    index = {name: code for code, name in enumerate(classes)}
    return np.fromiter(map(index.__getitem__, labels), dtype=np.intp, count=len(labels))
