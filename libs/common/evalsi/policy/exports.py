"""Where online scores go besides the trace store: Prometheus metrics and OTel ``gen_ai.evaluation.result`` events.

- ``PrometheusScores``: ``evalsi_online_scores_total{project,policy,metric,outcome}`` (every stored outcome,
  skipped and errors included) and ``evalsi_online_score{project,policy,metric}``, a histogram of scored values
  (its ``_sum / _count`` is the mean), on the service's ``/metrics``.
- ``GenAiEvaluationEvents``: one OTel log record per scored value, event name ``gen_ai.evaluation.result``, with
  ``gen_ai.evaluation.name``, ``gen_ai.evaluation.score.value`` / ``.score.label`` and
  ``gen_ai.evaluation.explanation``, parented to the evaluated trace's root span (trace and span ids) as the
  GenAI conventions ask, exported over OTLP/HTTP to a configured endpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from evalsi.service.otel_events import OtelLogEvents
from evalsi.traces.model import SCORED, OnlineScore
from evalsi.v1alpha1.record_pb2 import Record

EVENT_NAME = "gen_ai.evaluation.result"
_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 2.0, 5.0, 10.0, 100.0, float("inf"))


class PrometheusScores:
    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ("project", "policy", "metric")
        self.outcomes = Counter("evalsi_online_scores", "Online evaluation outcomes stored, by outcome",
                                (*labels, "outcome"), registry=registry)
        self.values = Histogram("evalsi_online_score", "Scored values of online evaluations (pass/fail as 1/0)",
                                labels, buckets=_BUCKETS, registry=registry)

    def observe(self, project: str, policy: str, scores: Sequence[OnlineScore], record: Record) -> None:
        for score in scores:
            self.outcomes.labels(project, policy, score.metric, score.outcome).inc()
            if score.outcome == SCORED and score.value is not None:
                self.values.labels(project, policy, score.metric).observe(score.value)


class GenAiEvaluationEvents(OtelLogEvents):
    """``gen_ai.evaluation.result`` events, parented to the evaluated span, through an OTel ``LoggerProvider``."""

    SCOPE = "evalsi.policy"

    def observe(self, project: str, policy: str, scores: Sequence[OnlineScore], record: Record) -> None:
        from opentelemetry._logs import SeverityNumber
        from opentelemetry.trace import TraceFlags

        trace_id, span_id = _otel_id(record.provenance.trace_id), _otel_id(record.provenance.span_id)
        for score in scores:
            if score.outcome != SCORED:
                continue
            attributes: dict[str, Any] = {"gen_ai.evaluation.name": score.metric, "evalsi.project": project,
                                          "evalsi.policy": policy, "evalsi.evaluator": score.evaluator,
                                          "evalsi.trace.revision": score.revision}
            if score.value is not None:
                attributes["gen_ai.evaluation.score.value"] = score.value
            label = score.label or ("pass" if score.passed else "fail" if score.passed is not None else "")
            if label:
                attributes["gen_ai.evaluation.score.label"] = label
            if score.reason:
                attributes["gen_ai.evaluation.explanation"] = score.reason
            self._logger.emit(event_name=EVENT_NAME, severity_number=SeverityNumber.INFO, attributes=attributes,
                              timestamp=int(score.scored_at * 1e9), **_parent(trace_id, span_id, TraceFlags))



def _otel_id(value: str) -> int | None:
    """A hex trace or span id as OTel's integer; None when absent or invalid (OTel ids are never zero)."""
    try:
        number = int(value, 16)
    except ValueError:
        return None
    return number or None


def _parent(trace_id: int | None, span_id: int | None, flags: Any) -> dict[str, Any]:
    """The evaluated span as the event's context (a non-recording span carrying the trace's ids)."""
    if trace_id is None or span_id is None:
        return {}
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext

    context = SpanContext(trace_id=trace_id, span_id=span_id, is_remote=True, trace_flags=flags(flags.SAMPLED))
    return {"context": trace.set_span_in_context(NonRecordingSpan(context))}
