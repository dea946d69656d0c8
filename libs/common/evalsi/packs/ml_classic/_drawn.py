"""Columns stacked once, and a bootstrap resample of them as the drawn positions themselves (numpy; loaded by the
first reduce, not by the catalog). Used by the ml-classic and ml-monitoring reduces.

``evalsi.stats.weighted`` turns each resample into a weight a row (a ``bincount`` of the positions over every row)
and the reduce then sums weights x values. Here a resample keeps its positions: a count by class, group or tie is
one ``bincount`` of the codes at those positions, and a sum one gather; no array over every row is made per
resample. On the data itself (every row once) the figures are the same operations over the columns as they are,
so the reported value is what the weighted form gave, bit for bit; a resample's figure may differ from it in the
last place (the terms summed in draw order).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

from evalsi.errors import SkipRecord

C = TypeVar("C")


@dataclass(frozen=True)
class Drawn(Generic[C]):
    """Columns (any structure of arrays, one row per mapped value) and the rows drawn: ``positions`` (repeats
    allowed), or None for every row once."""

    columns: C
    size: int
    positions: NDArray[np.intp] | None = None
    # With ``positions``: how many times each of them was drawn (a counted resample), else once per listing.
    weights: NDArray[np.intp] | None = None
    cells: tuple[NDArray[np.intp], int] | None = None  # each row's cell and the number of cells, when declared

    @property
    def whole(self) -> bool:
        """Every row once: the data itself, not a resample."""
        return self.positions is None

    @property
    def drawn(self) -> int:
        if self.positions is None:
            return self.size
        return len(self.positions) if self.weights is None else int(self.weights.sum())

    @cached_property
    def drawn_counts(self) -> NDArray[np.intp]:
        """How many times each row was drawn (1 each for the whole data); made once a resample."""
        if self.positions is None:
            return np.ones(self.size, dtype=np.intp)
        if self.weights is None:
            return np.bincount(self.positions, minlength=self.size)
        return np.bincount(self.positions, self.weights, minlength=self.size).astype(np.intp)

    def take(self, positions: NDArray[np.intp]) -> Drawn[C]:
        return Drawn(self.columns, self.size, positions)

    def counted(self, positions: NDArray[np.intp], weights: NDArray[np.intp]) -> Drawn[C]:
        """The resample that drew row ``positions[i]`` (one of each declared cell) ``weights[i]`` times."""
        return Drawn(self.columns, self.size, positions, weights)

    def at(self, column: NDArray[Any]) -> NDArray[Any]:
        """The column's value of each drawn row (the column itself for the whole data)."""
        if self.weights is not None:
            # A counted resample lists each cell once: only counts by a code of the cells read it right.
            raise ValueError("a resample counted by cell is read through count(), not row by row")
        return column if self.positions is None else column[self.positions]

    def count(self, codes: NDArray[np.intp], length: int) -> NDArray[np.intp]:
        """How many drawn rows have each code in ``range(length)``."""
        if self.weights is not None:
            assert self.positions is not None
            # Float sums of whole counts below 2**53: exact.
            return np.bincount(codes[self.positions], self.weights, minlength=length).astype(np.intp)
        return np.bincount(self.at(codes), minlength=length)

    def sum_by(self, codes: NDArray[np.intp], values: NDArray[np.float64], length: int) -> NDArray[np.float64]:
        """The sum of ``values`` over the drawn rows of each code in ``range(length)``."""
        return np.asarray(np.bincount(self.at(codes), self.at(values), minlength=length), dtype=np.float64)

    def mean(self, values: NDArray[np.float64]) -> float:
        """The mean of ``values`` over the drawn rows."""
        return float(self.at(values).sum() / self.drawn)


def drawn(columns: C, size: int, cells: tuple[NDArray[np.intp], int] | None = None) -> Drawn[C]:
    """The stacked columns of ``size`` mapped values, every row once; ``cells`` as the class's."""
    return Drawn(columns, size, cells=cells)


def of(values: Any, needs: str) -> Drawn[Any]:
    """The stacked values a reduce was given; an empty list (no record had what the metric needs) is a skip."""
    if isinstance(values, Drawn):
        return values
    raise SkipRecord(f"no record had {needs}")
