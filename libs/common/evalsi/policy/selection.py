"""Which completed traces a policy evaluates: the CEL selector, deterministic sampling and always-rules.

The selector sees, for each span of the trace in turn:
- ``resource``: the span's resource attributes (``resource["service.name"]``);
- ``span``: ``id``, ``parent_id``, ``name``, ``type`` (``agent``, ``llm``, ``tool``, ...), ``model``, ``tool``,
  ``error`` (bool), ``duration_s`` and ``attributes``;
- ``trace``: ``id``, ``project``, ``service``, ``session_id``, ``error`` (bool), ``error_count``, ``span_count``,
  ``latency_s``, ``input_tokens``, ``output_tokens``, ``cost_usd``, ``has_output`` (bool), ``metadata``.
A trace is selected when the selector is true for at least one span; a span for which it cannot be evaluated
(a missing key) does not select. An empty selector selects every trace. A selector is type-checked against these
fields when the policy is applied (evalsi.policy.expressions): an unknown field or a comparison of a string with a
number is refused then, not silently never selecting.

Sampling hashes the trace id (sha256, first 8 bytes as a fraction of 2**64), so every replica, in every
process, takes the same decision for the same trace. Always-rules sample a trace whatever the rate:
``trace.error``, ``feedback.negative`` and ``latency > <threshold>`` where the threshold is a number of seconds
or a duration (``latency > 2.5``, ``latency > 800ms``). The plan's ``latency > p99`` needs a window of recent
latencies per policy, which is not built yet; it is refused with a message saying so.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import celpy
from celpy import celtypes

from evalsi.cel import program
from evalsi.durations import parse_duration
from evalsi.errors import BadInputError
from evalsi.projects import DEFAULT_PROJECT
from evalsi.records import from_value
from evalsi.traces.assembly import assemble_record
from evalsi.traces.model import MappedSpan
from evalsi.v1alpha1.record_pb2 import STEP_STATUS_ERROR, Record, Step, StepType

from .expressions import SELECTOR, checked_expression

_LATENCY = re.compile(r"^\s*latency\s*>\s*(?P<threshold>\S+)\s*$")
_PERCENTILE = re.compile(r"^p\d{1,2}(\.\d+)?$")


def evaluate_cel(tree: Any, activation: Mapping[str, Any], functions: Mapping[str, Any] | None = None) -> Any:
    """The value of a compiled expression, or the ``celpy.CELEvalError`` it produced (never raised)."""
    runnable = program(tree, functions)
    try:
        return runnable.evaluate(dict(activation))
    except celpy.CELEvalError as exc:
        return exc
    except Exception as exc:  # a type mismatch inside the expression (e.g. comparing a string to a number)
        return celpy.CELEvalError(str(exc))


# --- the view of a trace -------------------------------------------------------------------------------------


def _step_type(value: int) -> str:
    return StepType.Name(value).removeprefix("STEP_TYPE_").lower()


def _span_view(step: Step) -> dict[str, Any]:
    return {
        "id": step.span_id or step.id,
        "parent_id": step.parent_id,
        "name": step.name,
        "type": _step_type(step.type),
        "model": step.model,
        "tool": step.tool_call.name,
        "error": step.status == STEP_STATUS_ERROR or bool(step.error),
        "duration_s": step.duration.ToNanoseconds() / 1e9,
        "attributes": {key: from_value(value) for key, value in step.attributes.items()},
    }


@dataclass(frozen=True)
class TraceView:
    """An assembled trace as policies see it: its Record, each span's resource, and joined late signals.

    ``resources`` maps a span id to its resource attributes; ``negative_feedback`` is set by whoever joins
    late signals (thumbs-down, a reopened ticket) to the trace.
    """

    record: Record
    resources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    negative_feedback: bool = False

    @classmethod
    def from_spans(
        cls, spans: Sequence[MappedSpan], *, project: str = DEFAULT_PROJECT, negative_feedback: bool = False
    ) -> TraceView:
        record = assemble_record(spans, project=project)
        return cls(record, {span.span_id: dict(span.resource) for span in spans}, negative_feedback)

    @property
    def trace_id(self) -> str:
        return self.record.provenance.trace_id or self.record.id

    @property
    def latency_s(self) -> float:
        return self.record.usage.latency.ToNanoseconds() / 1e9

    @property
    def error(self) -> bool:
        errors = self.record.metadata.get("error_count")
        if errors is not None and from_value(errors):
            return True
        return any(_span_view(step)["error"] for step in self.record.trajectory.steps)

    def trace_fields(self) -> dict[str, Any]:
        record = self.record
        metadata = {key: from_value(value) for key, value in record.metadata.items()}
        return {
            "id": self.trace_id,
            "project": record.provenance.project,
            "service": metadata.get("service.name", ""),
            "session_id": record.provenance.session_id,
            "error": self.error,
            "error_count": int(metadata.get("error_count", 0) or 0),
            "span_count": len(record.trajectory.steps),
            "latency_s": self.latency_s,
            "input_tokens": record.usage.input_tokens,
            "output_tokens": record.usage.output_tokens,
            "cost_usd": record.usage.cost_usd,
            "has_output": record.HasField("output"),
            "metadata": metadata,
        }

    def span_activations(self) -> list[dict[str, Any]]:
        trace = self.trace_fields()
        out = []
        for step in self.record.trajectory.steps:
            span = _span_view(step)
            resource = self.resources.get(span["id"], {})
            out.append({"resource": dict(resource), "span": span, "trace": trace})
        if not out:  # a record without a trajectory: the trace-level fields alone
            out.append({"resource": {}, "span": {}, "trace": trace})
        return out


# --- the selector --------------------------------------------------------------------------------------------


class Selector:
    """A compiled selector; ``matches(view)`` is true when it holds for at least one span."""

    def __init__(self, expression: str) -> None:
        self.expression = expression.strip()
        self._tree = checked_expression(self.expression, SELECTOR, what="a selector") if self.expression else None

    def matches(self, view: TraceView) -> bool:
        if self._tree is None:
            return True
        for activation in view.span_activations():
            value = evaluate_cel(self._tree, {k: celpy.json_to_cel(v) for k, v in activation.items()})
            if isinstance(value, celtypes.BoolType | bool) and bool(value):
                return True
        return False


# --- sampling ------------------------------------------------------------------------------------------------


def sample_fraction(trace_id: str) -> float:
    """A fraction in [0, 1) from the trace id alone: the same on every replica and in every process."""
    digest = hashlib.sha256(trace_id.strip().lower().encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True)
class AlwaysRule:
    """One always-evaluate rule: ``trace.error``, ``feedback.negative`` or ``latency > <seconds>``."""

    text: str
    kind: str  # error | feedback | latency
    threshold_s: float = 0.0

    def holds(self, view: TraceView) -> bool:
        if self.kind == "error":
            return view.error
        if self.kind == "feedback":
            return view.negative_feedback
        return view.latency_s > self.threshold_s


def parse_always(text: str) -> AlwaysRule:
    stripped = text.strip()
    if stripped == "trace.error":
        return AlwaysRule(stripped, "error")
    if stripped == "feedback.negative":
        return AlwaysRule(stripped, "feedback")
    match = _LATENCY.match(stripped)
    if match is not None:
        threshold = match.group("threshold")
        if _PERCENTILE.match(threshold):
            raise BadInputError(
                f"{text!r}: percentile thresholds need a window of recent latencies, which is not built yet; "
                "give a number of seconds or a duration, e.g. latency > 2.5 or latency > 800ms"
            )
        try:
            seconds = float(threshold)
        except ValueError:
            try:
                seconds = float(parse_duration(threshold).removesuffix("s"))
            except ValueError:
                raise BadInputError(
                    f"{text!r}: the threshold must be a number of seconds or a duration (2.5, 800ms, 3s)"
                ) from None
        if seconds < 0:
            raise BadInputError(f"{text!r}: the threshold must not be negative")
        return AlwaysRule(stripped, "latency", seconds)
    raise BadInputError(f"unknown rule {text!r}; accepted: trace.error, feedback.negative, latency > <seconds>")


@dataclass(frozen=True)
class SamplingDecision:
    sampled: bool
    reasons: tuple[str, ...]  # the always-rules that held, and "rate" when the hash fell under it
    fraction: float


def decide_sampling(view: TraceView, rate: float, always: Sequence[AlwaysRule] = ()) -> SamplingDecision:
    """Sampled when an always-rule holds or the trace id's fraction is below ``rate``."""
    fraction = sample_fraction(view.trace_id)
    reasons = [rule.text for rule in always if rule.holds(view)]
    if fraction < rate:
        reasons.append("rate")
    return SamplingDecision(bool(reasons), tuple(reasons), fraction)
