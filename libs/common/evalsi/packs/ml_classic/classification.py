"""Classification: per-record correctness, and the dataset's accuracy, precision/recall/F1 and confusion matrix.

The dataset metrics reduce a confusion matrix counted with ``np.bincount`` over class codes, so each of the
bootstrap's resamples costs one count over the records. Equal to scikit-learn's ``accuracy_score``,
``precision_recall_fscore_support`` (``zero_division=0``: a class never predicted has precision 0) and
``confusion_matrix`` on the same labels (tests/packs/test_ml_classic.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from evalsi.errors import SkipRecord
from evalsi.evaluators import Output, evaluator
from evalsi.evaluators._evaluator import BatchVerdicts
from evalsi.packs.ml_classic._values import label
from evalsi.packs.ml_classic._weighted import Weighted, codes, ones, weighted
from evalsi.records import to_value
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

PACK = "ml-classic"
_NEEDS = "a class label in its reference and a predicted class in its output"


def _correct_batch(texts: dict[str, list[str]]) -> BatchVerdicts:
    """Two non-empty texts are the labels themselves; anything else (a row, JSON) is read by the function."""
    return [output == expected if output and expected else None
            for output, expected in zip(texts["output"], texts["reference"], strict=True)]


@evaluator(
    "builtin/correct",
    version="1.0.0",
    pack=PACK,
    requires=["output", "reference"],
    cheap=True,  # two labels read and compared
    batch=_correct_batch,
    outputs=[Output("passed", "boolean", description="The predicted class equals the label.")],
)
def correct(record: Record) -> bool:
    """The predicted class (a row's prediction, or a text or JSON scalar output) equals the reference label."""
    return label(record.output, "output") == label(record.reference, "reference")


def _pair(record: Record, **_: Any) -> tuple[str, str]:
    return label(record.reference, "reference"), label(record.output, "output")


ClassColumns = tuple[NDArray[np.intp], NDArray[np.intp], list[str]]


def _stack(pairs: list[tuple[str, str]]) -> Weighted[ClassColumns]:
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


_AVERAGES = ("micro", "macro", "weighted")
_OUTPUTS = [Output("accuracy", "number", 0.0, 1.0, description="Share of records whose predicted class is the label.")]
for _average in _AVERAGES:
    for _metric in ("precision", "recall", "f1"):
        _OUTPUTS.append(Output(f"{_metric}_{_average}", "number", 0.0, 1.0,
                               description=f"{_metric.capitalize()}, {_average}-averaged over the classes present."))


@evaluator(
    "builtin/classification",
    version="1.0.0",
    pack=PACK,
    scope="dataset",
    requires=["output", "reference"],
    mapper=_pair,
    stack=_stack,
    outputs=_OUTPUTS,
)
def classification(values: Any) -> dict[str, float]:
    """Accuracy and precision, recall and F1 micro-, macro- and weighted-averaged over the classes that occur as a
    label or a prediction (scikit-learn's default labels)."""
    matrix = _matrix(weighted(values, _NEEDS))
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


@evaluator(
    "builtin/positive-class",
    version="1.0.0",
    pack=PACK,
    scope="dataset",
    requires=["output", "reference"],
    mapper=_pair,
    stack=_stack,
    outputs=[Output(name, "number", 0.0, 1.0, description=f"{name.capitalize()} of the positive class.")
             for name in ("precision", "recall", "f1")],
    params={"positive_label": "The positive class (as text: 1, true, yes...)."},
)
def positive_class(values: Any, *, positive_label: str) -> dict[str, float]:
    """Precision, recall and F1 of one class (scikit-learn's ``average="binary"`` with ``pos_label``): the binary
    task's usual figures. Skipped with the reason when no record has that class as label or prediction."""
    data = weighted(values, _NEEDS)
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


@evaluator(
    "builtin/confusion-matrix",
    version="1.0.0",
    pack=PACK,
    scope="dataset",
    requires=["output", "reference"],
    mapper=_pair,
    stack=_stack,
    outputs=[Output("matrix", "structured", description="{labels, counts}: counts[i][j] records of label i "
                                                        "predicted as j, labels sorted.")],
)
def confusion_matrix(values: Any) -> Score:
    """How many records of each label were predicted as each class (rows: labels, columns: predictions, as
    scikit-learn's ``confusion_matrix``), the classes sorted."""
    data = weighted(values, _NEEDS)
    counts = _matrix(data).astype(np.int64).tolist()
    return Score(structured=to_value({"labels": data.columns[2], "counts": counts}))


EVALUATORS = (correct, classification, positive_class, confusion_matrix)
