"""The agent loop: messages -> model -> tool calls (in parallel) -> results back, until it stops.

A trial stops with one reason (``TrialResult.stop_reason``, also the Record's ``harness.stop_reason``):

- ``final_answer``: the model answered without asking for a tool;
- ``max_steps``: it had made ``max_steps`` model calls and still wanted tools;
- ``budget_tokens`` / ``budget_usd`` / ``budget_wall_clock``: a budget ran out (tokens and dollars are checked
  before each model call, the wall clock before each call and during every exchange);
- ``error``: the provider failed after its retries, or a tool server went away: an infrastructure error
  (``TrialResult.error``), reported apart and never a score.

Running out of a budget is a result: the Record is complete up to there and its output is empty.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evalsi.errors import InfraError
from evalsi.v1alpha1.record_pb2 import Record, Usage

from .backends import Backend, PlannedCall, WallClockExceeded
from .cassette import Cassette
from .config import HarnessConfig
from .record import TrajectoryBuilder
from .tasks import Task
from .tracing import TrialTracer

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

STOP_REASONS = ("final_answer", "max_steps", "budget_tokens", "budget_usd", "budget_wall_clock", "error")


@dataclass(frozen=True)
class TrialResult:
    record: Record
    stop_reason: str
    error: str | None = None
    cassette: Cassette | None = None  # live trials: what was recorded
    messages: tuple[dict[str, Any], ...] = ()  # the conversation at the end, system prompt included

    @property
    def infra_error(self) -> bool:
        return self.stop_reason == "error"


def _budget_stop(config: HarnessConfig, backend: Backend, model_calls: int, tokens: int, usd: float) -> str | None:
    if model_calls >= config.max_steps:
        return "max_steps"
    budget = config.budget
    if budget.tokens is not None and tokens >= budget.tokens:
        return "budget_tokens"
    if budget.usd is not None and usd >= budget.usd:
        return "budget_usd"
    if backend.wall_clock_exceeded(budget.wall_clock_s):
        return "budget_wall_clock"
    return None


async def run_trial(
    task: Task,
    backend: Backend,
    config: HarnessConfig,
    *,
    run_id: str,
    trial: int,
    tracer: Tracer | None = None,
    history: Sequence[Mapping[str, Any]] = (),
) -> TrialResult:
    """One trial of ``task``; ``history`` is an earlier conversation the task continues (multi-turn cases)."""
    model = config.model.model
    spans = TrialTracer(tracer, run_id=run_id, trial=trial, task_id=task.id, provider=config.model.provider,
                        model=model, started_at=backend.started_at, replay=backend.recording is None)
    builder = TrajectoryBuilder(task, started_at=backend.started_at, model=model)
    messages: list[dict[str, Any]] = [{"role": "system", "content": config.system}] if config.system else []
    messages += [dict(m) for m in history] + task.messages()
    tools = [spec.to_dict() for spec in backend.tools]
    calls_per_tool: Counter[str] = Counter()
    input_tokens = output_tokens = 0
    usd = 0.0
    model_calls = tool_calls = 0
    final = ""
    stop_reason = ""
    error: str | None = None
    try:
        while True:
            stop = _budget_stop(config, backend, model_calls, input_tokens + output_tokens, usd)
            if stop is not None:
                stop_reason = stop
                break
            model_calls += 1
            step = model_calls
            timed = await backend.model(step, {"model": model, "messages": messages, "tools": tools})
            answer = timed.value
            cost = config.pricing.cost(answer.input_tokens, answer.output_tokens) if config.pricing else 0.0
            input_tokens += answer.input_tokens
            output_tokens += answer.output_tokens
            usd += cost
            span_id = spans.model_call(answer, timed.start_s, timed.duration_s)
            builder.model_step(step, answer, cost if config.pricing else None, timed.start_s, timed.duration_s,
                               span_id)
            messages.append(answer.message())
            if not answer.tool_calls:
                final, stop_reason = answer.text, "final_answer"
                break
            planned = []
            for call in answer.tool_calls:
                calls_per_tool[call.name] += 1
                planned.append(PlannedCall(call, calls_per_tool[call.name]))
            outcomes = await backend.tools_step(step, planned)
            for n, (plan, done) in enumerate(zip(planned, outcomes, strict=True), 1):
                tool_calls += 1
                call, outcome = plan.call, done.value
                span_id = spans.tool_call(call, outcome, done.start_s, done.duration_s)
                builder.tool_step(step, n, call, outcome, done.start_s, done.duration_s, span_id)
                messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name,
                                 "content": outcome.result.text, "is_error": outcome.result.error is not None})
    except WallClockExceeded:
        stop_reason = "budget_wall_clock"
    except InfraError as exc:
        stop_reason, error = "error", str(exc)
    elapsed = backend.end(stop_reason, error)
    spans.end(stop_reason, elapsed, error)
    usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=input_tokens + output_tokens)
    if config.pricing:  # without prices the cost is unknown, not zero
        usage.cost_usd = usd
    extra: dict[str, Any] = {"harness.stop_reason": stop_reason, "harness.model_calls": model_calls,
                             "harness.tool_calls": tool_calls}
    if error is not None:
        extra["harness.error"] = error
    record = builder.record(run_id=run_id, trial=trial, provider=config.model.provider, final=final,
                            stop_reason=stop_reason, error=error, elapsed_s=elapsed, usage=usage,
                            trace_id=spans.trace_id, extra=extra)
    return TrialResult(record=record, stop_reason=stop_reason, error=error, cassette=backend.recording,
                       messages=tuple(messages))
