"""The evaluation cascade: stages in order, each run only when its ``when`` holds over the scores so far.

Pure planning: ``Cascade.next_stages(results)`` says which stages run next given the results of the stages
already decided; ``run_cascade`` drives it with the evaluation injected (a worker pool in the service, a plain
function in tests).

Consecutive stages without ``when`` run together (none of them reads another's scores); a stage with ``when``
waits for every stage before it. ``when`` is CEL over:
- ``scores``: a list with one entry per scored value of earlier stages: ``name`` (the metric: the alias, or
  ``alias.output`` for an evaluator with several outputs), ``stage`` (the alias), ``value`` (a double; 1.0 or
  0.0 for pass/fail) and, for pass/fail values only, ``passed``;
- ``score(name)``: the value of one metric (``score('pii-leak') < 0.5``).
A ``when`` that cannot be evaluated (a stage it reads was skipped or failed, ``s.passed`` on a numeric score)
skips its stage with the reason, never runs it by default. A stage whose evaluator needs content the trace
does not carry (``output``, ``input``) is skipped with ``no content`` before anything runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import celpy
from celpy import celtypes

from evalsi.errors import BadInputError
from evalsi.evaluators import BoundEvaluator
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

from .expressions import WHEN, checked_expression
from .selection import evaluate_cel

SCORED = "scored"
SKIPPED = "skipped"
ERROR = "error"
NO_CONTENT = "no content"
_CONTENT_FIELDS = ("input", "output", "reference", "trajectory")


def compile_when(expression: str, metrics: Sequence[str] | None = None, *, scope: str = "earlier stages") -> Any:
    """A parsed, type-checked ``when``; ``metrics``, when given, are the names ``score()`` may read."""
    if not expression.strip():
        raise BadInputError("must be a non-empty CEL expression, e.g. scores.all(s, s.passed)")
    return checked_expression(expression, WHEN, what="a when condition", metrics=metrics, scope=scope)


@dataclass(frozen=True)
class Stage:
    alias: str
    bound: BoundEvaluator
    when: Any | None = None  # a compiled CEL expression
    when_text: str = ""


@dataclass(frozen=True)
class StageResult:
    """What one stage produced: ``scored`` with scores, ``skipped`` with a reason, or ``error``."""

    alias: str
    outcome: str
    scores: tuple[Score, ...] = ()
    reason: str = ""


def score_entries(results: Sequence[StageResult]) -> list[dict[str, Any]]:
    """The ``scores`` list a ``when`` sees: one entry per number or pass/fail value of a scored stage."""
    entries: list[dict[str, Any]] = []
    for result in results:
        if result.outcome != SCORED:
            continue
        for score in result.scores:
            name = result.alias if len(result.scores) == 1 else f"{result.alias}.{score.name}"
            kind = score.WhichOneof("value")
            if kind == "number":
                entries.append({"name": name, "stage": result.alias, "value": score.number})
            elif kind == "passed":
                entries.append(
                    {"name": name, "stage": result.alias, "value": 1.0 if score.passed else 0.0, "passed": score.passed}
                )
    return entries


def check_when(tree: Any, results: Sequence[StageResult]) -> tuple[bool, str]:
    """(holds, why not) for a compiled ``when`` over the results so far."""
    entries = score_entries(results)
    by_name = {entry["name"]: entry["value"] for entry in entries}

    def score(name: Any) -> Any:
        if str(name) not in by_name:
            known = ", ".join(by_name) or "none"
            return celpy.CELEvalError(f"no score {str(name)!r} (scored so far: {known})")
        return celtypes.DoubleType(by_name[str(name)])

    value = evaluate_cel(tree, {"scores": celpy.json_to_cel(entries)}, {"score": score})
    if isinstance(value, celpy.CELEvalError):
        args = getattr(value, "args", ())
        text = args[0] if args and isinstance(args[0], str) else str(value)
        return False, f"could not be evaluated: {' '.join(text.split())}"
    if not isinstance(value, celtypes.BoolType | bool):
        return False, f"must evaluate to true or false, got {value!r}"
    return bool(value), "" if value else "false"


def missing_content(record: Record, bound: BoundEvaluator) -> list[str]:
    """The content fields an evaluator requires that the record does not carry."""
    return [name for name in _CONTENT_FIELDS if name in bound.evaluator.requires and not record.HasField(name)]


@dataclass
class Plan:
    """The next step of a cascade: stages to run now, stages decided as skipped, and whether it is done."""

    run: list[Stage] = field(default_factory=list)
    skipped: list[StageResult] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return not self.run


@dataclass(frozen=True)
class Cascade:
    stages: tuple[Stage, ...]

    def next_stages(self, results: Mapping[str, StageResult], record: Record | None = None) -> Plan:
        """The stages to run next given ``results`` (by alias) of the stages decided so far.

        Skipped stages come back in ``plan.skipped``; the caller adds them to ``results`` along with the
        results of ``plan.run`` before asking again. An empty ``plan.run`` means the cascade is finished.
        """
        plan = Plan()
        decided = dict(results)
        for stage in self.stages:
            if stage.alias in decided:
                continue
            if record is not None:
                missing = missing_content(record, stage.bound)
                if missing:
                    reason = f"{NO_CONTENT}: the trace has no {', '.join(missing)}"
                    skip = StageResult(stage.alias, SKIPPED, reason=reason)
                    plan.skipped.append(skip)
                    decided[stage.alias] = skip
                    continue
            if stage.when is None:
                plan.run.append(stage)
                continue
            if plan.run:  # a conditional stage waits for the stages before it
                break
            ordered = [decided[s.alias] for s in self.stages if s.alias in decided]
            holds, why = check_when(stage.when, ordered)
            if holds:
                plan.run.append(stage)
                break
            skip = StageResult(stage.alias, SKIPPED, reason=f"when {stage.when_text!r}: {why}")
            plan.skipped.append(skip)
            decided[stage.alias] = skip
        return plan


Evaluate = Callable[[Sequence[Stage]], Awaitable[Sequence[StageResult]]]


async def run_cascade(cascade: Cascade, evaluate: Evaluate, record: Record | None = None) -> list[StageResult]:
    """Run a cascade to the end; ``evaluate`` runs a batch of stages and returns one result per stage."""
    results: dict[str, StageResult] = {}
    while True:
        plan = cascade.next_stages(results, record)
        for skip in plan.skipped:
            results[skip.alias] = skip
        if plan.done:
            break
        produced = list(await evaluate(plan.run))
        if sorted(r.alias for r in produced) != sorted(s.alias for s in plan.run):
            raise RuntimeError(
                f"evaluate returned results for {[r.alias for r in produced]}, expected {[s.alias for s in plan.run]}"
            )
        for result in produced:
            results[result.alias] = result
    return [results[s.alias] for s in cascade.stages]
