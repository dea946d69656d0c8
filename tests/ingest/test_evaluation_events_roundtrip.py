"""The policy service's OTel ``gen_ai.evaluation.result`` events, exported by the real OTLP/HTTP log exporter to
our own ingest: each arrives as a log row parented to the evaluated trace's root span, with its attributes."""

from __future__ import annotations

import asyncio

from evalsi.policy.exports import EVENT_NAME, GenAiEvaluationEvents
from evalsi.traces import OnlineScore
from evalsi.v1alpha1.record_pb2 import Record

TRACE, ROOT = "ab" * 16, "0000000000000007"


async def test_events_reach_ingest_joined_to_the_evaluated_trace(ingest) -> None:  # type: ignore[no-untyped-def]
    events = GenAiEvaluationEvents.to_otlp_http(f"{ingest.http_url}/v1/logs", service_name="evalsi-policy")
    record = Record(id=TRACE)
    record.provenance.trace_id, record.provenance.span_id = TRACE, ROOT
    scores = [
        OnlineScore(trace_id=TRACE, revision=2, policy="support", stage="polite", metric="polite",
                    evaluator="builtin/contains@1.0.0", outcome="scored", value=0.0, passed=False,
                    reason="no value found", scored_at=100.0),
        OnlineScore(trace_id=TRACE, revision=2, policy="support", stage="length", metric="length",
                    evaluator="builtin/length@1.0.0", outcome="skipped", reason="no content", scored_at=100.0),
    ]
    events.observe("default", "support", scores, record)
    # The exporter posts from its own thread; the receiver answers on this loop, so wait off the loop.
    await asyncio.to_thread(events.flush)
    await asyncio.to_thread(events.shutdown)
    (row,) = await ingest.store.get_spans("default", TRACE)
    assert row.parent_span_id == ROOT and row.mapper == "otel-log@1"
    attributes = {key: value for key, value in row.step.attributes.items()}
    assert attributes["gen_ai.evaluation.name"].string_value == "polite"
    assert attributes["gen_ai.evaluation.score.value"].number_value == 0.0
    assert attributes["gen_ai.evaluation.score.label"].string_value == "fail"
    assert attributes["evalsi.policy"].string_value == "support"
    assert row.step.name == EVENT_NAME  # skipped outcomes are not exported as events
