"""Classification: per-record correctness, and the dataset's accuracy, precision/recall/F1 and confusion matrix.

The dataset metrics reduce a confusion matrix counted with ``np.bincount`` over class codes (``_class_counts``,
numpy, loaded by the first reduce rather than with the catalog), so each of the bootstrap's resamples costs one
count over the records. Equal to scikit-learn's ``accuracy_score``, ``precision_recall_fscore_support``
(``zero_division=0``: a class never predicted has precision 0) and ``confusion_matrix`` on the same labels
(tests/packs/test_ml_classic.py).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from evalsi.evaluators import Output, evaluator
from evalsi.evaluators._evaluator import BatchVerdicts, Stacked
from evalsi.packs.ml_classic._values import label
from evalsi.records import to_value
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

PACK = "ml-classic"


def _counts() -> ModuleType:
    from evalsi.packs.ml_classic import _class_counts  # numpy: loaded by the first reduce, not by the catalog

    return _class_counts


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


def _stack(pairs: list[tuple[str, str]]) -> Stacked:
    stacked: Stacked = _counts().stack(pairs)
    return stacked


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
    figures: dict[str, float] = _counts().averaged(values)
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
    figures: dict[str, float] = _counts().of_class(values, positive_label)
    return figures


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
    return Score(structured=to_value(_counts().confusion(values)))


EVALUATORS = (correct, classification, positive_class, confusion_matrix)
