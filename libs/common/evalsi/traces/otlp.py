"""OTLP attribute values as plain Python values and back, and the attributes a stored OTLP span gives its step.

OTLP's ``AnyValue`` has seven kinds; the canonical model stores JSON-like values, so:
- string, bool and double stay as they are; a non-finite double becomes its name (``"NaN"``, ``"Infinity"``),
  because JSON has no such numbers;
- an int stays an int, except beyond ±2**53 where a double would round it: then its decimal string;
- bytes become base64 text (the OTLP JSON encoding of bytes);
- an array becomes a list and a kvlist a dict, recursively; an unset value becomes ``None``.

Ingest keeps each span's OTLP bytes (redacted) beside its mapped step instead of copying every attribute into
``Step.attributes`` (``MappedSpan``); ``span_attributes`` is what those bytes add to the step when it is read.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Collection, Iterable
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from evalsi.records import to_value
from evalsi.v1alpha1.record_pb2 import Step

_EXACT_INT = 2**53


def any_value_to_python(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "int_value":
        number = value.int_value
        return number if -_EXACT_INT <= number <= _EXACT_INT else str(number)
    if kind == "double_value":
        real = value.double_value
        if math.isnan(real):
            return "NaN"
        if math.isinf(real):
            return "Infinity" if real > 0 else "-Infinity"
        return real
    if kind == "array_value":
        return [any_value_to_python(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return attributes_to_dict(value.kvlist_value.values)
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return None


def attributes_to_dict(attributes: Iterable[KeyValue]) -> dict[str, Any]:
    """Key-value pairs as a dict; a repeated key keeps its last value, as the OTel SDKs do."""
    # Strings, most values, are read here rather than through a call: this runs for every attribute of every span.
    # A non-empty string_value can only be the value set (one of a oneof), so most skip the WhichOneof call. A
    # comprehension (``for value in [kv.value]`` is a plain assignment in one) is about a tenth faster than a loop.
    return {kv.key: value.string_value or _not_a_nonempty_string(value) for kv in attributes for value in [kv.value]}


def _not_a_nonempty_string(value: AnyValue) -> Any:
    return "" if value.WhichOneof("value") == "string_value" else any_value_to_python(value)


def python_to_any_value(obj: Any) -> AnyValue:
    """A decoded value back as an ``AnyValue`` that decodes to it again (``any_value_to_python``)."""
    out = AnyValue()
    kind = type(obj)
    if kind is str:
        out.string_value = obj
    elif kind is bool:
        out.bool_value = obj
    elif kind is int:
        out.int_value = obj
    elif kind is float:
        out.double_value = obj
    elif isinstance(obj, list):
        out.array_value.values.extend(python_to_any_value(item) for item in obj)
    elif isinstance(obj, dict):
        out.kvlist_value.values.extend(KeyValue(key=key, value=python_to_any_value(item)) for key, item in obj.items())
    return out  # None: an unset value


def write_back(target: Any, attrs: dict[str, Any], keys: Collection[str]) -> None:
    """Make the repeated ``attributes`` of ``target`` (a span) decode to ``attrs`` again after the values of ``keys``
    changed: those values are set in place, or, where a key repeats (the dict kept only its last value), every
    attribute is written anew, once per key."""
    if len(attrs) != len(target.attributes):
        del target.attributes[:]
        target.attributes.extend(KeyValue(key=key, value=python_to_any_value(value)) for key, value in attrs.items())
        return
    for kv in target.attributes:
        if kv.key in keys:
            value = attrs[kv.key]
            if type(value) is str:
                kv.value.string_value = value
            else:
                kv.value.CopyFrom(python_to_any_value(value))


_SPAN_KINDS = {number: name for name, number in Span.SpanKind.items()}
_NANOS = 1_000_000_000


def merge_span(step: Step, span: Span, mapper: str) -> None:
    """Complete a step mapped (by ``mapper``) from ``span`` with what the span says verbatim: its start time and
    duration, and ``span_attributes`` plus ``evalsi.mapper`` in ``Step.attributes`` where the step has no value of
    its own under a key (what mapping set, such as ``evalsi.mapper_error``, wins)."""
    start, end = span.start_time_unix_nano, span.end_time_unix_nano
    # divmod rather than FromNanoseconds (Python code); times are unsigned, so it is what that does.
    step.start_time.seconds, step.start_time.nanos = divmod(start, _NANOS)
    step.duration.seconds, step.duration.nanos = divmod(max(0, end - start), _NANOS)
    extra = span_attributes(span)
    extra["evalsi.mapper"] = mapper
    fields = step.attributes
    own = set(fields) if fields else ()
    for key, value in extra.items():
        if key in own:
            continue
        kind = type(value)
        if kind is str:
            fields[key].string_value = value
        elif kind is int or kind is float:
            fields[key].number_value = value
        else:  # bool, None, lists and dicts
            fields[key].CopyFrom(to_value(value))


def span_attributes(span: Span) -> dict[str, Any]:
    """What a span's OTLP form adds to its step's attributes: its attributes, and (so nothing is dropped) its kind,
    events and links under ``otel.*``."""
    out = attributes_to_dict(span.attributes)
    out["otel.span.kind"] = _SPAN_KINDS.get(span.kind) or Span.SpanKind.Name(span.kind)
    if span.events:
        out["otel.events"] = [{"name": e.name, "time_unix_nano": str(e.time_unix_nano),
                               "attributes": attributes_to_dict(e.attributes)} for e in span.events]
    if span.links:
        out["otel.links"] = [{"trace_id": link.trace_id.hex(), "span_id": link.span_id.hex(),
                              "attributes": attributes_to_dict(link.attributes)} for link in span.links]
    return out
