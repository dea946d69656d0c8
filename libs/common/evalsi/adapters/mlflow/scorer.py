"""Evals.si evaluators as MLflow GenAI scorers (the reverse adapter).

``evalsi_scorer("builtin/exact-match")`` is an ``mlflow.genai.scorers.Scorer`` (the subclass form MLflow documents
for custom scorers) for ``mlflow.genai.evaluate(data=..., scorers=[...])``. Each call's ``inputs``, ``outputs``,
``expectations`` and ``trace`` become one record (``rows.mlflow_row``), graded by ``evalsi.evaluate``: the same
binding, runner and judge client as every other evaluation, not a copy of the evaluator. An evaluator that needs a
judge calls the judge given here (our judge configuration), never an MLflow model.

How a result becomes MLflow feedback:

- scored: an ``mlflow.entities.Feedback`` per output of the evaluator (one output: named as the scorer; several:
  ``<scorer>.<output>``), its value the verdict as MLflow aggregates it (pass/fail ``True``/``False``, a number, a
  label, a structured value as it is), its rationale our explanation, its metadata ``evalsi.evaluator`` (the ref
  and version graded with) plus the score's own metadata (as JSON text: MLflow keeps metadata as strings);
- skipped (the record lacks what the evaluator requires): ``None``, which MLflow documents as no assessment, so it
  never counts as a zero;
- an error (the evaluator's own, or the judge down after retries): a Feedback holding the error
  (``AssessmentError``: our outcome as its code, the reason as its message) and no value.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from typing import Any

from evalsi.adapters.mlflow.rows import MAX_RETRIEVAL_SPANS, mlflow_row, retrieved_documents
from evalsi.adapters.reverse import bind_one, plain_value
from evalsi.errors import EvalsiError
from evalsi.evaluators import BoundEvaluator, Registry
from evalsi.judges.panel import JudgeInput
from evalsi.records import from_value
from evalsi.sdk import evaluate
from evalsi.v1alpha1.score_pb2 import EvaluationResult, Outcome
from evalsi.v1alpha1.score_pb2 import Score as EvalsiScore

# MLflow sends usage telemetry from the process that imports it unless told not to; a user's own setting wins.
# Set before the import below; a process that imported mlflow earlier has its telemetry client dropped (_telemetry).
_TELEMETRY_OPT_OUT = "MLFLOW_DISABLE_TELEMETRY"
_MLFLOW_WAS_IMPORTED = "mlflow" in sys.modules
_TELEMETRY_DEFAULTED = _TELEMETRY_OPT_OUT not in os.environ
os.environ.setdefault(_TELEMETRY_OPT_OUT, "true")

from mlflow.entities import (  # noqa: E402 (after the telemetry opt-out, which mlflow reads on import)
    AssessmentError,
    AssessmentSource,
    AssessmentSourceType,
    Feedback,
    SpanType,
)
from mlflow.genai.scorers import Scorer  # noqa: E402

# The MLflow release the adapter is tested against (tests/adapters/test_mlflow_*.py).
UPSTREAM = "mlflow-skinny==3.18.0"

FeedbackValue = bool | float | str | list[Any] | dict[str, Any]


def _telemetry() -> None:
    if _MLFLOW_WAS_IMPORTED and _TELEMETRY_DEFAULTED:
        from mlflow.telemetry.client import set_telemetry_client

        set_telemetry_client()  # reads the opt-out now set: the client becomes None


_telemetry()


class EvalsiScorer(Scorer):
    """An MLflow scorer grading each row with one bound Evals.si evaluator (module docstring)."""

    _bound: BoundEvaluator
    _judge: JudgeInput | None
    _judges: Mapping[str, JudgeInput] | None
    _registry: Registry
    _cache: bool

    def __call__(
        self, *, inputs: Any = None, outputs: Any = None, expectations: Any = None, trace: Any = None
    ) -> Feedback | list[Feedback] | None:
        row = mlflow_row(inputs, outputs, expectations if isinstance(expectations, Mapping) else None,
                         trace_contexts(trace), trace_id(trace))
        with evaluate([row], [self._bound], judge=self._judge, judges=self._judges, registry=self._registry,
                      cache=self._cache) as results:
            return feedbacks(results.results[0], self._bound, self.name)


def evalsi_scorer(
    evaluator: str,
    *,
    params: Mapping[str, Any] | None = None,
    judge: JudgeInput | None = None,
    judges: Mapping[str, JudgeInput] | None = None,
    name: str | None = None,
    registry: Registry | None = None,
    cache: bool = True,
) -> EvalsiScorer:
    """An MLflow GenAI scorer grading each row with the Evals.si evaluator ``evaluator`` (a ref such as
    ``builtin/exact-match``, ``exact-match`` or ``acme/json-valid@1.0.0``).

    ``params`` are the evaluator's params, checked now (a wrong one raises ``BadInputError`` before any row is
    scored); ``judge``/``judges`` configure the judge an evaluator that needs one calls (as ``evaluate()`` takes
    them; judged calls are cached unless ``cache=False``); ``name`` is the assessment's name in MLflow (default: the
    evaluator's short name).
    """
    registry = registry or Registry.from_entry_points()
    bound = bind_one(evaluator, params=params, name=name, registry=registry, judge=judge, judges=judges,
                     caller="evalsi_scorer", never_used="MLflow's models are never used")
    scorer = EvalsiScorer(name=bound.alias, description=bound.evaluator.description or None)
    scorer._bound, scorer._judge, scorer._judges = bound, judge, judges
    scorer._registry, scorer._cache = registry, cache
    return scorer


def trace_id(trace: Any) -> str:
    info = getattr(trace, "info", None)
    return str(getattr(info, "trace_id", "") or "")


def trace_contexts(trace: Any) -> list[str]:
    """The documents the trace's top-level retrieval spans returned (a retriever called inside another retriever
    returns what its caller does, so it is not read twice); none without a trace."""
    if trace is None or getattr(trace, "data", None) is None:
        return []
    retrievers = trace.search_spans(span_type=SpanType.RETRIEVER)[:MAX_RETRIEVAL_SPANS]
    ids = {span.span_id for span in retrievers}
    parents = {span.span_id: span.parent_id for span in trace.data.spans}
    top = [span for span in retrievers if not _has_ancestor_in(span.parent_id, parents, ids)]
    return retrieved_documents(span.outputs for span in top if span.outputs is not None)


def _has_ancestor_in(parent: str | None, parents: Mapping[str, str | None], ids: set[str]) -> bool:
    seen: set[str] = set()
    while parent is not None and parent not in seen:
        if parent in ids:
            return True
        seen.add(parent)
        parent = parents.get(parent)
    return False


def feedbacks(result: EvaluationResult, bound: BoundEvaluator, name: str) -> Feedback | list[Feedback] | None:
    """MLflow's feedback for one evaluation result (module docstring); ``None`` for a skipped record."""
    if result.outcome == Outcome.OUTCOME_SKIPPED:
        return None
    ref = bound.evaluator.ref
    source = AssessmentSource(
        source_type=AssessmentSourceType.LLM_JUDGE if "judge" in bound.evaluator.requires
        else AssessmentSourceType.CODE,
        source_id=ref,
    )
    if result.outcome != Outcome.OUTCOME_SCORED:
        return Feedback(name=name, source=source, metadata={"evalsi.evaluator": ref},
                        error=AssessmentError(error_code=Outcome.Name(result.outcome),
                                              error_message=result.reason or "the evaluator did not grade the row"))
    outputs = bound.evaluator.outputs
    if len(outputs) == 1:
        by_name = {s.name: s for s in result.scores}
        score = by_name.get(outputs[0].name, result.scores[0])
        return _feedback(score, name, source, ref)
    return [_feedback(s, f"{name}.{s.name}", source, ref) for s in result.scores]


def _feedback(score: EvalsiScore, name: str, source: AssessmentSource, ref: str) -> Feedback:
    metadata = {"evalsi.evaluator": ref}
    metadata.update((key, _text(from_value(item))) for key, item in score.metadata.items())
    return Feedback(name=name, value=_value(score), rationale=score.explanation or None, source=source,
                    metadata=metadata)


def _value(score: EvalsiScore) -> FeedbackValue:
    value = plain_value(score)
    if value is None:
        raise EvalsiError(f"evalsi score {score.name!r} holds no value")
    result: FeedbackValue = value
    return result


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)

