"""A step's cost as instrumentations send it (OpenInference ``llm.cost.*``, USD), kept through the receivers and
the trace stores, and summed on the trace: unknown (unset) only when no step has one, never a guessed zero."""

from __future__ import annotations

import asyncio

import pytest
from ingest_helpers import make_span
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace import Tracer
from test_receivers_sdk import genai_trace, only_trace, send

from evalsi.ingest import map_span
from evalsi.ingest.genai_mapper import set_cost, to_cost
from evalsi.stores.traces import ClickHouseTraceStore, SqliteTraceStore
from evalsi.v1alpha1.record_pb2 import Step


def priced_trace(tracer: Tracer) -> None:
    """An agent whose first LLM call reports its total, the second only its parts, and a tool with no cost."""
    with tracer.start_as_current_span("agent", attributes={"openinference.span.kind": "AGENT", "input.value": "hi"}):
        with tracer.start_as_current_span("ChatCompletion", attributes={
            "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini", "llm.token_count.prompt": 12,
            "llm.token_count.completion": 5, "llm.cost.total": 0.0125, "llm.cost.prompt": 0.01,
        }):
            pass
        with tracer.start_as_current_span("lookup", attributes={"openinference.span.kind": "TOOL",
                                                                 "tool.name": "lookup"}):
            pass
        with tracer.start_as_current_span("ChatCompletion", attributes={
            "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini", "llm.token_count.prompt": 20,
            "llm.token_count.completion": 3, "llm.cost.prompt": 0.002, "llm.cost.completion": 0.0005,
        }):
            pass


async def test_openinference_cost_from_the_sdk_exporter(ingest) -> None:  # type: ignore[no-untyped-def]
    exporter = GrpcExporter(endpoint=ingest.grpc_target, insecure=True, timeout=5)
    await asyncio.to_thread(send, exporter, priced_trace, {"service.name": "priced"})
    record = await only_trace(ingest.store, "default")
    costs = [s.usage.cost_usd if s.usage.HasField("cost_usd") else None for s in record.trajectory.steps]
    # The total wins over the parts; the parts add up when no total came; the tool and agent have none.
    assert costs == [None, pytest.approx(0.0125), None, pytest.approx(0.0025)]
    assert record.usage.HasField("cost_usd") and record.usage.cost_usd == pytest.approx(0.015)


async def test_no_cost_sent_reads_unknown(ingest) -> None:  # type: ignore[no-untyped-def]
    exporter = HttpExporter(endpoint=f"{ingest.http_url}/v1/traces", timeout=5)
    await asyncio.to_thread(send, exporter, genai_trace, {"service.name": "travel-agent"})
    record = await only_trace(ingest.store, "default")
    assert record.usage.input_tokens == 250  # the tokens came; no step said what they cost
    assert not record.usage.HasField("cost_usd")
    assert not any(step.usage.HasField("cost_usd") for step in record.trajectory.steps)


async def test_cost_kept_by_both_trace_stores(trace_store: SqliteTraceStore | ClickHouseTraceStore) -> None:
    root = make_span({"openinference.span.kind": "AGENT"}, span_id=1)
    free = make_span({"openinference.span.kind": "LLM", "llm.cost.total": 0}, span_id=2, parent=1, start=1_100)
    paid = make_span({"openinference.span.kind": "LLM", "llm.cost.total": "0.25"}, span_id=3, parent=1, start=1_200)
    await trace_store.consume("p", [map_span(s, {"service.name": "svc"}) for s in (root, free, paid)])
    (summary,) = (await trace_store.list_traces("p")).traces
    record = await trace_store.get_trace("p", summary.trace_id)
    assert record is not None
    steps = record.trajectory.steps
    # A free call (0) is a known cost, counted; the agent's is unknown.
    assert [s.usage.HasField("cost_usd") for s in steps] == [False, True, True]
    assert record.usage.cost_usd == pytest.approx(0.25) and record.usage.HasField("cost_usd")


@pytest.mark.parametrize(("value", "expected"), [
    (0.5, 0.5), (0, 0.0), ("0.125", 0.125), (None, None), ("free", None), (-1.0, None), (float("inf"), None),
    (float("nan"), None), ([1.0], None),
])
def test_to_cost(value: object, expected: float | None) -> None:
    assert to_cost(value) == expected


def test_set_cost_leaves_unknown_unset() -> None:
    step = Step()
    set_cost(step, "n/a", None, "bad")
    assert not step.usage.HasField("cost_usd")
    set_cost(step, None, 0.25, "bad")  # the one part that is a cost
    assert step.usage.cost_usd == 0.25
