"""Per-record counts stacked once for corpus chrF's bootstrap, summed per resample in float32 where that is exact.

The runner's bootstrap (evaluators/runner.py::_run_dataset) calls ``take`` with each resample's drawn positions and
the reduce reads the resample's column sums. A resample's sums are one weights-by-matrix product, and BLAS's
float32 product of chrF's 20,000 x 18 counts ran about five times as fast as float64's here (25 against 120 µs,
most of a resample after the draw itself); columns that follow from another by a step (``stack_exact``) leave it
8 columns. Counts and weights are whole numbers, so a float product is exact, in any order of its additions,
while every partial sum is below the float's integer limit (2**24 for float32): with n positions drawn and no
count above ``peak``, no sum passes n * peak. The matrix is float32 when that bound holds for the data's own
size, float64 otherwise (exact to 2**53, far past any dataset of bounded texts), and a resample of more positions
than that bound allows is summed in int64 (numpy's own integer product): the sums are the same integers whichever
way, so the figure and the interval are those of the lists of counts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

_EXACT = {np.dtype(np.float32): 1 << 24, np.dtype(np.float64): 1 << 53}


@dataclass(frozen=True)
class ExactCounts:
    """The records' counts (a row a record) and, for a resample, how often each record was drawn. Columns that
    follow from another by a step (``stack_exact``'s ``steps``) are summed as the other's sum less the step times
    the rows drawn, for the rows where that holds; the product then has only the other columns."""

    counts: NDArray[np.int64]  # the records' counts, row by row
    columns: NDArray[np.floating]  # the basis columns as floats, column by column (BLAS's faster layout for w @ M)
    peak: int  # the largest count in ``columns``
    expand: NDArray[np.int64]  # (the basis columns' sums, the rows counted) @ expand: every column's sums
    irregular: NDArray[np.intp]  # the rows a step does not hold for: zero in ``columns``, summed whole
    irregular_counts: NDArray[np.int64]  # their rows of ``counts``
    weights: NDArray[np.int64] | None = None  # None: the data itself, every row once
    drawn: int = 0  # positions drawn (the weights' total)

    def take(self, positions: NDArray[np.intp]) -> ExactCounts:
        """The resample that drew the records at ``positions`` (repeats allowed)."""
        weights = np.bincount(positions, minlength=self.counts.shape[0])
        return ExactCounts(self.counts, self.columns, self.peak, self.expand, self.irregular, self.irregular_counts,
                           weights, len(positions))

    def sums(self) -> list[int]:
        """The column sums of the data or of the resample, as Python ints."""
        if self.weights is None:
            return [int(total) for total in self.counts.sum(axis=0)]
        if self.drawn * self.peak >= _EXACT[self.columns.dtype]:
            return [int(total) for total in self.weights @ self.counts]
        basis = np.rint(self.weights.astype(self.columns.dtype) @ self.columns).astype(np.int64)
        drawn_irregular = self.weights[self.irregular]
        regular = self.drawn - int(drawn_irregular.sum())
        totals = basis @ self.expand[:-1] + regular * self.expand[-1] + drawn_irregular @ self.irregular_counts
        return [int(total) for total in totals]

    def __len__(self) -> int:
        return int(self.counts.shape[0])


def stack_exact(rows: list[list[int]], steps: Sequence[tuple[int, int, int]] = ()) -> ExactCounts:
    """The records' counts (lists of non-negative ints of one length) stacked for ``ExactCounts.sums``. A step
    (column, source, step), with source < column, says that column = source - step on most rows (chrF's n-grams of
    order n + 1 in a text are one fewer than of order n): one that holds on at least half the rows is kept, and the
    rows it does not hold for are summed whole."""
    counts = np.array(rows, dtype=np.int64)
    width = counts.shape[1]
    kept = [(column, source, step) for column, source, step in steps
            if source < column and 2 * np.count_nonzero(counts[:, column] == counts[:, source] - step) >= len(rows)]
    holds = np.ones(len(rows), dtype=bool)
    for column, source, step in kept:
        holds &= counts[:, column] == counts[:, source] - step
    derived = {column: (source, step) for column, source, step in kept}
    basis = [column for column in range(width) if column not in derived]
    # expand's rows: the basis columns, then the rows counted (what a step is multiplied by).
    expand = np.zeros((len(basis) + 1, width), dtype=np.int64)
    for row, column in enumerate(basis):
        expand[row, column] = 1
    for column in sorted(derived):
        source, step = derived[column]
        expand[:, column] = expand[:, source]
        expand[-1, column] -= step
    regular = np.where(holds[:, None], counts[:, basis], 0)
    peak = int(regular.max(initial=0))
    dtype = np.float32 if len(rows) * peak < _EXACT[np.dtype(np.float32)] else np.float64
    irregular = np.flatnonzero(~holds)
    return ExactCounts(counts, np.asarray(regular, dtype=dtype, order="F"), peak, expand, irregular,
                       counts[irregular])
