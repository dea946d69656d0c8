"""DeepEval's trace metrics as Evals.si evaluators, judged: plan adherence, plan quality and step efficiency read the
agent's run as DeepEval's trace (``LLMTestCase._trace_dict``, which DeepEval fills from ``@observe`` spans). Here the
trace is written from the record's trajectory (``traces.trace_dict``), so a record from any source is judged as
DeepEval would judge the same run traced by its own tracer. Runs in DeepEval's virtualenv."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from deepeval import metrics as deepeval_metrics  # type: ignore[import-not-found]
from deepeval.test_case import LLMTestCase, ToolCall  # type: ignore[import-not-found]

from evalsi.adapters.deepeval import UPSTREAM
from evalsi.adapters.deepeval.cases import tool_call_fields
from evalsi.adapters.deepeval.judge_model import JudgeLLM
from evalsi.adapters.deepeval.scoring import COMMON_PARAMS, VERSION, check_threshold, measure, outputs, template
from evalsi.adapters.deepeval.traces import request_text, trace_dict
from evalsi.evaluators import EvalContext, Evaluator, evaluator
from evalsi.records import content_text
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score


@dataclass(frozen=True)
class TracedSpec:
    """A DeepEval metric judging the agent's trace."""

    slug: str
    cls: str
    about: str


TRACED = (
    TracedSpec("plan-adherence", "PlanAdherenceMetric",
               about="the judge's 0-1 grade of how strictly the trace's steps follow the agent's plan (1 when the "
                     "trace holds no plan)"),
    TracedSpec("plan-quality", "PlanQualityMetric",
               about="the judge's 0-1 grade of the agent's plan for the task (1 when the trace holds no plan)"),
    TracedSpec("step-efficiency", "StepEfficiencyMetric",
               about="the judge's 0-1 grade of how directly the trace's steps carry out the task"),
)


def traced_case(record: Record) -> LLMTestCase:
    """The record's ``LLMTestCase`` with its trajectory as DeepEval's trace (and its tool calls, which DeepEval's
    test case from a trace holds too)."""
    trace = trace_dict(record)
    calls = tool_call_fields(record)
    case = LLMTestCase(input=request_text(record), actual_output=content_text(record.output),
                       tools_called=[ToolCall(**call) for call in calls] or None)
    case._trace_dict = trace  # DeepEval's own evaluate() sets this private field from the @observe'd run
    return case


def traced_evaluator(spec: TracedSpec) -> Evaluator:
    """The evaluator ``deepeval/<slug>`` measuring each record's trajectory with DeepEval's ``spec.cls``."""
    make: Callable[..., Any] = getattr(deepeval_metrics, spec.cls)

    @evaluator(f"deepeval/{spec.slug}", version=VERSION, requires=("input", "output", "trajectory", "judge"),
               outputs=outputs(spec.about), check=check_threshold,
               description=f"DeepEval's {spec.cls} ({UPSTREAM}) over the record's trajectory written as DeepEval's "
                           "trace, its model calls answered by the run's judge.",
               params=COMMON_PARAMS)
    async def measured(record: Record, ctx: EvalContext, *, threshold: float = 0.5, include_reason: bool = True,
                       strict_mode: bool = False) -> list[Score]:
        case = traced_case(record)
        model = JudgeLLM(ctx.require_judge(), template(spec.slug))
        # eval_mode "llm": DeepEval's judge-model chain; its experimental "system one" mode asks another model.
        metric = make(threshold=threshold, model=model, eval_mode="llm", include_reason=include_reason,
                      strict_mode=strict_mode, async_mode=True, verbose_mode=False)
        return await measure(metric, model, case)

    return measured


TRACED_EVALUATORS = tuple(traced_evaluator(spec) for spec in TRACED)
