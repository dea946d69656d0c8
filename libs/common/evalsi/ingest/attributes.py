"""OTLP attribute values as plain Python values, and plain values as ``google.protobuf.Value``.

OTLP's ``AnyValue`` has seven kinds; the canonical model stores JSON-like values, so:
- string, bool and double stay as they are; a non-finite double becomes its name (``"NaN"``, ``"Infinity"``),
  because JSON has no such numbers;
- an int stays an int, except beyond ±2**53 where a double would round it: then its decimal string;
- bytes become base64 text (the OTLP JSON encoding of bytes);
- an array becomes a list and a kvlist a dict, recursively; an unset value becomes ``None``.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable
from typing import Any

from google.protobuf import struct_pb2
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from evalsi.records import to_value

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
    out: dict[str, Any] = {}
    for kv in attributes:
        value = kv.value
        if value.WhichOneof("value") == "string_value":
            out[kv.key] = value.string_value
        else:
            out[kv.key] = any_value_to_python(value)
    return out


def python_to_value(obj: Any) -> struct_pb2.Value:
    """A plain value (as ``any_value_to_python`` returns) as a protobuf ``Value``."""
    return to_value(obj)
