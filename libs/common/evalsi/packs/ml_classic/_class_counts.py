"""The numpy side of the classification metrics (``classification``): class codes stacked once, the confusion
matrix counted with ``np.bincount`` over them per (re)sample, and the figures read from it. Loaded by the first
reduce, not by the catalog."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from evalsi.errors import SkipRecord
from evalsi.stats.weighted import Weighted, codes, ones, weighted

NEEDS = "a class label in its reference and a predicted class in its output"
ClassColumns = tuple[NDArray[np.intp], NDArray[np.intp], list[str]]


def stack(pairs: list[tuple[str, str]]) -> Weighted[ClassColumns]:
    truths = [truth for truth, _ in pairs]
    predictions = [prediction for _, prediction in pairs]
    classes = sorted({*truths, *predictions})
    return ones((codes(truths, classes), codes(predictions, classes), classes), len(pairs))


def _matrix(data: Weighted[ClassColumns]) -> NDArray[np.float64]:
    truths, predictions, classes = data.columns
    k = len(classes)
    counts = np.bincount(truths * k + predictions, weights=data.weights, minlength=k * k)
    return np.asarray(counts, dtype=np.float64).reshape(k, k)  # float with weights (numpy's stub says int)


def _ratio(top: NDArray[np.float64], bottom: NDArray[np.float64]) -> NDArray[np.float64]:
    """``top / bottom``, 0 where ``bottom`` is 0 (scikit-learn's zero_division=0)."""
    return np.divide(top, bottom, out=np.zeros_like(top), where=bottom > 0)


def averaged(values: Any) -> dict[str, float]:
    """Accuracy and precision, recall and F1 micro-, macro- and weighted-averaged over the classes present."""
    matrix = _matrix(weighted(values, NEEDS))
    hits = np.diagonal(matrix)
    truths, predicted = matrix.sum(axis=1), matrix.sum(axis=0)
    present = (truths + predicted) > 0
    total = truths.sum()
    figures = {"accuracy": float(hits.sum() / total)}
    precision, recall = _ratio(hits, predicted), _ratio(hits, truths)
    f1 = _ratio(2 * hits, truths + predicted)
    for name, per_class in (("precision", precision), ("recall", recall), ("f1", f1)):
        figures[f"{name}_micro"] = figures["accuracy"]  # single-label: every record is one TP, or one FP and one FN
        figures[f"{name}_macro"] = float(per_class[present].mean())
        figures[f"{name}_weighted"] = float((per_class * truths).sum() / total)
    return figures


def of_class(values: Any, positive_label: str) -> dict[str, float]:
    """Precision, recall and F1 of one class."""
    data = weighted(values, NEEDS)
    classes = data.columns[2]
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
    data = weighted(values, NEEDS)
    return {"labels": data.columns[2], "counts": _matrix(data).astype(np.int64).tolist()}
