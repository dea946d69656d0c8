"""The canonical Record of a trial: the task, the final answer, and the trajectory the agent pack scores.

Steps mirror the trial's spans: a root ``AGENT`` step (id ``agent``), an ``LLM`` step per model call
(``llm-<step>``) with its usage and cost, a ``TOOL`` step per tool call (``tool-<step>-<n>``) with name,
arguments, result and status. Ids are deterministic so a replay builds the same Record; only ``span_id`` and
``trace_id`` (set when traced) name the run's own spans.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format

from evalsi.records import from_value, to_content, to_value
from evalsi.v1alpha1.record_pb2 import (
    STEP_STATUS_ERROR,
    STEP_STATUS_OK,
    STEP_TYPE_AGENT,
    STEP_TYPE_LLM,
    STEP_TYPE_TOOL,
    TOOL_CALL_STATUS_ERROR,
    TOOL_CALL_STATUS_OK,
    Content,
    Record,
    Step,
    Usage,
)

from .models import ModelAnswer, ModelToolCall
from .tasks import Task
from .toolbox import ToolOutcome

ROOT_ID = "agent"


def _timestamp(step: Step, started_at: float, start_s: float, duration_s: float) -> None:
    step.start_time.FromNanoseconds(round((started_at + start_s) * 1e9))
    step.duration.FromNanoseconds(round(duration_s * 1e9))


class TrajectoryBuilder:
    def __init__(self, task: Task, *, started_at: float, model: str) -> None:
        self.task = task
        self.started_at = started_at
        self.model = model
        self.steps: list[Step] = []

    def model_step(self, step: int, answer: ModelAnswer, cost_usd: float | None, start_s: float, duration_s: float,
                   span_id: str) -> None:
        out = Step(id=f"llm-{step}", parent_id=ROOT_ID, type=STEP_TYPE_LLM, name=f"chat {self.model}",
                   model=answer.model or self.model, status=STEP_STATUS_OK, span_id=span_id)
        _timestamp(out, self.started_at, start_s, duration_s)
        out.output.CopyFrom(to_content({"messages": [answer.message()]}))
        out.usage.CopyFrom(Usage(input_tokens=answer.input_tokens, output_tokens=answer.output_tokens,
                                 total_tokens=answer.input_tokens + answer.output_tokens, cost_usd=cost_usd))
        out.usage.latency.FromNanoseconds(round(duration_s * 1e9))
        if answer.finish_reason:
            out.attributes["gen_ai.response.finish_reasons"].CopyFrom(to_value([answer.finish_reason]))
        self.steps.append(out)

    def tool_step(self, step: int, n: int, call: ModelToolCall, outcome: ToolOutcome, start_s: float,
                  duration_s: float, span_id: str) -> None:
        result = outcome.result
        out = Step(id=f"tool-{step}-{n}", parent_id=ROOT_ID, type=STEP_TYPE_TOOL, name=call.name, span_id=span_id,
                   status=STEP_STATUS_OK if result.error is None else STEP_STATUS_ERROR, error=result.error or "")
        _timestamp(out, self.started_at, start_s, duration_s)
        out.tool_call.id = call.id
        out.tool_call.name = call.name
        out.tool_call.arguments.CopyFrom(to_value(call.arguments))
        out.input.CopyFrom(Content(json=to_value(call.arguments)))
        if result.error is None:
            out.tool_call.status = TOOL_CALL_STATUS_OK
            out.tool_call.result.CopyFrom(to_value(_json(result.value)))
            out.output.CopyFrom(Content(json=to_value(_json(result.value))))
        else:
            out.tool_call.status = TOOL_CALL_STATUS_ERROR
            out.tool_call.error = result.error
        if outcome.mocked:
            out.attributes["evalsi.tool.mocked"].bool_value = True
        if outcome.fault is not None:
            out.attributes["evalsi.fault"].string_value = outcome.fault
        if result.sandbox_event is not None:  # a sandbox policy event (§11): safety evaluators count these
            out.attributes["evalsi.sandbox.event"].CopyFrom(to_value(dict(result.sandbox_event)))
        self.steps.append(out)

    def record(self, *, run_id: str, trial: int, provider: str, final: str, stop_reason: str, error: str | None,
               elapsed_s: float, usage: Usage, trace_id: str, extra: Mapping[str, Any]) -> Record:
        root = Step(id=ROOT_ID, type=STEP_TYPE_AGENT, name="evalsi-harness", model=self.model,
                    status=STEP_STATUS_ERROR if error else STEP_STATUS_OK, error=error or "")
        _timestamp(root, self.started_at, 0.0, elapsed_s)
        root.attributes["evalsi.harness.stop_reason"].string_value = stop_reason
        record = Record(id=self.task.id)
        record.input.CopyFrom(to_content(self.task.input))
        # Always an output, empty when the agent gave none: a budget-exhausted trial must fail an outcome
        # evaluator, not be skipped by it for want of an output.
        record.output.CopyFrom(Content(text=final))
        if self.task.reference is not None:
            record.reference.CopyFrom(to_content(self.task.reference))
        record.trajectory.steps.extend([root, *self.steps])
        record.trajectory.trace_id = trace_id
        record.usage.CopyFrom(usage)
        record.usage.latency.FromNanoseconds(round(elapsed_s * 1e9))
        for key, value in {**self.task.metadata, **extra}.items():
            record.metadata[key].CopyFrom(to_value(value))
        record.provenance.run_id = run_id
        record.provenance.trial = trial
        record.provenance.sample_id = self.task.id
        record.provenance.target = f"evalsi-harness/{provider}:{self.model}"
        record.provenance.trace_id = trace_id
        return record


def _json(value: Any) -> Any:
    """Tool values are JSON already; this guards the Record against a float NaN or a stray object."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        return str(value)


def record_row(record: Record) -> dict[str, Any]:
    """A Record as one line of a records file that ``evalsi eval`` and ``evaluate()`` read back (the dataset
    row conventions: content as text / ``{"json"}`` / ``{"messages"}``, ``usage``, ``trajectory``, ``trial``)."""
    row: dict[str, Any] = {"id": record.id, "input": _content_row(record.input),
                           "output": _content_row(record.output)}
    if record.HasField("reference"):
        row["reference"] = _content_row(record.reference)
    row["metadata"] = {key: from_value(value) for key, value in record.metadata.items()}
    usage = record.usage
    row["usage"] = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                    "total_tokens": usage.total_tokens, "latency_s": usage.latency.ToNanoseconds() / 1e9}
    if usage.HasField("cost_usd"):  # an unknown cost stays unknown when the file is read back
        row["usage"]["cost_usd"] = usage.cost_usd
    row["trajectory"] = json_format.MessageToDict(record.trajectory, preserving_proto_field_name=True)
    row["trial"] = record.provenance.trial
    return row


def _content_row(content: Content) -> Any:
    kind = content.WhichOneof("kind")
    if kind == "text":
        return content.text
    if kind == "messages":
        return {"messages": [json_format.MessageToDict(m, preserving_proto_field_name=True)
                             for m in content.messages.messages]}
    return {"json": from_value(content.json)}
