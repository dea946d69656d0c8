"""DeepEval's agentic metrics as Evals.si evaluators: tool correctness (scored in code, no judge), argument
correctness and task completion (judged). A record becomes an ``LLMTestCase`` with its input, its output, the
trajectory's tool calls (``tools_called``) and, for tool correctness, the expected tools (``expected_tools``):
``cases.tool_call_fields`` and ``cases.expected_tool_fields``. Runs in DeepEval's virtualenv."""

from __future__ import annotations

from typing import Any

from deepeval import metrics as deepeval_metrics  # type: ignore[import-not-found]
from deepeval.test_case import LLMTestCase, ToolCall, ToolCallParams  # type: ignore[import-not-found]

from evalsi.adapters.deepeval import UPSTREAM
from evalsi.adapters.deepeval.cases import expected_list, expected_tool_fields, tool_call_fields
from evalsi.adapters.deepeval.judge_model import JudgeLLM, NoModel
from evalsi.adapters.deepeval.scoring import (
    COMMON_PARAMS,
    VERSION,
    check_optional_text,
    check_threshold,
    measure,
    outputs,
    template,
)
from evalsi.errors import BadInputError
from evalsi.evaluators import EvalContext, evaluator
from evalsi.records import content_text, has_content
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

# What tool correctness may compare besides names: DeepEval's ToolCallParams values.
COMPARED = tuple(p.value for p in ToolCallParams)
MAX_TASK = 4000  # characters of the task param: it is sent to the judge with every record


def agent_case(record: Record, expected: list[dict[str, Any]] | None = None) -> LLMTestCase:
    """The record's ``LLMTestCase``: input, output, the trajectory's tool calls and the expected tools."""
    return LLMTestCase(
        input=content_text(record.input),
        actual_output=content_text(record.output) if has_content(record, "output") else None,
        tools_called=[ToolCall(**call) for call in tool_call_fields(record)] if has_content(record, "trajectory")
        else None,
        expected_tools=None if expected is None else [ToolCall(**tool) for tool in expected])


def _check_tool_correctness(*, threshold: float, expected: list | None, evaluation_params: list | None,
                            **_: Any) -> None:
    check_threshold(threshold=threshold)
    if expected is not None:
        expected_list(expected, "param 'expected'", BadInputError)
    unknown = [p for p in evaluation_params or [] if p not in COMPARED]
    if unknown:
        raise BadInputError(f"param evaluation_params: {unknown} not known; DeepEval compares {', '.join(COMPARED)} "
                            "besides the tool's name")


@evaluator("deepeval/tool-correctness", version=VERSION, requires=("input", "trajectory"),
           outputs=outputs("expected tools the agent called / expected tools (DeepEval's matching)"),
           check=_check_tool_correctness,
           description=f"DeepEval's ToolCorrectnessMetric ({UPSTREAM}): the trajectory's tool calls against the "
                       "expected tools, scored in code (no judge).",
           params={"expected": "expected tools: names or {name, input_parameters, output} objects; unset to read "
                               "the reference's expected_tools (or tool_calls), else metadata expected_tools",
                   "evaluation_params": "what must match besides the name: input_parameters, output",
                   "should_exact_match": "DeepEval's exact match: the same tools, in order, or 0",
                   "should_consider_ordering": "DeepEval's ordering: the expected tools called in order (weighted "
                                               "longest common subsequence)",
                   "threshold": COMMON_PARAMS["threshold"], "strict_mode": COMMON_PARAMS["strict_mode"]})
async def tool_correctness(record: Record, *, expected: list | None = None, evaluation_params: list | None = None,
                           should_exact_match: bool = False, should_consider_ordering: bool = False,
                           threshold: float = 0.5, strict_mode: bool = False) -> list[Score]:
    wanted = expected_tool_fields(record, expected)
    if "input_parameters" in (evaluation_params or []) and not should_exact_match:
        _check_comparable(wanted, tool_call_fields(record))
    metric = deepeval_metrics.ToolCorrectnessMetric(
        threshold=threshold, evaluation_params=[ToolCallParams(p) for p in evaluation_params or []],
        model=NoModel("deepeval/tool-correctness"), should_exact_match=should_exact_match,
        should_consider_ordering=should_consider_ordering, strict_mode=strict_mode, async_mode=True,
        verbose_mode=False)
    return await measure(metric, None, agent_case(record, wanted))


def _check_comparable(expected: list[dict[str, Any]], called: list[dict[str, Any]]) -> None:
    """DeepEval compares the parameters of every expected and called tool of the same name, and fails with an
    AttributeError when one side has parameters and the other none: this names the tool instead."""
    for tool in expected:
        for call in called:
            if call["name"] == tool["name"] and ("input_parameters" in tool) != ("input_parameters" in call):
                lacking = "expected" if "input_parameters" not in tool else "called"
                raise ValueError(f"evaluation_params input_parameters: the {lacking} tool {tool['name']!r} has no "
                                 f"input_parameters to compare (DeepEval cannot compare a missing one); give them, "
                                 "or leave input_parameters out of evaluation_params")


@evaluator("deepeval/argument-correctness", version=VERSION, requires=("input", "trajectory", "judge"),
           outputs=outputs("tool calls whose arguments the judge finds right for the input / tool calls"),
           check=check_threshold,
           description=f"DeepEval's ArgumentCorrectnessMetric ({UPSTREAM}): the judge decides whether each tool "
                       "call's arguments address the input.",
           params=COMMON_PARAMS)
async def argument_correctness(record: Record, ctx: EvalContext, *, threshold: float = 0.5,
                               include_reason: bool = True, strict_mode: bool = False) -> list[Score]:
    model = JudgeLLM(ctx.require_judge(), template("argument-correctness"))
    metric = deepeval_metrics.ArgumentCorrectnessMetric(
        threshold=threshold, model=model, include_reason=include_reason, strict_mode=strict_mode, async_mode=True,
        verbose_mode=False)
    return await measure(metric, model, agent_case(record))


def _check_task(*, threshold: float, task: str | None, **_: Any) -> None:
    check_threshold(threshold=threshold)
    check_optional_text("task", task, MAX_TASK, "for the judge to read the task from the input")


@evaluator("deepeval/task-completion", version=VERSION, requires=("input", "output", "judge"),
           outputs=outputs("the judge's 0-1 verdict of how well the outcome achieves the task"),
           check=_check_task,
           description=f"DeepEval's TaskCompletionMetric ({UPSTREAM}): the judge reads the task and the outcome "
                       "from the input, the output and the tool calls, then grades the outcome against the task.",
           params={"task": "the task, when the input does not say it (unset: the judge reads it from the input)",
                   **COMMON_PARAMS})
async def task_completion(record: Record, ctx: EvalContext, *, task: str | None = None, threshold: float = 0.5,
                          include_reason: bool = True, strict_mode: bool = False) -> list[Score]:
    # The task is in the template key: an outcome judged against one task is never reused for another.
    model = JudgeLLM(ctx.require_judge(), f"{template('task-completion')}:{task or ''}")
    metric = deepeval_metrics.TaskCompletionMetric(
        threshold=threshold, task=task, model=model, include_reason=include_reason, strict_mode=strict_mode,
        async_mode=True, verbose_mode=False)
    return await measure(metric, model, agent_case(record))


AGENTIC = (tool_correctness, argument_correctness, task_completion)
