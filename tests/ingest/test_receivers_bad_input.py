"""What the receivers refuse or partly accept: bad bodies, content types, sizes, ids, projects, a failing sink."""

from __future__ import annotations

import gzip
import json

import aiohttp
import grpc
from google.protobuf import json_format
from google.rpc import status_pb2
from ingest_helpers import MAX_BODY, TRACE, make_span, resource_spans
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from evalsi.records import from_value

PROTOBUF = {"Content-Type": "application/x-protobuf"}


def request(*spans, resource=None) -> ExportTraceServiceRequest:  # type: ignore[no-untyped-def]
    return ExportTraceServiceRequest(resource_spans=[resource_spans(list(spans), resource)])


async def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    async with aiohttp.ClientSession() as session, session.post(f"{url}/v1/traces", data=body,
                                                                 headers=headers) as response:
        return response.status, await response.read()


async def test_malformed_protobuf_and_json_are_400(ingest) -> None:  # type: ignore[no-untyped-def]
    status, body = await post(ingest.http_url, b"\xff\xff\xff\xff", PROTOBUF)
    assert status == 400 and "malformed protobuf" in status_pb2.Status.FromString(body).message
    status, body = await post(ingest.http_url, b"{not json", {"Content-Type": "application/json"})
    assert status == 400 and "malformed JSON" in json.loads(body)["message"]
    bad_id = {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz", "spanId": "0102030405060708"}]}]}]}
    status, body = await post(ingest.http_url, json.dumps(bad_id).encode(), {"Content-Type": "application/json"})
    assert status == 400 and "resourceSpans[0].scopeSpans[0].spans[0].traceId" in json.loads(body)["message"]
    status, _ = await post(ingest.http_url, b"not gzip", {**PROTOBUF, "Content-Encoding": "gzip"})
    assert status == 400
    assert (await ingest.store.list_traces("default")).traces == []


async def test_wrong_content_type_or_encoding_is_415(ingest) -> None:  # type: ignore[no-untyped-def]
    body = request(make_span({})).SerializeToString()
    assert (await post(ingest.http_url, body, {"Content-Type": "text/plain"}))[0] == 415
    assert (await post(ingest.http_url, body, {**PROTOBUF, "Content-Encoding": "br"}))[0] == 415


async def test_oversize_bodies_are_413_and_nothing_is_stored(ingest) -> None:  # type: ignore[no-untyped-def]
    big = request(make_span({"blob": "x" * (MAX_BODY + 10)})).SerializeToString()
    status, body = await post(ingest.http_url, big, PROTOBUF)
    assert status == 413 and "limit" in status_pb2.Status.FromString(body).message
    # Small on the wire, too big inflated: refused after bounded decompression.
    status, body = await post(ingest.http_url, gzip.compress(big), {**PROTOBUF, "Content-Encoding": "gzip"})
    assert status == 413 and "decompression" in status_pb2.Status.FromString(body).message
    async with grpc.aio.insecure_channel(ingest.grpc_target) as channel:
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        try:
            await stub.Export(ExportTraceServiceRequest.FromString(big))
            raise AssertionError("accepted an oversize request")
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert (await ingest.store.list_traces("default")).traces == []


async def test_spans_without_ids_are_partial_success(ingest) -> None:  # type: ignore[no-untyped-def]
    req = request(make_span({}, span_id=1), make_span({}, span_id=2, trace_id=b""), make_span({}, span_id=0))
    status, body = await post(ingest.http_url, req.SerializeToString(), PROTOBUF)
    answer = ExportTraceServiceResponse.FromString(body)
    assert status == 200 and answer.partial_success.rejected_spans == 2
    assert "trace_id missing" in answer.partial_success.error_message
    async with grpc.aio.insecure_channel(ingest.grpc_target) as channel:
        answer = await trace_service_pb2_grpc.TraceServiceStub(channel).Export(req)
    assert answer.partial_success.rejected_spans == 2
    (summary,) = (await ingest.store.list_traces("default")).traces
    assert summary.span_count == 1


async def test_otlp_json_with_hex_ids_and_every_attribute_type(ingest) -> None:  # type: ignore[no-untyped-def]
    document = {"resourceSpans": [{
        "resource": {"attributes": [{"key": "evalsi.project", "value": {"stringValue": "json-proj"}}]},
        "scopeSpans": [{"spans": [
            {"traceId": TRACE.hex(), "spanId": "0102030405060708", "name": "root", "kind": 2,
             "startTimeUnixNano": "1000", "endTimeUnixNano": "2000", "unknownField": 1,
             "attributes": [
                 {"key": "s", "value": {"stringValue": "v"}}, {"key": "b", "value": {"boolValue": True}},
                 {"key": "i", "value": {"intValue": "42"}}, {"key": "d", "value": {"doubleValue": 1.5}},
                 {"key": "a", "value": {"arrayValue": {"values": [{"intValue": 1}, {"stringValue": "x"}]}}},
                 {"key": "kv", "value": {"kvlistValue": {"values": [{"key": "k", "value": {"boolValue": False}}]}}},
                 {"key": "by", "value": {"bytesValue": "AP8="}}, {"key": "none", "value": {}},
             ]},
            {"traceId": "", "spanId": "0102030405060709", "name": "no trace"},
        ]}],
    }]}
    status, body = await post(ingest.http_url, json.dumps(document).encode(),
                              {"Content-Type": "application/json; charset=utf-8"})
    answer = json_format.Parse(body, ExportTraceServiceResponse())
    assert status == 200 and answer.partial_success.rejected_spans == 1
    record = await ingest.store.get_trace("json-proj", TRACE.hex())
    assert record is not None
    (step,) = record.trajectory.steps
    attrs = {k: from_value(v) for k, v in step.attributes.items() if len(k) <= 4}
    assert attrs == {"s": "v", "b": True, "i": 42, "d": 1.5, "a": [1, "x"], "kv": {"k": False}, "by": "AP8=",
                     "none": None}
    assert step.attributes["otel.span.kind"].string_value == "SPAN_KIND_SERVER"


async def test_bad_projects(ingest) -> None:  # type: ignore[no-untyped-def]
    body = request(make_span({})).SerializeToString()
    status, answer = await post(ingest.http_url, body, {**PROTOBUF, "x-evalsi-project": "no spaces"})
    assert status == 400 and "x-evalsi-project" in status_pb2.Status.FromString(answer).message
    async with grpc.aio.insecure_channel(ingest.grpc_target) as channel:
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        try:
            await stub.Export(ExportTraceServiceRequest.FromString(body), metadata=(("x-evalsi-project", "a b"),))
            raise AssertionError("accepted a bad project")
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT
    by_resource = request(make_span({}), resource={"evalsi.project": "bad project!"}).SerializeToString()
    status, answer = await post(ingest.http_url, by_resource, PROTOBUF)
    result = ExportTraceServiceResponse.FromString(answer)
    assert status == 200 and result.partial_success.rejected_spans == 1
    assert "evalsi.project" in result.partial_success.error_message
    # The API's rule: a dotted name the API could never read back is refused here too, with the rule, counted.
    status, answer = await post(ingest.http_url, body, {**PROTOBUF, "x-evalsi-project": "acme.prod"})
    message = status_pb2.Status.FromString(answer).message
    assert status == 400 and "'acme.prod' is not a valid project name (letters, digits, '-' and '_'" in message
    dotted = request(make_span({}), resource={"evalsi.project": "acme.prod"}).SerializeToString()
    status, answer = await post(ingest.http_url, dotted, PROTOBUF)
    result = ExportTraceServiceResponse.FromString(answer)
    assert status == 200 and result.partial_success.rejected_spans == 1
    assert "'acme.prod' is not a project (letters, digits" in result.partial_success.error_message


async def test_a_failing_sink_is_retryable(failing_ingest) -> None:  # type: ignore[no-untyped-def]
    http_url, grpc_target = failing_ingest
    body = request(make_span({})).SerializeToString()
    status, answer = await post(http_url, body, PROTOBUF)
    assert status == 503 and "disk full" in status_pb2.Status.FromString(answer).message
    async with grpc.aio.insecure_channel(grpc_target) as channel:
        try:
            await trace_service_pb2_grpc.TraceServiceStub(channel).Export(ExportTraceServiceRequest.FromString(body))
            raise AssertionError("a failed store was answered as success")
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == grpc.StatusCode.UNAVAILABLE
