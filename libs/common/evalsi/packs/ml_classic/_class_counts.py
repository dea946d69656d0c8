"""The numpy side of the classification metrics (``classification``): each record's (label, prediction) cell of
the confusion matrix coded once, the matrix counted with one ``np.bincount`` of the drawn cells per (re)sample, and
the figures read from it. Loaded by the first reduce, not by the catalog."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from evalsi.errors import SkipRecord
from evalsi.packs.ml_classic._drawn import Drawn, drawn, of
from evalsi.stats.weighted import codes

NEEDS = "a class label in its reference and a predicted class in its output"
ClassColumns = tuple[NDArray[np.intp], list[str]]  # each record's cell (label x k + prediction), the classes


def stack(pairs: list[tuple[str, str]]) -> Drawn[ClassColumns]:
    truths = [truth for truth, _ in pairs]
    predictions = [prediction for _, prediction in pairs]
    classes = sorted({*truths, *predictions})
    cells = codes(truths, classes) * len(classes) + codes(predictions, classes)
    return drawn((cells, classes), len(pairs), cells=(cells, len(classes) ** 2))  # every figure counts cells


def _matrix(data: Drawn[ClassColumns]) -> NDArray[np.float64]:
    cells, classes = data.columns
    k = len(classes)
    return data.count(cells, k * k).reshape(k, k).astype(np.float64)


def averaged(values: Any) -> dict[str, float]:
    """Accuracy and precision, recall and F1 micro-, macro- and weighted-averaged over the classes present."""
    matrix = _matrix(of(values, NEEDS))
    hits = np.diagonal(matrix)
    truths, predicted = matrix.sum(axis=1), matrix.sum(axis=0)
    both = truths + predicted
    present = both > 0
    total = truths.sum()
    accuracy = float(hits.sum() / total)
    # Precision, recall and F1 of every class as the rows of one matrix: a few numpy calls a (re)sample, not one
    # per figure (the bootstrap reduces this 2,000 times).
    # A count is 0 or at least 1, and a class's hits are 0 where its bottom is: dividing by max(bottom, 1) is
    # scikit-learn's zero_division=0 without a masked division.
    per_class = np.array((hits, hits, 2 * hits)) / np.maximum(np.array((predicted, truths, both)), 1.0)
    macro = (per_class[:, present].sum(axis=1) / np.count_nonzero(present)).tolist()  # np.mean's sum / count
    weighted = ((per_class * truths).sum(axis=1) / total).tolist()
    figures = {"accuracy": accuracy}
    for at, name in enumerate(("precision", "recall", "f1")):
        figures[f"{name}_micro"] = accuracy  # single-label: every record is one TP, or one FP and one FN
        figures[f"{name}_macro"] = macro[at]
        figures[f"{name}_weighted"] = weighted[at]
    return figures


def of_class(values: Any, positive_label: str) -> dict[str, float]:
    """Precision, recall and F1 of one class."""
    data = of(values, NEEDS)
    classes = data.columns[1]
    if positive_label not in classes:
        raise SkipRecord(f"positive_label {positive_label!r} is neither a label nor a prediction of any record "
                         f"(classes: {', '.join(classes[:10])})")
    at = classes.index(positive_label)
    matrix = _matrix(data)
    hits = matrix[at, at]
    truths, predicted = matrix[at].sum(), matrix[:, at].sum()
    return {"precision": float(hits / predicted) if predicted else 0.0,
            "recall": float(hits / truths) if truths else 0.0,
            "f1": float(2 * hits / (truths + predicted)) if truths + predicted else 0.0}


def confusion(values: Any) -> dict[str, Any]:
    """``{labels, counts}``: counts[i][j] records of label i predicted as j."""
    data = of(values, NEEDS)
    return {"labels": data.columns[1], "counts": _matrix(data).astype(np.int64).tolist()}
