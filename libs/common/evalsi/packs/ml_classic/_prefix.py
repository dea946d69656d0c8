"""Running totals of a resample's draw counts over many runs of records at once (numpy; loaded with ``_scores``).

A bootstrap of ROC-AUC or average precision needs, each resample, running totals of the records' draw counts over
each class's records in rank order: 20,000 to 60,000 of them at 20,000 records. numpy's ``cumsum`` is a scalar
loop (about 2 ns an element here). Here each run (a sequence of records) fills whole columns of a grid of ``ROWS``
rows of its own, down each column, after one empty cell: its running totals are then the column sums taken at
once, each column's first cell given the sum of its run's columns before it, and ``ROWS - 1`` adds of a row into
the next, each over every column of every run (vectorised). The counts are whole numbers held as float64, so
every total is exact (below 2**53) whatever the order of its terms: the same numbers as integer prefix sums.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

ROWS = 16  # fewer rows: longer column sums, ``cumsum`` over more columns; more: more row adds (about 0.5 µs each)


@dataclass(frozen=True)
class Runs:
    """Where each run's records sit in the grid (row-major): ``cells`` gives each cell's record, or ``size`` (one
    past the last record) for an empty cell, which reads a count of 0."""

    cells: NDArray[np.intp]
    columns: int
    run_start: NDArray[np.intp]  # per column, the first column of its run
    origins: tuple[int, ...]  # per run, its first column

    def at(self, run: int, through: NDArray[np.intp]) -> NDArray[np.intp]:
        """The cells that will hold the total of the run's first ``through`` records (0: its empty cell)."""
        return (through % ROWS) * self.columns + (self.origins[run] + through // ROWS)

    def totals(self, counts: NDArray[np.float64], scratch: Scratch) -> NDArray[np.float64]:
        """Every cell's running total (flat, row-major) of ``counts`` (a count a record, then a 0 at ``size``), in
        the thread's array of them."""
        out, pairs = scratch.grid(len(self.cells))
        # ndarray methods and ufuncs rather than numpy's functions (a Python wrapper each: a resample is small).
        grid = counts.take(self.cells, out=out, mode="wrap").reshape(ROWS, self.columns)  # "wrap": unbuffered
        sums = np.add.reduce(grid, axis=0)
        before = np.add.accumulate(sums)
        before -= sums  # the columns before each one, of every run: less those of the runs before its own
        grid[0] += before - before[self.run_start]
        for previous, row in pairs:
            np.add(previous, row, out=row)
        return out


def runs(records: Sequence[NDArray[np.intp]], size: int) -> Runs:
    """The grid of these runs of record indices (each below ``size``), one after another."""
    spans = [len(run) // ROWS + 1 for run in records]  # whole columns for the empty cell and the records
    columns = sum(spans)
    cells = np.full(ROWS * columns, size, dtype=np.intp)
    run_start = np.repeat(np.cumsum(spans) - spans, spans).astype(np.intp)
    origins = tuple(int(origin) for origin in np.cumsum(spans) - spans)
    layout = Runs(cells, columns, run_start, origins)
    for at, run in enumerate(records):
        cells[layout.at(at, np.arange(1, len(run) + 1))] = run
    return layout


class Scratch(threading.local):
    """A thread's work arrays for one grid, made by its first resample and overwritten by each next one. At 20,000
    records these are a few hundred kB each: made anew every resample, the allocator hands them back to the system
    and maps them again, a page fault a page, which cost more than the passes that fill them."""

    def __init__(self) -> None:
        self.arrays: dict[str, NDArray[np.float64]] = {}
        self.rows: list[tuple[NDArray[np.float64], NDArray[np.float64]]] = []

    def grid(self, size: int) -> tuple[NDArray[np.float64], list[tuple[NDArray[np.float64], NDArray[np.float64]]]]:
        """The grid's array (flat) and each row with the one before it, as views made once (30 a resample, else)."""
        flat = self.get("grid", size)
        if not self.rows:
            grid = flat.reshape(ROWS, -1)
            self.rows = [(grid[row - 1], grid[row]) for row in range(1, ROWS)]
        return flat, self.rows

    def get(self, name: str, size: int) -> NDArray[np.float64]:
        found = self.arrays.get(name)
        if found is None:
            found = self.arrays[name] = np.empty(size, dtype=np.float64)
        return found
