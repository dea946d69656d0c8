"""Group fairness of a classifier over a sensitive attribute: demographic parity and equalized odds.

The attribute is a row feature or, when the row has none of that name, a metadata key (``sensitive``). Per group:
the selection rate (share predicted positive), the true positive rate (among labels positive) and the false
positive rate (among labels negative). As fairlearn's ``demographic_parity_difference``/``_ratio`` and
``equalized_odds_difference`` (agg ``worst_case``): the largest gap in selection rate, the smallest over the largest
selection rate, and the larger of the TPR and FPR gaps. A group with no positive labels has no TPR and one with no
negative labels no FPR; they are left out of that gap (fairlearn would count them as 0).
"""

from __future__ import annotations

import contextlib
from types import ModuleType
from typing import Any

from evalsi.errors import SkipRecord
from evalsi.evaluators import Output, evaluator
from evalsi.evaluators._evaluator import Stacked
from evalsi.packs.ml_classic._values import label
from evalsi.packs.ml_monitoring._features import row_feature
from evalsi.records import from_value
from evalsi.v1alpha1.record_pb2 import Record


def _numeric() -> ModuleType:
    from evalsi.packs.ml_monitoring import _groups  # numpy: loaded by the first reduce, not by the catalog

    return _groups


def _mapper(record: Record, *, sensitive: str, positive_label: str) -> tuple[str, bool, bool]:
    group: Any = None
    with contextlib.suppress(SkipRecord):  # a prediction without a row: the attribute may be in the metadata
        group = row_feature(record, sensitive)
    if group is None and sensitive in record.metadata:
        group = from_value(record.metadata[sensitive])
    if group is None:
        raise SkipRecord(f"sensitive attribute {sensitive!r} is neither a row feature nor a metadata key")
    truth = label(record.reference, "reference") == positive_label
    return str(group), truth, label(record.output, "output") == positive_label


def _stack(triples: list[tuple[str, bool, bool]]) -> Stacked:
    stacked: Stacked = _numeric().stack(triples)
    return stacked


@evaluator(
    "builtin/fairness",
    version="1.0.0",
    pack="ml-monitoring",
    scope="dataset",
    requires=["output", "reference"],
    mapper=_mapper,
    stack=_stack,
    outputs=[
        Output("demographic_parity_difference", "number", 0.0, 1.0, higher_is_better=False,
               description="Largest minus smallest selection rate across groups."),
        Output("demographic_parity_ratio", "number", 0.0, 1.0,
               description="Smallest over largest selection rate (none when no group is ever selected)."),
        Output("equalized_odds_difference", "number", 0.0, 1.0, higher_is_better=False,
               description="The larger of the TPR gap and the FPR gap across groups."),
    ],
    params={"sensitive": "The row feature (or metadata key) whose values are the groups.",
            "positive_label": "The favourable class (as text: 1, true, approved...)."},
)
def fairness(values: Any, *, sensitive: str, positive_label: str) -> dict[str, float]:
    """Demographic parity difference and ratio and equalized odds difference of the predictions across the groups
    of ``sensitive``; skipped with the reason when the records hold fewer than two groups."""
    figures: dict[str, float] = _numeric().figures(values, sensitive)
    return figures


EVALUATORS = (fairness,)
