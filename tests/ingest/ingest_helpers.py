"""OTLP spans built by hand for the ingest tests."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span, Status

TRACE = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")


def any_value(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    if isinstance(value, Mapping):
        return AnyValue(kvlist_value=KeyValueList(values=kvs(value)))
    if isinstance(value, Sequence):
        return AnyValue(array_value=ArrayValue(values=[any_value(item) for item in value]))
    if value is None:
        return AnyValue()
    raise TypeError(type(value))


def kvs(attrs: Mapping[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=key, value=any_value(value)) for key, value in attrs.items()]


def make_span(
    attrs: Mapping[str, Any] | None = None,
    *,
    name: str = "span",
    span_id: int = 1,
    parent: int | None = None,
    trace_id: bytes = TRACE,
    start: int = 1_000,
    end: int = 2_000,
    error: str | None = None,
    events: Sequence[tuple[str, Mapping[str, Any]]] = (),
) -> Span:
    span = Span(
        trace_id=trace_id,
        span_id=span_id.to_bytes(8, "big"),
        parent_span_id=parent.to_bytes(8, "big") if parent else b"",
        name=name,
        start_time_unix_nano=start,
        end_time_unix_nano=end,
        attributes=kvs(attrs or {}),
    )
    for event_name, event_attrs in events:
        span.events.add(name=event_name, time_unix_nano=start, attributes=kvs(event_attrs))
    if error is not None:
        span.status.code = Status.STATUS_CODE_ERROR
        span.status.message = error
    return span


def resource_spans(spans: Sequence[Span], resource: Mapping[str, Any] | None = None) -> ResourceSpans:
    rs = ResourceSpans()
    rs.resource.attributes.extend(kvs(resource or {"service.name": "svc"}))
    scope = rs.scope_spans.add()
    scope.scope.name = "tests"
    scope.spans.extend(spans)
    return rs


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()
MAX_BODY = 64 * 1024  # the receivers' limit in these tests
