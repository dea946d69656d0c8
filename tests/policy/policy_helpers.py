"""Traces and a registry for the policy tests."""

from __future__ import annotations

from typing import Any

from evalsi.evaluators import Pack, Registry, evaluator
from evalsi.policy import TraceView
from evalsi.traces import MappedSpan
from evalsi.v1alpha1.record_pb2 import STEP_STATUS_ERROR, STEP_TYPE_AGENT, STEP_TYPE_LLM, Content, Step


@evaluator("test/pii-leak")
def pii_leak(record: Any) -> bool:
    return True


@evaluator("test/llm-judge")
def llm_judge(record: Any, *, rubric: str = "helpfulness") -> float:
    return 0.5


REGISTRY = Registry([Pack("test", (pii_leak, llm_judge))])


def span(trace_id: str, span_id: str, parent: str = "", *, kind: int = STEP_TYPE_AGENT, error: bool = False,
         start: int = 0, end: int = 500_000_000, service: str = "support-agent", output: str = "") -> MappedSpan:
    step = Step(id=span_id, span_id=span_id, parent_id=parent, type=kind, name=f"s{span_id}")
    if error:
        step.status = STEP_STATUS_ERROR
    if output:
        step.output.CopyFrom(Content(text=output))
    return MappedSpan(
        trace_id=trace_id, span_id=span_id, parent_span_id=parent, name=f"s{span_id}", start_ns=start, end_ns=end,
        error=error, session_id="", mapper="generic@1", service_name=service, step=step,
        resource={"service.name": service},
    )


def trace(trace_id: str = "0af7651916cd43dd8448eb211c80319c", **kwargs: Any) -> TraceView:
    negative = kwargs.pop("negative_feedback", False)
    spans = [span(trace_id, "a" * 16, **kwargs), span(trace_id, "b" * 16, "a" * 16, kind=STEP_TYPE_LLM)]
    return TraceView.from_spans(spans, project="support", negative_feedback=negative)
