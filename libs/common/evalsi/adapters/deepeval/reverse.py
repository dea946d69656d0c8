"""Evals.si evaluators as DeepEval metrics (the reverse adapter).

``evalsi_metric("builtin/exact-match")`` is a DeepEval metric: ``deepeval.evaluate(test_cases, [metric])``,
``assert_test`` and ``metric.measure(test_case)`` grade the test case with our evaluator. The case becomes a
record by the mapping the plugin uses, reversed (``cases.case_row``), and is graded by ``evalsi.evaluate_async``
(the same binding, runner and judge client as every evaluation, not a copy of the evaluator). An evaluator that
needs a judge calls the judge given here (our judge configuration), never DeepEval's model.

``evalsi_metric(ref, conversational=True)`` grades ``ConversationalTestCase``s the same way, each case one record
holding the conversation (``reverse_turns.conversation_row``, the inverse of the conversational metrics' mapping).

How a result becomes DeepEval's:

- scored: ``score`` is the chosen output (``output=``; by default the evaluator's only pass/fail or numeric one,
  or its number when it has one of each) as a number, pass/fail as 1.0 or 0.0; ``success`` is the evaluator's
  pass/fail verdict when it has exactly one, else the score at or above ``threshold`` (at or below it for an output
  where lower is better); ``reason`` is the evaluator's explanation;
- skipped (the case lacks what the evaluator requires): DeepEval's ``MissingTestCaseParamsError``, which
  ``deepeval.evaluate`` reports as an error of the metric, or skips with ``skip_on_missing_params``;
- an error (the evaluator's own, or the judge down after retries): raised, so DeepEval records the metric's error
  rather than a failing score.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from deepeval.errors import MissingTestCaseParamsError  # type: ignore[import-not-found]
from deepeval.metrics import BaseConversationalMetric, BaseMetric  # type: ignore[import-not-found]
from deepeval.test_case import ConversationalTestCase, LLMTestCase, Turn  # type: ignore[import-not-found]

from evalsi.adapters.deepeval.cases import _chunk_text, case_row
from evalsi.adapters.deepeval.reverse_turns import conversation_row
from evalsi.adapters.reverse import bind_one
from evalsi.errors import BadInputError, EvalsiError
from evalsi.evaluators import BoundEvaluator, Output, Registry
from evalsi.judges.panel import JudgeInput
from evalsi.sdk import evaluate, evaluate_async
from evalsi.v1alpha1.score_pb2 import EvaluationResult, Outcome


class EvaluatorFailed(EvalsiError):
    """The evaluator could not grade the test case (its own error, or the judge down after retries): not a score."""


class _Graded:
    """What both metrics share: the bound evaluator, measuring a test case's record with it, and DeepEval's
    attributes set from the result. A subclass says how its kind of test case becomes a record (``_row``)."""

    _row: Callable[[Any], dict[str, Any]]

    def __init__(self, evaluator: str, *, params: Mapping[str, Any] | None = None,
                 judge: JudgeInput | None = None, judges: Mapping[str, JudgeInput] | None = None,
                 threshold: float = 0.5, output: str | None = None, registry: Registry | None = None,
                 cache: bool = True) -> None:
        self.registry = registry or Registry.from_entry_points()
        self.bound = bind_one(evaluator, params=params, name=None, registry=self.registry, judge=judge,
                              judges=judges, caller="evalsi_metric", never_used="DeepEval's model is never used")
        self.graded = graded_output(self.bound, output)
        # Every argument kept under its own name: deepeval.evaluate copies a metric per test case by calling its
        # class with the attributes that match __init__'s parameters.
        self.evaluator = evaluator
        self.params = params
        self.output = output
        self.judge = judge
        self.judges = judges
        self.cache = cache
        self.threshold = threshold
        self.async_mode = True
        self.include_reason = True
        self.evaluation_model = "evalsi"

    @property
    def __name__(self) -> str:  # DeepEval names a metric by this property in its results
        return f"evalsi:{self.bound.evaluator.ref}"

    def measure(self, test_case: Any, *args: Any, **kwargs: Any) -> float:
        results = evaluate([self._row(test_case)], [self.bound], judge=self.judge, judges=self.judges,
                           registry=self.registry, cache=self.cache)
        return self._take(results.results[0], test_case)

    async def a_measure(self, test_case: Any, *args: Any, **kwargs: Any) -> float:
        results = await evaluate_async([self._row(test_case)], [self.bound], judge=self.judge, judges=self.judges,
                                       registry=self.registry, cache=self.cache)
        return self._take(results.results[0], test_case)

    def is_successful(self) -> bool:
        return bool(self.success) and self.error is None

    def _take(self, result: EvaluationResult, test_case: Any) -> float:
        """Set DeepEval's score, success and reason from ``result`` (module docstring)."""
        self.error = None
        if result.outcome == Outcome.OUTCOME_SKIPPED:
            self.skipped = True
            raise MissingTestCaseParamsError(f"{self.__name__}: {result.reason}")
        if result.outcome != Outcome.OUTCOME_SCORED:
            self.error = f"{Outcome.Name(result.outcome)}: {result.reason}"
            raise EvaluatorFailed(f"evalsi evaluator {self.bound.evaluator.ref} did not grade the test case "
                                  f"{test_case.name or _described(test_case)!r} ({self.error})")
        self.score, self.success = score_and_success(result, self.bound.evaluator.outputs, self.graded,
                                                      self.threshold)
        self.reason = "\n".join(s.explanation for s in result.scores if s.explanation) or None
        return self.score


def _described(test_case: Any) -> str:
    """A test case without a name, for an error: its input, or its first turn's text."""
    if isinstance(test_case, ConversationalTestCase):
        return test_case.turns[0].content[:60] if test_case.turns else "(no turns)"
    return str(test_case.input)[:60]


class EvalsiMetric(_Graded, BaseMetric):
    """A DeepEval metric grading each single-turn test case (``LLMTestCase``) with the Evals.si evaluator
    ``evaluator`` (see ``evalsi_metric``)."""

    def _row(self, test_case: LLMTestCase) -> dict[str, Any]:
        return case_row(input=test_case.input, actual_output=test_case.actual_output,
                        expected_output=test_case.expected_output, retrieval_context=test_case.retrieval_context,
                        context=test_case.context, name=test_case.name, metadata=test_case.metadata)


class EvalsiConversationalMetric(_Graded, BaseConversationalMetric):
    """A DeepEval conversational metric grading each ``ConversationalTestCase`` with the Evals.si evaluator
    ``evaluator``: the case becomes one record (``reverse_turns.conversation_row``, the forward mapping's inverse).
    A separate class because DeepEval gives a conversational case only ``BaseConversationalMetric``s, and a
    ``BaseMetric`` only single-turn cases (``evalsi_metric(..., conversational=True)``)."""

    def _row(self, test_case: ConversationalTestCase) -> dict[str, Any]:
        return conversation_row(turns=[_turn(turn) for turn in test_case.turns],
                                expected_outcome=test_case.expected_outcome, context=test_case.context,
                                name=test_case.name, metadata=test_case.metadata,
                                chatbot_role=test_case.chatbot_role, scenario=test_case.scenario,
                                user_description=test_case.user_description)


def _turn(turn: Turn) -> dict[str, Any]:
    """A DeepEval ``Turn`` as the plain fields ``conversation_row`` reads (its MCP calls, audio and metadata are not
    mapped: a record has no place for them beside the trajectory)."""
    fields: dict[str, Any] = {"role": turn.role, "content": turn.content}
    if turn.tools_called:
        fields["tools_called"] = [{"name": call.name, "input_parameters": call.input_parameters,
                                   "output": call.output} for call in turn.tools_called]
    if turn.retrieval_context:
        fields["retrieval_context"] = [_chunk_text(chunk) for chunk in turn.retrieval_context]
    return fields


def graded_output(bound: BoundEvaluator, name: str | None) -> Output:
    """The output that becomes DeepEval's score: ``name``, else the evaluator's only pass/fail or numeric output,
    or its number when it has one number and one pass/fail (as DeepEval's own metrics: a score and a success);
    a choice that is not one of them is refused."""
    graded = [o for o in bound.evaluator.outputs if o.type in ("boolean", "number")]
    choices = ", ".join(o.name for o in graded) or "none"
    if name is not None:
        for candidate in graded:
            if candidate.name == name:
                return candidate
        raise BadInputError(f"output={name!r}: {bound.evaluator.ref} has no pass/fail or numeric output of that "
                            f"name; its outputs that can be a DeepEval score: {choices}")
    numbers = [o for o in graded if o.type == "number"]
    if len(graded) == 1 or (len(graded) == 2 and len(numbers) == 1):
        return numbers[0] if numbers else graded[0]
    raise BadInputError(f"{bound.evaluator.ref}: choose the output that becomes DeepEval's score with output= "
                        f"(one of: {choices})")


def score_and_success(result: EvaluationResult, outputs: Sequence[Output], output: Output,
                      threshold: float) -> tuple[float, bool]:
    """DeepEval's score and success for a scored result: the chosen output, and the evaluator's own pass/fail
    verdict when it has exactly one, else the score against ``threshold`` (module docstring)."""
    by_name = {s.name: s for s in result.scores}
    chosen = by_name.get(output.name)
    if chosen is None:
        raise EvaluatorFailed(f"evalsi evaluator {result.evaluator_ref or result.evaluator} scored no "
                              f"{output.name!r} for this test case")
    if output.type == "boolean":
        return (1.0 if chosen.passed else 0.0), chosen.passed
    verdicts = [o.name for o in outputs if o.type == "boolean"]
    if len(verdicts) == 1 and verdicts[0] in by_name:
        return chosen.number, by_name[verdicts[0]].passed
    return chosen.number, (chosen.number >= threshold if output.higher_is_better else chosen.number <= threshold)


def evalsi_metric(evaluator: str, *, params: Mapping[str, Any] | None = None, judge: JudgeInput | None = None,
                  judges: Mapping[str, JudgeInput] | None = None, threshold: float = 0.5, output: str | None = None,
                  registry: Registry | None = None, cache: bool = True, conversational: bool = False
                  ) -> EvalsiMetric | EvalsiConversationalMetric:
    """A DeepEval metric grading with the Evals.si evaluator ``evaluator`` (a ref such as ``builtin/exact-match``,
    ``exact-match`` or ``acme/json-valid@1.0.0``).

    ``params`` are the evaluator's params, checked now (a wrong one raises ``BadInputError`` before any case
    runs); ``judge``/``judges`` configure the judge an evaluator that needs one calls (as ``evaluate()`` takes them;
    judged calls are cached unless ``cache=False``); ``threshold`` decides success for a numeric output;
    ``output`` chooses the output that is DeepEval's score when the evaluator has several; ``conversational=True``
    makes the metric for ``ConversationalTestCase``s (``EvalsiConversationalMetric``), as DeepEval wants a metric of
    each kind for each kind of case.
    """
    kind = EvalsiConversationalMetric if conversational else EvalsiMetric
    return kind(evaluator, params=params, judge=judge, judges=judges, threshold=threshold, output=output,
                        registry=registry, cache=cache)
