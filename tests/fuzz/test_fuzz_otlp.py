"""Every OTLP body evalsi-ingest takes (HTTP protobuf, HTTP JSON, gRPC; traces and logs), fed hostile bytes,
JSON of the wrong shape, deep nesting, NaN and garbage ids. Each answer must be a 4xx / a client error code or
a success, within a bounded time; a refused body stores nothing; no service process exits or restarts."""

from __future__ import annotations

import gzip
import json
import time
from typing import Any

import grpc
import httpx
import pytest
from fuzz_stack import FuzzStack
from google.protobuf import json_format
from hostile import (
    hostile_text,
    json_bodies,
    mutated,
    nested_field_bytes,
    raw_json_bodies,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from evalsi.ingest.grpc_receiver import LOGS_SERVICE, TRACE_SERVICE

ANSWER_WITHIN_S = 10.0
FUZZ = settings(
    max_examples=40, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SERVER_FAULTS = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DATA_LOSS,
                 grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
KINDS = {"traces": ExportTraceServiceRequest, "logs": ExportLogsServiceRequest}


def _valid_traces(name: str) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = bytes(range(1, 17)), bytes(range(1, 9)), name
    span.start_time_unix_nano, span.end_time_unix_nano = 1_700_000_000_000_000_000, 1_700_000_001_000_000_000
    return request


def _deep_attribute(depth: int) -> ExportTraceServiceRequest:
    """A span attribute whose value is a kvlist nested ``depth`` levels (3 protobuf levels each)."""
    request = _valid_traces("deep")
    value = request.resource_spans[0].scope_spans[0].spans[0].attributes.add(key="k").value
    for _ in range(depth):
        value = value.kvlist_value.values.add(key="k").value
    value.int_value = 1
    return request


def _protobuf_bodies(kind: str) -> st.SearchStrategy[bytes]:
    valid = _valid_traces("ok").SerializeToString() if kind == "traces" else b""
    # Text stays valid UTF-8 in protobuf (lone surrogates cannot be encoded); NULs and odd text can.
    names = hostile_text.map(lambda text: text.encode("utf-8", "replace").decode("utf-8"))
    return st.one_of(
        st.binary(max_size=128),
        mutated(valid),
        names.map(lambda name: _valid_traces(name).SerializeToString()) if kind == "traces" else st.just(b"\x0a"),
        st.just(nested_field_bytes(1, 120)),
        st.just(_deep_attribute(40).SerializeToString()),
    )


def _json_bodies(kind: str) -> st.SearchStrategy[bytes]:
    descriptor = KINDS[kind].DESCRIPTOR
    valid = json.loads(json_format.MessageToJson(_valid_traces("ok")))
    span_shapes = st.sampled_from([
        {"resourceSpans": "x"}, {"resourceSpans": ["x"]}, {"resourceSpans": [{"scopeSpans": 1}]},
        {"resourceSpans": [{"scopeSpans": [{"spans": {"a": 1}}]}]},
        {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": 7, "spanId": "zz"}]}]}]},
        {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "0" * 31, "links": "x"}]}]}]},
        {"resourceLogs": "x"}, {"resourceLogs": [{"scopeLogs": [{"logRecords": [{"spanId": "not hex"}]}]}]},
        {"resourceLogs": [{"scopeLogs": [{"logRecords": [{"body": {"doubleValue": "NaN"}}]}]}]},
        valid,
    ])
    return st.one_of(
        json_bodies(descriptor),
        raw_json_bodies(descriptor),
        span_shapes.map(lambda obj: json.dumps(obj).encode()),
        hostile_text.map(lambda name: json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [
            {"traceId": "01" * 16, "spanId": "02" * 8, "name": name}]}]}]}, ensure_ascii=True).encode()),
    )


def _http_calls(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    protobuf = _protobuf_bodies(kind).map(lambda body: ("application/x-protobuf", body))
    as_json = _json_bodies(kind).map(lambda body: ("application/json", body))
    return st.builds(
        lambda typed, gzipped, project: {
            "content_type": typed[0],
            "content": gzip.compress(typed[1]) if gzipped == "gzip" else typed[1],
            "encoding": gzipped,
            "project": project,
        },
        st.one_of(protobuf, as_json),
        st.sampled_from(["identity", "identity", "gzip", "br"]),
        st.sampled_from([None, None, "fuzz", "../x", "a" * 200]),
    )


@pytest.fixture(scope="module")
def client() -> httpx.Client:
    with httpx.Client(timeout=ANSWER_WITHIN_S + 5) as http:
        yield http


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_otlp_http_answers_hostile_bodies_with_a_4xx(fuzz_stack: FuzzStack, client: httpx.Client, kind: str) -> None:
    @FUZZ
    @given(call=_http_calls(kind))
    def check(call: dict[str, Any]) -> None:
        headers = {"Content-Type": call["content_type"], "Content-Encoding": call["encoding"]}
        if call["project"] is not None:
            headers["x-evalsi-project"] = call["project"]
        before = fuzz_stack.stored()
        started = time.monotonic()
        answer = client.post(f"{fuzz_stack.ingest_http}/v1/{kind}", content=call["content"], headers=headers)
        elapsed = time.monotonic() - started
        shown = f"{kind} {headers} {call['content'][:300]!r}"
        assert answer.status_code < 500, f"{shown} -> {answer.status_code} {answer.content[:300]!r}"
        assert elapsed < ANSWER_WITHIN_S, f"{shown} took {elapsed:.1f} s"
        if answer.status_code >= 400:
            assert fuzz_stack.stored() == before, f"{shown} was refused ({answer.status_code}) but stored"

    check()
    assert fuzz_stack.alive() == []


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_otlp_grpc_answers_hostile_bytes_with_a_client_error(fuzz_stack: FuzzStack, kind: str) -> None:
    path = f"/{TRACE_SERVICE if kind == 'traces' else LOGS_SERVICE}/Export"
    with grpc.insecure_channel(fuzz_stack.ingest_grpc) as channel:
        export = channel.unary_unary(path)

        @FUZZ
        @given(payload=_protobuf_bodies(kind))
        def check(payload: bytes) -> None:
            before = fuzz_stack.stored()
            started = time.monotonic()
            try:
                export(payload, timeout=ANSWER_WITHIN_S)
                code = grpc.StatusCode.OK
            except grpc.RpcError as exc:
                code = exc.code()
            elapsed = time.monotonic() - started
            assert code not in SERVER_FAULTS, f"{path} {payload[:200]!r} -> {code}"
            assert elapsed < ANSWER_WITHIN_S, f"{path} {payload[:200]!r} took {elapsed:.1f} s"
            if code != grpc.StatusCode.OK:
                assert fuzz_stack.stored() == before, f"{path} {payload[:200]!r} refused ({code}) but stored"

        check()
    assert fuzz_stack.alive() == []
