"""Metrics of predicted class probabilities: ROC-AUC, average precision (PR-AUC), log-loss, Brier score and ECE.

Each record's probabilities (``Content.row.probabilities``) and label are stacked once into a matrix over the
classes (every label and probability key, sorted as text; a class missing from a record's probabilities counts
as 0, except that in a two-class task a record giving only one class's probability gives the other as its
complement). The scores are sorted once per class, ties grouped; a resample is only each record's draw count,
whose running totals over every scored class's records in rank order are taken at once in a grid (``_curves``,
``_prefix``), so ROC-AUC and average precision cost a few passes over the records per resample, never a sort
(``_scores``, numpy, loaded by the first reduce). Equal to scikit-learn's ``roc_auc_score`` (binary;
``multi_class="ovr"``, macro), ``average_precision_score``, ``log_loss`` and ``brier_score_loss``; ECE to its
definition (tests/packs/test_ml_classic.py, tests/packs/test_ml_curves.py).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from evalsi.errors import BadInputError
from evalsi.evaluators import Output, evaluator
from evalsi.evaluators._evaluator import Stacked
from evalsi.packs.ml_classic._values import label, probabilities
from evalsi.v1alpha1.record_pb2 import Record

PACK = "ml-classic"
_POSITIVE = {"positive_label": "The class scored as positive. Empty: the greater of two classes (sorted as text, "
                               "scikit-learn's pos_label), or, with more classes, the macro one-vs-rest average."}


def _numeric() -> ModuleType:
    from evalsi.packs.ml_classic import _scores  # numpy: loaded by the first reduce, not by the catalog

    return _scores


def _pair(record: Record, **_: Any) -> tuple[str, dict[str, float]]:
    return label(record.reference, "reference"), probabilities(record.output)


def _stack(pairs: list[tuple[str, dict[str, float]]]) -> Stacked:
    stacked: Stacked = _numeric().stack(pairs)
    return stacked


@evaluator(
    "builtin/roc-auc",
    version="1.0.0",
    pack=PACK,
    scope="dataset",
    requires=["output", "reference"],
    mapper=_pair,
    stack=_stack,
    outputs=[Output("roc_auc", "number", 0.0, 1.0, description="Area under the ROC curve.")],
    params=_POSITIVE,
)
def roc_auc(values: Any, *, positive_label: str = "") -> float:
    """Area under the ROC curve of the positive class's probability (scikit-learn's ``roc_auc_score``); with more
    than two classes and no positive_label, the macro average of each class against the rest (``multi_class=
    "ovr"``). Skipped with the reason when the labels hold one class only."""
    return float(_numeric().roc_auc(values, positive_label))


@evaluator(
    "builtin/pr-auc",
    version="1.0.0",
    pack=PACK,
    scope="dataset",
    requires=["output", "reference"],
    mapper=_pair,
    stack=_stack,
    outputs=[Output("average_precision", "number", 0.0, 1.0, description="Area under the precision-recall "
                                                                          "curve, as average precision.")],
    params=_POSITIVE,
)
def pr_auc(values: Any, *, positive_label: str = "") -> float:
    """Average precision of the positive class's probability (scikit-learn's ``average_precision_score``: the
    step-wise area, not the trapezoidal one); with more than two classes, the macro one-vs-rest average."""
    return float(_numeric().average_precision(values, positive_label))


@evaluator(
    "builtin/log-loss",
    version="1.0.0",
    pack=PACK,
    scope="dataset",
    requires=["output", "reference"],
    mapper=_pair,
    stack=_stack,
    outputs=[Output("log_loss", "number", 0.0, None, higher_is_better=False,
                    description="Mean negative log-probability of the true class (natural log).")],
)
def log_loss(values: Any) -> float:
    """Cross-entropy: the mean of -ln p(label), probabilities clipped to [eps, 1 - eps] (scikit-learn's
    ``log_loss`` with the classes given as labels)."""
    return float(_numeric().log_loss(values))


@evaluator(
    "builtin/brier",
    version="1.0.0",
    pack=PACK,
    scope="dataset",
    requires=["output", "reference"],
    mapper=_pair,
    stack=_stack,
    outputs=[Output("brier", "number", 0.0, 2.0, higher_is_better=False,
                    description="Mean squared error of the class probabilities.")],
)
def brier(values: Any) -> float:
    """Mean over records of the squared differences between the probabilities and the label's one-hot vector,
    summed over the classes and halved for two classes (so binary is mean (y - p)^2): scikit-learn's
    ``brier_score_loss``."""
    return float(_numeric().brier(values))


def _check_bins(*, bins: int = 10) -> None:
    if not 1 <= bins <= 1_000:
        raise BadInputError(f"evaluator builtin/ece: param 'bins' must be between 1 and 1000, got {bins}")


@evaluator(
    "builtin/ece",
    version="1.0.0",
    pack=PACK,
    scope="dataset",
    requires=["output", "reference"],
    mapper=_pair,
    stack=_stack,
    check=_check_bins,
    outputs=[Output("ece", "number", 0.0, 1.0, higher_is_better=False,
                    description="Expected calibration error of the most probable class.")],
    params={"bins": "Equal-width confidence bins over [0, 1]: bin m holds confidences in ((m-1)/bins, m/bins]."},
)
def ece(values: Any, *, bins: int = 10) -> float:
    """Expected calibration error (top-label): records binned by the highest probability (equal-width bins,
    the first also holding 0), then the sum over bins of |accuracy - mean confidence| weighted by the bin's share
    of records; the predicted class is the most probable one (the first in class order on a tie)."""
    return float(_numeric().ece(values, bins))


EVALUATORS = (roc_auc, pr_auc, log_loss, brier, ece)
