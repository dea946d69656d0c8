"""Real instrumentation packages driving the openai client through a tool loop, exported by the OTel SDK to ingest.

Each test instruments the openai client with one real instrumentation (OpenInference, OpenLLMetry, the OTel GenAI
``openai-v2``), runs a two-call tool loop (the model asks for ``get_weather``, the app answers with the tool's
result, the model answers) against the local OpenAI-compatible server, exports with the SDK's own OTLP exporters
into a real in-process receiver, and checks the stored trajectory step by step. Instrumentations patch the
openai module globally, so each test un-instruments before it ends.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from openai import OpenAI
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import LogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

from evalsi.records import from_value
from evalsi.testing.providers import FakeOpenAI
from evalsi.traces import LOG_MAPPER
from evalsi.v1alpha1.record_pb2 import STEP_TYPE_GENERIC, STEP_TYPE_LLM, Message, Record, Step

MODEL = "gpt-4o-mini"
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}}]
SYSTEM, QUESTION, TOOL_RESULT, ANSWER = "You are terse.", "Weather in Paris?", '{"temp_c": 21}', "It is 21 C in Paris."
SCRIPT = (("tool_calls", [{"id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}]), ("text", ANSWER))
# FakeOpenAI counts whitespace-separated words: 3 + 3 prompt words and '{"city": "Paris"}' (2) on the first call;
# the tool result (2 more) and the 6-word answer on the second.
USAGE = [(6, 2), (8, 6)]


def tool_loop(base_url: str, tracer_provider: TracerProvider) -> str:
    """The app: one request span around a two-call tool loop, as an agent would run it."""
    client = OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
    with tracer_provider.get_tracer("weather-app").start_as_current_span("answer"):
        messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
        first = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
        (call,) = first.choices[0].message.tool_calls or []
        assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
        messages.append(first.choices[0].message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": TOOL_RESULT})
        second = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
        return second.choices[0].message.content or ""


@dataclass
class Run:
    instrumentor: BaseInstrumentor
    spans: SpanExporter
    logs: LogRecordExporter | None = None
    project: str = "default"


def run_instrumented(run: Run, base_url: str) -> str:
    """Instrument, run the loop, export everything, un-instrument (in a thread: the exporters block)."""
    tracer_provider = TracerProvider(resource=Resource.create({"service.name": "weather-app"}))
    tracer_provider.add_span_processor(SimpleSpanProcessor(run.spans))
    logger_provider = LoggerProvider(resource=Resource.create({"service.name": "weather-app"}))
    kwargs: dict[str, Any] = {"tracer_provider": tracer_provider}
    if run.logs is not None:
        logger_provider.add_log_record_processor(SimpleLogRecordProcessor(run.logs))
        kwargs["logger_provider"] = logger_provider
    run.instrumentor.instrument(**kwargs)
    try:
        return tool_loop(base_url, tracer_provider)
    finally:
        run.instrumentor.uninstrument()
        tracer_provider.shutdown()
        logger_provider.shutdown()


async def traced(ingest: Any, run: Run) -> Record:
    async with FakeOpenAI(script=SCRIPT) as server:
        assert await asyncio.to_thread(run_instrumented, run, server.base_url) == ANSWER
        assert server.pending == 0
    (summary,) = (await ingest.store.list_traces(run.project)).traces
    record = await ingest.store.get_trace(run.project, summary.trace_id)
    assert record is not None
    return record


def texts(messages: Any) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in messages]


def check_tool_loop(record: Record, mapper: str) -> tuple[Step, Step]:
    """What every instrumentation's trace must give: the app's span, then two LLM steps with the whole exchange."""
    root, first, second = record.trajectory.steps
    assert (root.type, root.name) == (STEP_TYPE_GENERIC, "answer")
    assert [s.type for s in (first, second)] == [STEP_TYPE_LLM, STEP_TYPE_LLM]
    assert first.parent_id == second.parent_id == root.span_id
    assert [from_value(s.attributes["evalsi.mapper"]) for s in (first, second)] == [mapper, mapper]
    assert [s.model for s in (first, second)] == [MODEL, MODEL]
    assert [(s.usage.input_tokens, s.usage.output_tokens, s.usage.total_tokens) for s in (first, second)] == [
        (i, o, i + o) for i, o in USAGE]

    assert texts(first.input.messages.messages) == [("system", SYSTEM), ("user", QUESTION)]
    (asked,) = first.output.messages.messages
    assert asked.role == "assistant" and asked.content == ""
    (call,) = asked.tool_calls
    assert (call.id, call.name, from_value(call.arguments)) == ("call_1", "get_weather", {"city": "Paris"})

    history = second.input.messages.messages
    assert [m.role for m in history] == ["system", "user", "assistant", "tool"]
    assert [c.name for c in history[2].tool_calls] == ["get_weather"]
    assert history[3] == Message(role="tool", content=TOOL_RESULT, tool_call_id="call_1")
    assert texts(second.output.messages.messages) == [("assistant", ANSWER)]

    assert record.input.text == QUESTION and record.output.text == ANSWER
    assert (record.usage.input_tokens, record.usage.output_tokens) == (14, 8)
    assert from_value(record.metadata["service.name"]) == "weather-app"
    assert from_value(record.metadata["span_count"]) == 3
    return first, second


@pytest.fixture
def capture_content(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Content capture is opt-in and read from the environment when instrumenting."""
    yield lambda mode: monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", mode)


async def test_openinference_over_http(ingest) -> None:  # type: ignore[no-untyped-def]
    from openinference.instrumentation.openai import OpenAIInstrumentor

    exporter = HttpExporter(endpoint=f"{ingest.http_url}/v1/traces", timeout=5)
    record = await traced(ingest, Run(OpenAIInstrumentor(), exporter))
    first, second = check_tool_loop(record, "openinference@1")
    # OpenInference also keeps the raw request and response: the step's attributes still carry them.
    assert json.loads(from_value(first.attributes["input.value"]))["tools"] == TOOLS
    assert from_value(second.attributes["llm.finish_reason"]) == "stop"


async def test_openllmetry_over_grpc(ingest, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor

    monkeypatch.setenv("TRACELOOP_TRACE_CONTENT", "true")
    exporter = GrpcExporter(endpoint=ingest.grpc_target, insecure=True, timeout=5, headers={"x-evalsi-project": "ops"})
    record = await traced(ingest, Run(OpenAIInstrumentor(), exporter, project="ops"))
    first, _ = check_tool_loop(record, "genai@1")
    assert from_value(first.attributes["gen_ai.response.finish_reasons"]) == ["tool_call"]
    assert json.loads(from_value(first.attributes["gen_ai.tool.definitions"]))[0]["name"] == "get_weather"


async def test_otel_genai_content_on_spans(ingest, capture_content) -> None:  # type: ignore[no-untyped-def]
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    capture_content("SPAN_ONLY")
    exporter = GrpcExporter(endpoint=ingest.grpc_target, insecure=True, timeout=5)
    record = await traced(ingest, Run(OpenAIInstrumentor(), exporter))
    first, second = check_tool_loop(record, "genai@1")
    assert [s.name for s in (first, second)] == [f"chat {MODEL}"] * 2 and "otel.logs" not in first.attributes


@pytest.mark.parametrize("protocol", ["http", "grpc"])
async def test_otel_genai_content_as_log_events(ingest, capture_content, protocol: str) -> None:  # type: ignore[no-untyped-def]
    """EVENT_ONLY: the spans carry no content; the ``operation.details`` log records do, joined onto the steps."""
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    capture_content("EVENT_ONLY")
    logs: LogRecordExporter
    if protocol == "http":
        spans: SpanExporter = HttpExporter(endpoint=f"{ingest.http_url}/v1/traces", timeout=5)
        logs = HttpLogExporter(endpoint=f"{ingest.http_url}/v1/logs", timeout=5)
    else:
        spans = GrpcExporter(endpoint=ingest.grpc_target, insecure=True, timeout=5)
        logs = GrpcLogExporter(endpoint=ingest.grpc_target, insecure=True, timeout=5)
    record = await traced(ingest, Run(OpenAIInstrumentor(), spans, logs))
    first, second = check_tool_loop(record, "genai@1")
    for step in (first, second):
        assert "gen_ai.input.messages" not in step.attributes  # the content came from the events only
        (event,) = from_value(step.attributes["otel.logs"])
        assert event["event_name"] == "gen_ai.client.inference.operation.details"
        assert event["attributes"]["gen_ai.response.model"] == MODEL
    assert ingest.handler.stats.logs_accepted == 2 and ingest.handler.stats.logs_rejected == 0
    rows = [span for span in await ingest.store.get_spans("default", record.trajectory.trace_id)
            if span.mapper == LOG_MAPPER]
    assert sorted(row.parent_span_id for row in rows) == sorted([first.span_id, second.span_id])


async def test_fake_providers_script_tool_calls() -> None:
    """The tool-call step the loop above relies on, in both providers' shapes, and refused when malformed."""
    import aiohttp

    from evalsi.testing.providers import FakeAnthropic

    with pytest.raises(ValueError, match="tool_calls step"):
        FakeOpenAI(script=[("tool_calls", [{"arguments": {}}])])
    call = {"name": "get_weather", "arguments": {"city": "Paris"}}
    async with FakeAnthropic(script=[("tool_calls", [call])]) as server, aiohttp.ClientSession() as session:
        body = {"model": "claude", "max_tokens": 50, "messages": [{"role": "user", "content": QUESTION}]}
        async with session.post(f"{server.base_url}/v1/messages", json=body,
                                headers={"anthropic-version": "2023-06-01"}) as response:
            reply = await response.json()
    (block,) = reply["content"]
    assert reply["stop_reason"] == "tool_use" and block["type"] == "tool_use"
    assert (block["name"], block["input"]) == ("get_weather", {"city": "Paris"}) and block["id"].startswith("call_")
    assert reply["usage"] == {"input_tokens": 3, "output_tokens": 2}
