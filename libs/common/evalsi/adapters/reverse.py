"""What the reverse adapters (our evaluators as Inspect scorers, DeepEval metrics and MLflow scorers) share: one
evaluator bound with its params, refused up front when it needs a judge and none is given, and a score's value as
plain Python. No framework is imported here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalsi.errors import BadInputError
from evalsi.evaluators import BoundEvaluator, Registry
from evalsi.judges.panel import JudgeInput
from evalsi.records import from_value
from evalsi.runs.binding import resolve_evaluators
from evalsi.v1alpha1.score_pb2 import Score


def bind_one(evaluator: str, *, params: Mapping[str, Any] | None, name: str | None, registry: Registry,
             judge: JudgeInput | None, judges: Mapping[str, JudgeInput] | None, caller: str,
             never_used: str) -> BoundEvaluator:
    """``evaluator`` bound with ``params`` (checked now: a wrong one raises ``BadInputError``) under ``name``; one
    that needs a judge without ``judge``/``judges`` is refused, naming ``caller`` and saying which of the framework's
    models is never used (``never_used``). Without that refusal every record would be skipped as judge_pending,
    said nowhere."""
    (bound,) = resolve_evaluators([{"ref": evaluator, "params": dict(params or {}), "alias": name or ""}], registry)
    if judge is None and not judges and "judge" in bound.evaluator.requires:
        raise BadInputError(f"{caller}({evaluator!r}): the evaluator needs a judge; pass judge= (our judge "
                            f"configuration, e.g. {{'provider': 'openai', 'model': ...}}): {never_used}")
    return bound


def plain_value(score: Score) -> bool | float | str | Any | None:
    """The score's value (pass/fail, number, label or structured) as plain Python; None when it holds none."""
    kind = score.WhichOneof("value")
    if kind == "passed":
        return score.passed
    if kind == "number":
        return score.number
    if kind == "label":
        return score.label
    if kind == "structured":
        return from_value(score.structured)
    return None
