"""OTLP logs: ``POST /v1/logs`` and ``LogsService/Export``, GenAI events joined onto their span's step.

The older per-message events are built here as the OTel GenAI openai instrumentation's legacy path writes them
(``message_to_event``/``choice_to_event``: the message in the body, the tool message's call id as ``id``).
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Mapping
from typing import Any

import aiohttp
import grpc
from google.protobuf import json_format
from google.rpc import status_pb2
from ingest_helpers import MAX_BODY, TRACE, any_value, kvs, make_span, resource_spans
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs

from evalsi.ingest import ExportHandler, Redactor, map_resource_logs, map_span
from evalsi.records import from_value
from evalsi.stores.traces import SqliteTraceStore
from evalsi.traces import LOG_MAPPER, assemble_record
from evalsi.v1alpha1.record_pb2 import STEP_TYPE_GENERIC, STEP_TYPE_LLM

PROTOBUF = {"Content-Type": "application/x-protobuf"}
LLM_SPAN = 2


def log(event: str = "", body: Any = None, attrs: Mapping[str, Any] | None = None, *, span_id: int | None = LLM_SPAN,
        trace_id: bytes = TRACE, time_ns: int = 1_500) -> LogRecord:
    record = LogRecord(time_unix_nano=time_ns, observed_time_unix_nano=time_ns, event_name=event,
                       trace_id=trace_id, span_id=span_id.to_bytes(8, "big") if span_id else b"",
                       attributes=kvs(attrs or {}))
    if body is not None:
        record.body.CopyFrom(any_value(body))
    return record


def logs_request(*records: LogRecord, resource: Mapping[str, Any] | None = None) -> ExportLogsServiceRequest:
    resource_logs = ResourceLogs()
    resource_logs.resource.attributes.extend(kvs(resource or {"service.name": "svc"}))
    scope = resource_logs.scope_logs.add()
    scope.scope.name = "opentelemetry.instrumentation.openai_v2"
    scope.log_records.extend(records)
    return ExportLogsServiceRequest(resource_logs=[resource_logs])


def legacy_events() -> list[LogRecord]:
    """The second call of a tool loop as the legacy path sends it: one record per message, then the choice."""
    system = {"gen_ai.system": "openai"}
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    return [
        log("gen_ai.system.message", {"content": "You are terse."}, system),
        log("gen_ai.user.message", {"content": "Weather in Paris?"}, system),
        log("gen_ai.assistant.message", {"tool_calls": [call]}, system),
        log("gen_ai.tool.message", {"content": '{"temp_c": 21}', "id": "call_1"}, system),
        log("gen_ai.choice", {"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": "It is 21 C."}}, system),
    ]


def chat_span(**kwargs: Any) -> Any:
    return make_span({"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 8,
                      "gen_ai.usage.output_tokens": 4}, name="chat gpt-4o", span_id=LLM_SPAN, parent=1, **kwargs)


def rows_of(*records: LogRecord) -> list[Any]:
    mapped = map_resource_logs(logs_request(*records).resource_logs[0], received_ns=9_999)
    assert mapped.rejected == 0
    return mapped.spans


def test_legacy_message_events_join_their_span_in_order() -> None:
    # All five records share one timestamp, as the SDK may give them: the batch position keeps their order.
    rows = rows_of(*legacy_events())
    assert {row.mapper for row in rows} == {LOG_MAPPER} and {row.parent_span_id for row in rows} == {f"{LLM_SPAN:016x}"}
    root = map_span(make_span({}, name="agent", span_id=1), {"service.name": "svc"})
    llm = map_span(chat_span(), {"service.name": "svc"})
    record = assemble_record([*reversed(rows), llm, root])

    root_step, step = record.trajectory.steps  # the log rows are not steps of their own
    assert (root_step.type, step.type, step.model) == (STEP_TYPE_GENERIC, STEP_TYPE_LLM, "gpt-4o")
    history = step.input.messages.messages
    assert [(m.role, m.content) for m in history] == [
        ("system", "You are terse."), ("user", "Weather in Paris?"), ("assistant", ""), ("tool", '{"temp_c": 21}')]
    (call,) = history[2].tool_calls
    assert (call.id, call.name, from_value(call.arguments)) == ("call_1", "get_weather", {"city": "Paris"})
    assert history[3].tool_call_id == "call_1"
    assert [(m.role, m.content) for m in step.output.messages.messages] == [("assistant", "It is 21 C.")]
    events = from_value(step.attributes["otel.logs"])
    assert [e["event_name"] for e in events] == ["gen_ai.system.message", "gen_ai.user.message",
                                                 "gen_ai.assistant.message", "gen_ai.tool.message", "gen_ai.choice"]
    assert events[4]["body"]["finish_reason"] == "stop" and events[0]["attributes"] == {"gen_ai.system": "openai"}
    assert record.input.text == "Weather in Paris?" and record.output.text == "It is 21 C."
    assert (record.usage.input_tokens, from_value(record.metadata["span_count"])) == (8, 2)
    # Assembling is pure: the span's own step is untouched, so a second assembly gives the same Record.
    assert not llm.step.HasField("input") and assemble_record([*rows, llm, root]) == record


def test_content_on_the_span_wins_and_other_logs_are_kept_raw() -> None:
    span = chat_span()
    span.attributes.extend(kvs({"gen_ai.output.messages": json.dumps(
        [{"role": "assistant", "parts": [{"type": "text", "content": "from the span"}]}])}))
    llm = map_span(span, {})
    details = log("gen_ai.client.inference.operation.details", None, {
        "gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "from the event"}]}],
        "gen_ai.output.messages": [{"role": "assistant", "parts": [{"type": "text", "content": "duplicate"}]}],
    })
    app_log = log("", "cache miss for Paris", {"code.function": "lookup"}, time_ns=1_600)
    app_log.severity_number, app_log.severity_text = 13, "WARN"
    (step,) = assemble_record([llm, *rows_of(details, app_log)]).trajectory.steps
    assert [m.content for m in step.input.messages.messages] == ["from the event"]
    assert [m.content for m in step.output.messages.messages] == ["from the span"]
    _, raw = from_value(step.attributes["otel.logs"])
    assert raw["body"] == "cache miss for Paris" and (raw["severity_number"], raw["severity_text"]) == (13, "WARN")
    assert raw["attributes"] == {"code.function": "lookup"} and "event_name" not in raw


def test_log_rows_whose_span_has_not_arrived_stay_as_steps() -> None:
    (row,) = rows_of(log("gen_ai.choice", {"index": 0, "finish_reason": "stop", "message": {"role": None,
                                                                                             "content": "hi"}}))
    (step,) = assemble_record([row]).trajectory.steps
    assert step.type == STEP_TYPE_GENERIC and step.name == "gen_ai.choice" and step.parent_id == f"{LLM_SPAN:016x}"
    assert [(m.role, m.content) for m in step.output.messages.messages] == [("assistant", "hi")]


def test_a_record_without_time_takes_its_observed_or_received_time() -> None:
    record = log("gen_ai.user.message", {"content": "hi"}, time_ns=0)
    record.observed_time_unix_nano = 1_500
    (row,) = rows_of(record)
    assert row.start_ns == 1_500  # observed time
    record.observed_time_unix_nano = 0
    (row,) = rows_of(record)
    assert row.start_ns == 9_999


async def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    async with aiohttp.ClientSession() as session, session.post(f"{url}/v1/logs", data=body,
                                                                 headers=headers) as response:
        return response.status, await response.read()


async def test_http_logs_json_gzip_with_partial_success(ingest) -> None:  # type: ignore[no-untyped-def]
    trace = ExportTraceServiceRequest(resource_spans=[resource_spans([make_span({}, name="agent", span_id=1),
                                                                      chat_span()])])
    await ingest.handler.export(trace)
    request = logs_request(*legacy_events(), log("gen_ai.user.message", {"content": "lost"}, trace_id=b""),
                           log("gen_ai.user.message", {"content": "lost"}, span_id=None))
    document = json_format.MessageToDict(request)
    for record in document["resourceLogs"][0]["scopeLogs"][0]["logRecords"]:  # OTLP JSON: hex ids
        for key in ("traceId", "spanId"):
            if key in record:
                record[key] = base64.b64decode(record[key]).hex()
    status, body = await post(ingest.http_url, gzip.compress(json.dumps(document).encode()),
                              {"Content-Type": "application/json", "Content-Encoding": "gzip"})
    assert status == 200
    partial = json.loads(body)["partialSuccess"]
    assert partial["rejectedLogRecords"] == "2"
    assert "without a trace_id" in partial["errorMessage"] and "without a span_id" in partial["errorMessage"]
    record = await ingest.store.get_trace("default", TRACE.hex())
    assert record is not None and [m.role for m in record.trajectory.steps[1].input.messages.messages] == [
        "system", "user", "assistant", "tool"]
    # A retried export upserts the same rows: the trace still has its 2 spans and 5 log rows.
    await post(ingest.http_url, gzip.compress(json.dumps(document).encode()),
               {"Content-Type": "application/json", "Content-Encoding": "gzip"})
    assert len(await ingest.store.get_spans("default", TRACE.hex())) == 7


async def test_http_logs_refusals(ingest) -> None:  # type: ignore[no-untyped-def]
    body = logs_request(log("gen_ai.user.message", {"content": "hi"})).SerializeToString()
    assert (await post(ingest.http_url, body, {"Content-Type": "text/plain"}))[0] == 415
    status, reply = await post(ingest.http_url, b"\xff\xff\xff", PROTOBUF)
    assert status == 400 and "ExportLogsServiceRequest" in status_pb2.Status.FromString(reply).message
    big = logs_request(log("", "x" * (MAX_BODY + 10))).SerializeToString()
    status, reply = await post(ingest.http_url, gzip.compress(big), {**PROTOBUF, "Content-Encoding": "gzip"})
    assert status == 413 and "decompression" in status_pb2.Status.FromString(reply).message
    status, _ = await post(ingest.http_url, body, {**PROTOBUF, "x-evalsi-project": "no spaces"})
    assert status == 400
    assert (await ingest.store.list_traces("default")).traces == []


async def test_grpc_logs_service(ingest) -> None:  # type: ignore[no-untyped-def]
    request = logs_request(log("gen_ai.user.message", {"content": "hi"}),
                           log("gen_ai.user.message", {"content": "hi"}, trace_id=b""),
                           resource={"service.name": "svc", "evalsi.project": "shop"})
    async with grpc.aio.insecure_channel(ingest.grpc_target) as channel:
        response: ExportLogsServiceResponse = await logs_service_pb2_grpc.LogsServiceStub(channel).Export(request)
    assert response.partial_success.rejected_log_records == 1
    (row,) = await ingest.store.get_spans("shop", TRACE.hex())
    assert row.mapper == LOG_MAPPER and row.service_name == "svc"


async def test_redaction_covers_log_bodies_and_attributes(store: SqliteTraceStore) -> None:
    redactor = Redactor.from_mapping({"default": [
        "email", {"pattern": "sk-[a-z]+", "replacement": "[KEY]", "attributes": ["gen_ai.user.*"]}]}, "test")
    handler = ExportHandler(store, redactor=redactor)
    await handler.export_logs(logs_request(
        log("gen_ai.user.message", {"content": "I am ann@example.com, key sk-secret"}, {"user.note": "bob@x.io"}),
        log("app.note", "sk-other stays: the rule names gen_ai.user.* only"),
    ))
    rows = await store.get_spans("default", TRACE.hex())
    user, note = sorted(rows, key=lambda r: r.name, reverse=True)
    assert from_value(user.step.attributes["otel.log.body"]) == {"content": "I am [REDACTED], key [KEY]"}
    assert from_value(user.step.attributes["user.note"]) == "[REDACTED]"
    assert user.step.input.messages.messages[0].content == "I am [REDACTED], key [KEY]"
    assert from_value(note.step.attributes["otel.log.body"]).startswith("sk-other stays")
