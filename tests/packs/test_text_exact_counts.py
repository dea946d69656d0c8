"""corpus-chrf's stacked counts (packs/text/_exact_counts.py): a resample's column sums are the integers that
summing the drawn rows gives, from the float32 product, the float64 one past float32's exact bound, and the int64
one past the product's bound for a resample."""

from __future__ import annotations

import numpy as np

from evalsi.packs.text._exact_counts import stack_exact


def _drawn_sums(rows: list[list[int]], positions: np.ndarray) -> list[int]:
    return [sum(column) for column in zip(*(rows[i] for i in positions), strict=True)]


def test_float32_sums_equal_the_drawn_rows() -> None:
    rng = np.random.default_rng(1)
    rows = rng.integers(0, 400, size=(3_000, 18)).tolist()
    stacked = stack_exact(rows)
    assert stacked.columns.dtype == np.float32 and stacked.columns.flags.f_contiguous
    assert stacked.sums() == [sum(column) for column in zip(*rows, strict=True)]
    for _ in range(20):
        positions = rng.integers(0, len(rows), size=len(rows))
        assert stacked.take(positions).sums() == _drawn_sums(rows, positions)


def test_past_float32s_bound_the_sums_stay_exact() -> None:
    """Counts whose sums pass 2**24 (where float32 would round) stack as float64; a resample of more positions
    than the float64 bound allows sums in int64."""
    rng = np.random.default_rng(2)
    rows = rng.integers(0, 20_000, size=(2_000, 6)).tolist()
    rows[0] = [20_000, 19_999, 19_997, 1, 0, 3]
    stacked = stack_exact(rows)
    assert stacked.columns.dtype == np.float64  # 2,000 x 20,000 > 2**24
    positions = rng.integers(0, len(rows), size=len(rows))
    positions[:900] = 0  # many draws of the largest row: sums far past 2**24
    sums = stacked.take(positions).sums()
    assert sums == _drawn_sums(rows, positions) and max(sums) > 1 << 24
    wide = stack_exact([[1 << 40, 3], [5, 7]])  # 2 x 2**40: float64 is exact for the data, not for 2**14 draws
    many = np.zeros(1 << 14, dtype=np.intp)
    assert wide.take(many).sums() == [(1 << 40) * (1 << 14), 3 * (1 << 14)]


def test_steps_sum_the_rows_they_hold_for_and_the_others_whole() -> None:
    """chrF-like rows (each order's first two columns the previous order's less one) with short texts where that
    fails, and a declared step that holds on no row (dropped): every resample's sums equal the drawn rows'."""
    rng = np.random.default_rng(3)
    rows = []
    for _ in range(1_500):
        hyp, ref = (int(rng.integers(0, 40)) if rng.random() < 0.1 else int(rng.integers(6, 300)) for _ in "hr")
        row = []
        for n in range(6):
            row += [max(hyp - n, 0), max(ref - n, 0), int(rng.integers(0, max(min(hyp, ref) - n, 0) + 1))]
        rows.append(row)
    steps = [(3 * n + side, 3 * (n - 1) + side, 1) for n in range(1, 6) for side in (0, 1)] + [(2, 0, 5)]
    stacked = stack_exact(rows, steps)
    assert stacked.columns.shape[1] == 8  # the first order's two counts and the six matches
    assert 0 < len(stacked.irregular) < len(rows) // 4
    assert stacked.sums() == [sum(column) for column in zip(*rows, strict=True)]
    for _ in range(20):
        positions = rng.integers(0, len(rows), size=len(rows))
        assert stacked.take(positions).sums() == _drawn_sums(rows, positions)
