"""The evaluator API: declare evaluators, group them in packs, resolve references."""

from evalsi.evaluators._context import JUDGE_PENDING, EvalContext
from evalsi.evaluators._evaluator import (
    BoundEvaluator,
    Evaluator,
    Output,
    Param,
    Stacked,
    Verdict,
    evaluator,
    normalize_scores,
)
from evalsi.evaluators._registry import ENTRY_POINT_GROUP, TIERS, Pack, Registry

__all__ = [  # noqa: RUF022 - grouped for readers
    # authoring
    "EvalContext",
    "Output",
    "Stacked",
    "Verdict",
    "evaluator",
    # packs and lookup
    "ENTRY_POINT_GROUP",
    "Pack",
    "Registry",
    "TIERS",
    # execution
    "JUDGE_PENDING",
    "BoundEvaluator",
    "Evaluator",
    "Param",
    "normalize_scores",
]
