"""The real OpenTelemetry SDK exporters (OTLP/HTTP and OTLP/gRPC) into both receivers, then the stored trajectory.

Attributes are set by hand through the SDK tracer, in the shape each convention's instrumentations emit them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Tracer, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import Status, StatusCode

from evalsi.ingest import Completer
from evalsi.records import from_value
from evalsi.stores.traces import SqliteTraceStore
from evalsi.v1alpha1.record_pb2 import (
    STEP_STATUS_ERROR,
    STEP_TYPE_AGENT,
    STEP_TYPE_CHAIN,
    STEP_TYPE_GENERIC,
    STEP_TYPE_LLM,
    STEP_TYPE_RETRIEVAL,
    STEP_TYPE_TOOL,
    Record,
)


def genai_trace(tracer: Tracer) -> None:
    with tracer.start_as_current_span("invoke_agent travel", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel", "gen_ai.conversation.id": "conv-1",
    }):
        with tracer.start_as_current_span("chat gpt-4o", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
            "gen_ai.response.model": "gpt-4o-2024-08-06",
            "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 20,
            "gen_ai.input.messages": json.dumps([
                {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}]),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}]}]),
        }):
            pass
        with tracer.start_as_current_span("execute_tool get_weather", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": "call_1", "gen_ai.tool.call.arguments": '{"city": "Paris"}',
            "gen_ai.tool.call.result": '{"temp_c": 21}',
        }):
            pass
        with tracer.start_as_current_span("chat gpt-4o", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.input_tokens": 150, "gen_ai.usage.output_tokens": 30,
            "gen_ai.output.messages": json.dumps([
                {"role": "assistant", "parts": [{"type": "text", "content": "It is 21°C in Paris."}]}]),
        }):
            pass


def openinference_trace(tracer: Tracer) -> None:
    with tracer.start_as_current_span("agent", attributes={
        "openinference.span.kind": "AGENT", "input.value": "What is 2+2?", "output.value": "4", "session.id": "s-9",
    }):
        with tracer.start_as_current_span("retrieve", attributes={
            "openinference.span.kind": "RETRIEVER", "input.value": "arithmetic",
            "retrieval.documents.0.document.content": "2+2=4",
        }):
            pass
        with tracer.start_as_current_span("ChatCompletion", attributes={
            "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini",
            "llm.token_count.prompt": 12, "llm.token_count.completion": 5, "llm.token_count.total": 17,
            "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": "What is 2+2?",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "calculator",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"expr": "2+2"}',
        }):
            pass
        with tracer.start_as_current_span("calculator", attributes={
            "openinference.span.kind": "TOOL", "tool.name": "calculator", "tool.parameters": '{"type": "object"}',
            "input.value": '{"expr": "2+2"}', "input.mime_type": "application/json", "output.value": "4",
        }):
            pass
        with tracer.start_as_current_span("ChatCompletion", attributes={
            "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini",
            "llm.token_count.prompt": 20, "llm.token_count.completion": 3,
            "llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": "4",
        }):
            pass


def openllmetry_trace(tracer: Tracer) -> None:
    with tracer.start_as_current_span("plan_trip.workflow", attributes={
        "traceloop.span.kind": "workflow", "traceloop.entity.name": "plan_trip",
        "traceloop.entity.input": '{"args": [], "kwargs": {"city": "NYC"}}',
        "traceloop.association.properties.session_id": "sess-3",
    }):
        with tracer.start_as_current_span("openai.chat", attributes={
            "gen_ai.system": "openai", "llm.request.type": "chat", "gen_ai.request.model": "gpt-4o",
            "gen_ai.response.model": "gpt-4o-2024-08-06", "gen_ai.usage.prompt_tokens": 40,
            "gen_ai.usage.completion_tokens": 10, "llm.usage.total_tokens": 50,
            "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "Book a flight to NYC",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.tool_calls.0.name": "book_flight",
            "gen_ai.completion.0.tool_calls.0.arguments": '{"to": "NYC"}',
        }):
            pass
        with tracer.start_as_current_span("book_flight.tool", attributes={
            "traceloop.span.kind": "tool", "traceloop.entity.name": "book_flight",
            "traceloop.entity.input": '{"args": [], "kwargs": {"to": "NYC"}}',
            "traceloop.entity.output": '"booked"',
        }) as span:
            span.set_status(Status(StatusCode.ERROR, "seat map unavailable"))
        with tracer.start_as_current_span("SELECT bookings", attributes={
            "db.system": "postgresql", "db.rows": 3, "db.cached": False, "db.tags": ["a", "b"], "db.ratio": 0.5,
        }):
            pass
        with tracer.start_as_current_span("openai.chat", attributes={
            "gen_ai.system": "openai", "llm.request.type": "chat", "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.prompt_tokens": 60, "gen_ai.usage.completion_tokens": 12,
            "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "Booking failed, try later.",
        }):
            pass


def send(exporter: SpanExporter, emit: Callable[[Tracer], None], resource: dict[str, str]) -> None:
    provider = TracerProvider(resource=Resource.create(resource))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        emit(provider.get_tracer("evalsi-tests"))
    finally:
        provider.shutdown()


async def only_trace(store: SqliteTraceStore, project: str) -> Record:
    (summary,) = (await store.list_traces(project)).traces
    record = await store.get_trace(project, summary.trace_id)
    assert record is not None
    return record


def check_genai(record: Record) -> None:
    steps = record.trajectory.steps
    assert [s.type for s in steps] == [STEP_TYPE_AGENT, STEP_TYPE_LLM, STEP_TYPE_TOOL, STEP_TYPE_LLM]
    assert steps[0].name == "travel" and all(s.parent_id == steps[0].span_id for s in steps[1:])
    assert [s.model for s in steps] == ["", "gpt-4o-2024-08-06", "", "gpt-4o"]
    assert steps[1].output.messages.messages[0].tool_calls[0].name == "get_weather"
    assert steps[2].tool_call.name == "get_weather" and from_value(steps[2].tool_call.arguments) == {"city": "Paris"}
    assert from_value(steps[2].tool_call.result) == {"temp_c": 21}
    assert (record.usage.input_tokens, record.usage.output_tokens, record.usage.total_tokens) == (250, 50, 300)
    assert record.input.text == "Weather in Paris?" and record.output.text == "It is 21°C in Paris."
    assert record.trajectory.session_id == "conv-1"
    assert from_value(record.metadata["service.name"]) == "travel-agent"


@pytest.mark.parametrize("compression", [Compression.Gzip, Compression.NoCompression])
async def test_http_exporter_genai(ingest, compression: Compression) -> None:  # type: ignore[no-untyped-def]
    exporter = HttpExporter(endpoint=f"{ingest.http_url}/v1/traces", compression=compression, timeout=5,
                            headers={"x-evalsi-project": "shop"})
    await asyncio.to_thread(send, exporter, genai_trace, {"service.name": "travel-agent"})
    check_genai(await only_trace(ingest.store, "shop"))
    assert (await ingest.store.list_traces("default")).traces == []


async def test_grpc_exporter_genai_project_from_resource(ingest) -> None:  # type: ignore[no-untyped-def]
    exporter = GrpcExporter(endpoint=ingest.grpc_target, insecure=True, timeout=5, compression=grpc.Compression.Gzip)
    await asyncio.to_thread(send, exporter, genai_trace, {"service.name": "travel-agent", "evalsi.project": "ops"})
    check_genai(await only_trace(ingest.store, "ops"))


async def test_grpc_exporter_openinference(ingest) -> None:  # type: ignore[no-untyped-def]
    exporter = GrpcExporter(endpoint=ingest.grpc_target, insecure=True, timeout=5)
    await asyncio.to_thread(send, exporter, openinference_trace, {"service.name": "calc"})
    record = await only_trace(ingest.store, "default")
    steps = record.trajectory.steps
    assert [s.type for s in steps] == [STEP_TYPE_AGENT, STEP_TYPE_RETRIEVAL, STEP_TYPE_LLM, STEP_TYPE_TOOL,
                                       STEP_TYPE_LLM]
    assert [s.model for s in steps[2::2]] == ["gpt-4o-mini", "gpt-4o-mini"]
    assert steps[3].tool_call.name == "calculator" and from_value(steps[3].tool_call.arguments) == {"expr": "2+2"}
    assert steps[2].output.messages.messages[0].tool_calls[0].name == "calculator"
    assert from_value(steps[1].output.json) == [{"content": "2+2=4"}]
    assert (record.usage.input_tokens, record.usage.output_tokens) == (32, 8)
    assert record.input.text == "What is 2+2?" and record.output.text == "4"
    assert record.trajectory.session_id == "s-9"


async def test_http_exporter_openllmetry_with_generic_span(ingest) -> None:  # type: ignore[no-untyped-def]
    exporter = HttpExporter(endpoint=f"{ingest.http_url}/v1/traces", compression=Compression.Gzip, timeout=5)
    await asyncio.to_thread(send, exporter, openllmetry_trace, {"service.name": "trips"})
    record = await only_trace(ingest.store, "default")
    steps = record.trajectory.steps
    assert [s.type for s in steps] == [STEP_TYPE_CHAIN, STEP_TYPE_LLM, STEP_TYPE_TOOL, STEP_TYPE_GENERIC,
                                       STEP_TYPE_LLM]
    assert steps[0].name == "plan_trip" and from_value(steps[0].input.json) == {"args": [], "kwargs": {"city": "NYC"}}
    assert steps[1].model == "gpt-4o-2024-08-06"
    assert steps[2].tool_call.name == "book_flight" and from_value(steps[2].tool_call.arguments) == {"to": "NYC"}
    assert steps[2].status == STEP_STATUS_ERROR and steps[2].tool_call.error == "seat map unavailable"
    generic = {k: from_value(v) for k, v in steps[3].attributes.items() if k.startswith("db.")}
    assert generic == {"db.system": "postgresql", "db.rows": 3, "db.cached": False, "db.tags": ["a", "b"],
                       "db.ratio": 0.5}
    assert (record.usage.input_tokens, record.usage.output_tokens) == (100, 22)
    assert record.input.text == "Book a flight to NYC" and record.output.text == "Booking failed, try later."
    assert record.trajectory.session_id == "sess-3"
    (summary,) = (await ingest.store.list_traces("default", has_error=True)).traces
    assert summary.error_count == 1


async def test_completion_after_export(ingest) -> None:  # type: ignore[no-untyped-def]
    exporter = GrpcExporter(endpoint=ingest.grpc_target, insecure=True, timeout=5)
    await asyncio.to_thread(send, exporter, genai_trace, {"service.name": "travel-agent"})
    assert len(ingest.assembler) == 1
    ingest.assembler.config = type(ingest.assembler.config)(grace_s=0, max_wait_s=300)
    (done,) = await Completer(ingest.assembler, ingest.store).tick()
    assert done.root_seen
    (summary,) = (await ingest.store.list_traces("default", completed=True)).traces
    assert summary.trace_id == done.trace_id
