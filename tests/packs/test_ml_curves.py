"""ROC-AUC and average precision of a bootstrap resample (``ml_classic._curves``, running totals in a grid,
``_prefix``) equal scikit-learn on the drawn rows, and the grid's running totals equal numpy's ``cumsum``.

Sizes that make each class's runs span many columns of the grid and end anywhere in one (empty runs included);
ties (scores rounded) and no ties; two classes, three, and one class scored; a resample given as positions, as
the same positions counted once each with their draw count, and the same resample in two threads at once."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
from sklearn import metrics as sk
from sklearn.preprocessing import label_binarize

from evalsi.errors import SkipRecord
from evalsi.packs.ml_classic import _scores
from evalsi.packs.ml_classic._prefix import ROWS, Scratch, runs


@pytest.mark.parametrize("lengths", [[0], [1], [ROWS - 1, ROWS, ROWS + 1], [5, 0, 3 * ROWS + 2, 40, 0, 1]])
def test_the_grids_running_totals_are_each_runs_cumsum(lengths: list[int]) -> None:
    rng = np.random.default_rng(len(lengths))
    size = max(sum(lengths), 1)
    records = [rng.integers(0, size, length) for length in lengths]
    grid = runs(records, size)
    counts = np.append(rng.integers(0, 5, size).astype(np.float64), 0.0)
    scratch = Scratch()
    totals = grid.totals(counts, scratch)
    assert np.array_equal(grid.totals(counts, scratch), totals)  # the thread's arrays again: the same totals
    for at, run in enumerate(records):
        expected = np.concatenate(([0.0], np.cumsum(counts[run])))
        assert np.array_equal(totals[grid.at(at, np.arange(len(run) + 1))], expected)


def _data(seed: int, n: int, k: int, tied: bool) -> tuple[list[str], np.ndarray, Any]:
    rng = np.random.default_rng(seed)
    classes = [f"c{i}" for i in range(k)]
    raw = rng.integers(1, 5, (n, k)).astype(float) if tied else rng.random((n, k)) + 0.01
    matrix = raw / raw.sum(axis=1, keepdims=True)
    truths = [classes[i] for i in rng.integers(0, k, n)]
    pairs = [(truth, dict(zip(classes, map(float, row), strict=True))) for truth, row in zip(truths, matrix,
                                                                                          strict=True)]
    return truths, matrix, _scores.stack(pairs)


def _expected(truths: list[str], matrix: np.ndarray, positions: np.ndarray, k: int, positive: str) -> tuple[float, ...]:
    drawn = [truths[i] for i in positions]
    scores = matrix[positions]
    classes = [f"c{i}" for i in range(k)]
    if positive or k == 2:
        column = classes.index(positive or classes[1])
        hits = [truth == classes[column] for truth in drawn]
        return (sk.roc_auc_score(hits, scores[:, column]), sk.average_precision_score(hits, scores[:, column]))
    return (sk.roc_auc_score(drawn, scores, multi_class="ovr", labels=classes),
            sk.average_precision_score(label_binarize(drawn, classes=classes), scores, average="macro"))


@pytest.mark.parametrize(("n", "k", "tied"), [(700, 3, False), (700, 3, True), (301, 2, True), (450, 4, False)])
def test_resamples_equal_scikit_learn_on_the_drawn_rows(n: int, k: int, tied: bool) -> None:
    truths, matrix, stacked = _data(n + k, n, k, tied)
    rng = np.random.default_rng(n)
    for positions in [*(rng.integers(0, n, n) for _ in range(4)), rng.integers(0, 40, n)]:
        for positive in ("", "c0"):
            roc, precision = _expected(truths, matrix, positions, k, positive)
            resample = stacked.take(positions)
            assert _scores.roc_auc(resample, positive) == pytest.approx(roc, rel=1e-12)
            assert _scores.average_precision(resample, positive) == pytest.approx(precision, rel=1e-12)
            # The same draw as distinct rows and their counts (the counted form): the same figures, to the bit.
            rows, counts = np.unique(positions, return_counts=True)
            counted = stacked.counted(rows, counts)
            assert _scores.roc_auc(counted, positive) == _scores.roc_auc(resample, positive)
            assert _scores.average_precision(counted, positive) == _scores.average_precision(resample, positive)


def test_a_resample_without_a_class_is_a_skip_naming_it() -> None:
    truths, _, stacked = _data(3, 200, 3, tied=True)
    only = np.array([i for i, truth in enumerate(truths) if truth != "c1"][:50])
    for metric in (_scores.roc_auc, _scores.average_precision):
        with pytest.raises(SkipRecord, match="no record has the label 'c1'"):
            metric(stacked.take(only), "")


def test_threads_reading_resamples_at_once_get_each_their_own_figures() -> None:
    _, _, stacked = _data(5, 900, 3, tied=False)
    draws = [np.random.default_rng(seed).integers(0, 900, 900) for seed in range(40)]
    alone = [(_scores.roc_auc(stacked.take(d), ""), _scores.average_precision(stacked.take(d), "")) for d in draws]
    found: dict[int, list[tuple[float, float]]] = {}

    def read(thread: int) -> None:
        order = draws if thread % 2 else draws[::-1]
        got = [(_scores.roc_auc(stacked.take(d), ""), _scores.average_precision(stacked.take(d), "")) for d in order]
        found[thread] = got if thread % 2 else got[::-1]

    threads = [threading.Thread(target=read, args=(thread,)) for thread in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(found[thread] == alone for thread in range(4))


def test_the_mean_over_classes_is_np_means_to_the_bit() -> None:
    rng = np.random.default_rng(4)
    for size in (1, 2, 3, 5, 8, 9, 17):
        for _ in range(200):
            figures = (rng.random(size) * 10.0 ** rng.integers(-3, 3, size)).tolist()
            assert _scores._mean(figures) == float(np.mean(figures))
