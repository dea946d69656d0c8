"""Hypothesis strategies for hostile input: text no store can hold, JSON that is deep, non-finite, of the wrong
shape or not JSON at all, message-shaped bodies with wrong types, and protobuf bytes that do not decode.

Bodies are bytes: JSON is written with ``ensure_ascii`` so lone surrogates and NULs travel as the ``\\u`` escapes
a hostile client would send.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from hypothesis import strategies as st

# Text every store must be protected from, and text that is merely odd.
UNSTORABLE = ("\x00", "a\x00b", "\ud800", "x\udfffy", "\udc00\ud800")
ODD = ("", " ", "../../etc/passwd", "%00", "\u202eevil", "💥", "NaN", "Infinity", "null", "{}", "a" * 5000, "x/y", ":")
DEPTHS = (65, 1000, 100_000)

hostile_text = st.one_of(
    st.sampled_from(UNSTORABLE + ODD),
    st.text(max_size=20),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0xFFFF, exclude_categories=()), max_size=8),
)
huge_numbers = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from([2**63, -(2**63) - 1, 2**64, 1e308, -1e308, 5e-324]),
    st.floats(allow_nan=False, allow_infinity=False),
)
json_leaf = st.one_of(st.none(), st.booleans(), huge_numbers, hostile_text)
json_values = st.recursive(
    json_leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(hostile_text, inner, max_size=3),
    max_leaves=8,
)


def _field_value(field: FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
    """A value for ``field``: often of the right JSON type (with hostile content), sometimes any JSON."""
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        return st.dictionaries(hostile_text, json_values, max_size=2)
    if field.message_type is not None and not field.message_type.full_name.startswith("google.protobuf"):
        single = message_shaped(field.message_type, depth + 1) if depth < 3 else st.just({})
    elif field.type == FieldDescriptor.TYPE_STRING:
        single = hostile_text
    elif field.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        single = st.one_of(huge_numbers, st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999"]))
    elif field.type == FieldDescriptor.TYPE_BOOL:
        single = st.booleans()
    elif field.type == FieldDescriptor.TYPE_ENUM:
        single = st.sampled_from([value.name for value in field.enum_type.values] + ["NOPE", "7"])
    elif field.type == FieldDescriptor.TYPE_BYTES:
        single = st.sampled_from(["", "AAAA", "!!!not base64", "QQ=="])
    elif field.message_type is not None:  # a well-known type: Struct, Value, Timestamp, Duration...
        single = json_values
    else:
        single = huge_numbers
    is_repeated = field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED
    typed = st.lists(single, max_size=2) if is_repeated else single
    return st.one_of(typed, typed, json_values)


def message_shaped(descriptor: Descriptor, depth: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    """A JSON object with some of the message's fields (and sometimes one it does not have)."""
    fields = {field.json_name: _field_value(field, depth) for field in descriptor.fields}
    extra = st.dictionaries(hostile_text, json_values, max_size=1)
    return st.builds(lambda known, unknown: {**unknown, **known}, st.fixed_dictionaries({}, optional=fields), extra)


def _nested(depth: int, kind: str) -> bytes:
    if kind == "array":
        return b"[" * depth + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


def raw_json_bodies(descriptor: Descriptor) -> st.SearchStrategy[bytes]:
    """Bodies a JSON parser or the protobuf JSON mapping must refuse (or survive)."""
    names = [field.json_name for field in descriptor.fields] or ["x"]
    field = st.sampled_from(names)
    return st.one_of(
        st.builds(_nested, st.sampled_from(DEPTHS), st.sampled_from(["array", "object"])),
        st.builds(lambda name, depth: f'{{"{name}":'.encode() + _nested(depth, "object") + b"}", field,
                  st.sampled_from(DEPTHS)),
        st.builds(lambda name, literal: f'{{"{name}": {literal}}}'.encode(), field,
                  st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1" + "0" * 400, "1e-999"])),
        st.sampled_from([b"[]", b'"x"', b"1", b"null", b"{", b'{"a":', b"\xff\xfe", b'{"a":"\xff"}', b"\x00{}",
                         b'\xef\xbb\xbf{}', b'{"a":1,"a":2}', b"{}" * 3]),
        st.binary(max_size=64),
    )


def json_bodies(descriptor: Descriptor) -> st.SearchStrategy[bytes]:
    """Message-shaped hostile objects, or raw hostile bodies."""
    shaped = message_shaped(descriptor).map(lambda obj: json.dumps(obj, ensure_ascii=True).encode())
    return st.one_of(shaped, shaped, raw_json_bodies(descriptor))


def url_text(text: str) -> str:
    """``text`` percent-encoded for a path segment or query value; lone surrogates as their (invalid) UTF-8."""
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def length_delimited(field_number: int, payload: bytes) -> bytes:
    return _varint(field_number << 3 | 2) + _varint(len(payload)) + payload


def nested_field_bytes(field_number: int, depth: int) -> bytes:
    """``depth`` levels of field ``field_number`` holding itself: deeper than any decoder's recursion limit."""
    payload = b""
    for _ in range(depth):
        payload = length_delimited(field_number, payload)
    return payload


def self_nesting_field(descriptor: Descriptor) -> int | None:
    """The number of a field of ``descriptor`` that (through singular messages) can hold itself, if any."""
    for field in descriptor.fields:
        if field.message_type is descriptor:
            return field.number
    return None


def mutated(data: bytes) -> st.SearchStrategy[bytes]:
    """``data`` with bytes flipped, cut short or extended."""
    if not data:
        return st.binary(max_size=32)
    return st.one_of(
        st.builds(lambda i, b: data[:i] + bytes([b]) + data[i + 1:], st.integers(0, len(data) - 1),
                  st.integers(0, 255)),
        st.builds(lambda i: data[:i], st.integers(0, len(data) - 1)),
        st.builds(lambda extra: data + extra, st.binary(min_size=1, max_size=16)),
    )
