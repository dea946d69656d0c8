"""Evals.si evaluators as Inspect scorers (the reverse adapter).

``evalsi_scorer("builtin/exact-match")`` is an Inspect scorer whose score is the evaluator's verdict on the sample,
made into a record by the mapping the log import uses (``rows.sample_row``) and graded by ``evalsi.evaluate_async``:
the same binding, runner and judge client as every other evaluation, not a copy of the evaluator. An evaluator that
needs a judge uses the judge given here (our judge configuration), never the model Inspect evaluates.

How a result becomes an Inspect score:

- scored, one boolean output: ``C`` or ``I`` (Inspect's correct and incorrect), with ``accuracy`` and ``stderr``;
  one number: the number, with ``mean`` and ``stderr``; one label: the label; a structured value: as it is;
- several outputs: a dict of output to value, with ``mean`` and ``stderr`` of each boolean or numeric output;
- skipped (the record lacks what the evaluator requires): no score (``None``), so it never counts as a zero;
- an error (in the evaluator, or the judge down after retries): raised, so Inspect records the sample as errored
  rather than as a wrong answer.

The score's ``explanation`` is the evaluator's, and its ``metadata`` the evaluator's score metadata plus
``evalsi.evaluator`` (the ref graded with).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from inspect_ai.scorer import (
    CORRECT,
    INCORRECT,
    Metric,
    Score,
    Scorer,
    Target,
    accuracy,
    mean,
    scorer,
    stderr,
)
from inspect_ai.solver import TaskState

from evalsi.adapters.inspect.rows import SampleParts, sample_row
from evalsi.adapters.reverse import bind_one, plain_value
from evalsi.errors import EvalsiError
from evalsi.evaluators import BoundEvaluator, Output, Registry
from evalsi.judges.panel import JudgeInput
from evalsi.records import from_value
from evalsi.sdk import evaluate_async
from evalsi.v1alpha1.score_pb2 import EvaluationResult, Outcome
from evalsi.v1alpha1.score_pb2 import Score as EvalsiScore

ScoreValue = str | int | float | bool | Sequence[Any] | Mapping[str, Any]


class EvaluatorFailed(EvalsiError):
    """The evaluator could not grade the sample (its own error, or the judge down after retries): not a verdict."""


def evalsi_scorer(
    evaluator: str,
    *,
    params: Mapping[str, Any] | None = None,
    judge: JudgeInput | None = None,
    judges: Mapping[str, JudgeInput] | None = None,
    name: str | None = None,
    registry: Registry | None = None,
    cache: bool = True,
) -> Scorer:
    """An Inspect scorer grading each sample with the Evals.si evaluator ``evaluator`` (a ref such as
    ``builtin/exact-match``, ``exact-match`` or ``acme/json-valid@1.0.0``).

    ``params`` are the evaluator's params, checked now (a wrong one raises ``BadInputError`` before any sample
    runs); ``judge``/``judges`` configure the judge an evaluator that needs one calls (as ``evaluate()`` takes them;
    judged calls are cached unless ``cache=False``); ``name`` is the scorer's name in Inspect's log (default: the
    evaluator's short name).
    """
    registry = registry or Registry.from_entry_points()
    bound = bind_one(evaluator, params=params, name=name, registry=registry, judge=judge, judges=judges,
                     caller="evalsi_scorer", never_used="Inspect's model is never used")
    outputs = bound.evaluator.outputs

    @scorer(metrics=_metrics(outputs), name=bound.alias)
    def evalsi_evaluator() -> Scorer:
        async def score(state: TaskState, target: Target) -> Score | None:
            row = sample_row(state_parts(state, target))
            results = await evaluate_async([row], [bound], judge=judge, judges=judges, registry=registry, cache=cache)
            return inspect_score(results.results[0], bound)

        return score

    return evalsi_evaluator()


def state_parts(state: TaskState, target: Target) -> SampleParts:
    """The record parts of the sample a scorer is given (its usage: the last generation's, all a scorer sees)."""
    return SampleParts(
        sample_id=state.sample_id,
        epoch=state.epoch,
        input=state.input,
        messages=state.messages,
        output=state.output,
        target=target.target,
        metadata=state.metadata,
        model=str(state.model),
        usage=state.output.usage,
    )


def inspect_score(result: EvaluationResult, bound: BoundEvaluator) -> Score | None:
    """The Inspect score of one evaluation result (module docstring); ``None`` for a skipped record."""
    if result.outcome == Outcome.OUTCOME_SKIPPED:
        return None
    if result.outcome != Outcome.OUTCOME_SCORED:
        raise EvaluatorFailed(
            f"evalsi evaluator {bound.evaluator.ref} did not grade sample {result.record_id} "
            f"({Outcome.Name(result.outcome)}): {result.reason}"
        )
    by_name = {s.name: s for s in result.scores}
    outputs = bound.evaluator.outputs
    value: ScoreValue
    if len(outputs) == 1:
        value = _value(by_name[outputs[0].name] if outputs[0].name in by_name else result.scores[0], single=True)
    else:
        value = {o.name: _value(by_name[o.name], single=False) for o in outputs if o.name in by_name}
    metadata: dict[str, Any] = {"evalsi.evaluator": bound.evaluator.ref}
    for s in result.scores:
        metadata.update((key, from_value(item)) for key, item in s.metadata.items())
    explanation = "\n".join(s.explanation for s in result.scores if s.explanation)
    return Score(value=value, explanation=explanation or None, metadata=metadata)


def _value(score: EvalsiScore, *, single: bool) -> ScoreValue:
    value = plain_value(score)
    if value is None:
        raise EvaluatorFailed(f"evalsi score {score.name!r} holds no value")
    if single and isinstance(value, bool):
        return CORRECT if value else INCORRECT
    result: ScoreValue = value
    return result


def _metrics(outputs: Sequence[Output]) -> list[Metric] | dict[str, list[Metric]]:
    """Inspect's metrics for the outputs: accuracy of a pass/fail, mean of a number, none for labels."""
    graded = [o for o in outputs if o.type in ("boolean", "number")]
    if len(outputs) == 1:
        if not graded:
            return []
        return [accuracy(), stderr()] if graded[0].type == "boolean" else [mean(), stderr()]
    return {o.name: [mean(), stderr()] for o in graded}
