"""OpenTelemetry spans for a trial: one agent span, a child per model call and per tool call.

Every span carries ``evalsi.run_id``, ``evalsi.trial`` and ``evalsi.task_id``, and the OTel GenAI
semantic-convention attributes the project's own ingest maps back to trajectory steps (``gen_ai.operation.name``
``invoke_agent`` / ``chat`` / ``execute_tool``, ``gen_ai.request.model``, ``gen_ai.usage.*``,
``gen_ai.tool.name``, ``gen_ai.tool.call.*``, ``gen_ai.output.messages``). So an offline trial shows up in
the same trace views, and maps to the same steps, as production traffic.

Child spans are made when their exchange is over, with its recorded start and end times: a live trial and its
replay emit the same spans with the same timings. Tracing needs only the OpenTelemetry API (a ``Tracer`` is
passed in); without a tracer the harness runs untraced.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .models import ModelAnswer, ModelToolCall
from .toolbox import ToolOutcome

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

AGENT_NAME = "evalsi-harness"


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)


class TrialTracer:
    """The spans of one trial. ``started_at`` is the trial's Unix start; times passed in are offsets from it."""

    def __init__(self, tracer: Tracer | None, *, run_id: str, trial: int, task_id: str, provider: str, model: str,
                 started_at: float, replay: bool = False) -> None:
        self._tracer = tracer
        self._started_at = started_at
        self._provider = provider
        self._model = model
        self._tags: dict[str, Any] = {"evalsi.run_id": run_id, "evalsi.trial": trial, "evalsi.task_id": task_id}
        if replay:
            self._tags["evalsi.replay"] = True
        self._agent: Span | None = None
        if tracer is not None:
            self._agent = tracer.start_span(
                f"invoke_agent {AGENT_NAME}", start_time=_ns(started_at),
                attributes={**self._tags, "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT_NAME,
                            "gen_ai.provider.name": provider, "gen_ai.request.model": model},
            )

    @property
    def trace_id(self) -> str:
        if self._agent is None:
            return ""
        return format(self._agent.get_span_context().trace_id, "032x")

    def _child(self, name: str, start_s: float, duration_s: float, attributes: Mapping[str, Any],
               error: str | None = None) -> str:
        if self._tracer is None or self._agent is None:
            return ""
        from opentelemetry import trace

        span = self._tracer.start_span(
            name, context=trace.set_span_in_context(self._agent), start_time=_ns(self._started_at + start_s),
            attributes={**self._tags, **attributes},
        )
        if error is not None:
            span.set_status(trace.Status(trace.StatusCode.ERROR, error))
        span.end(end_time=_ns(self._started_at + start_s + duration_s))
        return format(span.get_span_context().span_id, "016x")

    def model_call(self, answer: ModelAnswer, start_s: float, duration_s: float) -> str:
        """The span of one model call; its span id ("" untraced)."""
        parts: list[dict[str, Any]] = [{"type": "text", "content": answer.text}] if answer.text else []
        parts += [{"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments}
                  for c in answer.tool_calls]
        output = [{"role": "assistant", "parts": parts, "finish_reason": answer.finish_reason}]
        return self._child(f"chat {self._model}", start_s, duration_s, {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self._provider,
            "gen_ai.request.model": self._model,
            "gen_ai.response.model": answer.model or self._model,
            "gen_ai.usage.input_tokens": answer.input_tokens,
            "gen_ai.usage.output_tokens": answer.output_tokens,
            "gen_ai.response.finish_reasons": [answer.finish_reason] if answer.finish_reason else [],
            "gen_ai.output.messages": json.dumps(output, ensure_ascii=False),
        })

    def tool_call(self, call: ModelToolCall, outcome: ToolOutcome, start_s: float, duration_s: float) -> str:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.call.arguments": json.dumps(call.arguments, ensure_ascii=False),
            "evalsi.tool.mocked": outcome.mocked,
        }
        if outcome.result.error is None:
            attributes["gen_ai.tool.call.result"] = json.dumps(outcome.result.value, ensure_ascii=False)
        if outcome.fault is not None:
            attributes["evalsi.fault"] = outcome.fault
        return self._child(f"execute_tool {call.name}", start_s, duration_s, attributes, error=outcome.result.error)

    def end(self, stop_reason: str, elapsed_s: float, error: str | None) -> None:
        if self._agent is None:
            return
        self._agent.set_attribute("evalsi.harness.stop_reason", stop_reason)
        if error is not None:
            from opentelemetry import trace

            self._agent.set_status(trace.Status(trace.StatusCode.ERROR, error))
        self._agent.end(end_time=_ns(self._started_at + elapsed_s))
