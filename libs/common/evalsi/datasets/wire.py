"""Records as protobuf wire bytes, encoded straight from a row's plain values.

Reading a dataset is dominated by making ``Record`` messages and serializing them again to hash and store them. A
row's usual parts (an id, text or JSON contents, metadata, provenance) are encoded here directly into the bytes
``Record.SerializeToString(deterministic=True)`` gives, so one encoding serves the dataset version, the stored shard
and, parsed once, the in-memory ``Record``. Rarer parts (messages, a trajectory, usage) are built as protobuf
messages and embedded as their own deterministic bytes, which is how the parent message encodes them anyway.

Deterministic map order is upb's: entries sorted by their UTF-8 key bytes, except that a key which is a prefix of
another comes after it (upb encodes backwards with a comparator that breaks prefix ties by length). The tests hold
every encoding here to protobuf's own bytes, so a protobuf release that changes this fails them.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any

from google.protobuf.message import Message

from evalsi.records import ROW_PARTS, is_row, tabular_row, to_content, to_value
from evalsi.v1alpha1.record_pb2 import Content

LENGTHS = [bytes((n,)) for n in range(128)]
"""The one-byte varints: the length prefix of anything under 128 bytes."""
_pack_double = struct.Struct("<d").pack

# Tags (field number << 3 | wire type) of the fields encoded here.
ID, INPUT, OUTPUT, REFERENCE, CONTEXT = b"\x0a", b"\x12", b"\x1a", b"\x22", b"\x2a"
TRAJECTORY, USAGE, METADATA, PROVENANCE = b"\x32", b"\x3a", b"\x42", b"\x4a"
TASK_RECORD = b"\x0a"  # TaskRecords.records
_PROVENANCE_DATASET, _PROVENANCE_SAMPLE, _PROVENANCE_TRIAL = b"\x22", b"\x32", b"\x38"
_CONTENT_TEXT, _CONTENT_MESSAGES, _CONTENT_JSON = b"\x0a", b"\x12", b"\x1a"
_VALUE_NULL, _VALUE_TRUE, _VALUE_FALSE = b"\x08\x00", b"\x20\x01", b"\x20\x00"
_VALUE_NUMBER, _VALUE_STRING, _VALUE_STRUCT, _VALUE_LIST = b"\x11", b"\x1a", b"\x2a", b"\x32"
_ENTRY_KEY, _ENTRY_VALUE, _STRUCT_FIELD, _LIST_ITEM = b"\x0a", b"\x12", b"\x0a", b"\x0a"
_CONTENT_ROW, _ROW_FEATURES, _ROW_PREDICTION, _ROW_PROBABILITIES = b"\x22", b"\x0a", b"\x12", b"\x1a"
_ENTRY_DOUBLE = b"\x11"  # a map<string, double> entry's value
_STR = frozenset({str})
_ROW_PARTS = frozenset(ROW_PARTS)
# Maps' keys in order with their encoded heads are kept for maps of at most _KEPT_KEYS keys, the _KEPT_ORDERS key
# lists used last (bounded memory; a dataset whose maps all differ just makes each one's).
_KEPT_ORDERS, _KEPT_KEYS = 4096, 64


# For a text of n < 126 bytes: a record's content field holds (n + 2) bytes, Content.text's tag and n; ready-made.
TEXT_HEADS = [bytes((size + 2, 0x0A, size)) for size in range(126)]


# The varints of 0 to 16,383 (one or two bytes), ready-made: the lengths of result rows with an explanation and of
# text contents are mostly here, and a table lookup costs a fraction of the loop below (a few calls a record).
_VARINTS = LENGTHS + [bytes(((n & 0x7F) | 0x80, n >> 7)) for n in range(128, 1 << 14)]


def varint(number: int) -> bytes:
    """Protobuf's base-128 varint; a negative int32 or int64 as its ten-byte two's complement, as protobuf writes it."""
    if 0 <= number < 16384:
        return _VARINTS[number]
    if number < 0:
        number += 1 << 64
    out = bytearray()
    while number > 127:
        out.append((number & 0x7F) | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


def field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: its tag, the payload's length, the payload."""
    size = len(payload)
    return tag + (LENGTHS[size] if size < 128 else varint(size)) + payload


def text_content_field(tag: bytes, text: str) -> bytes:
    """A record's content field (``tag``) holding ``Content.text``: the usual case, in one step."""
    data = text.encode()
    size = len(data)
    if size < 126:
        return tag + TEXT_HEADS[size] + data
    return field(tag, field(_CONTENT_TEXT, data))


def entries(tag: bytes, payloads: Sequence[bytes]) -> bytes:
    """The length-delimited field ``tag`` of each of ``payloads``, concatenated: a repeated field's wire form (a
    message's results or records, parsed in one go), with no call a payload and, for payloads under 128 bytes (a
    result's row), no bytes made a payload: each one's head (tag and length) comes from a table."""
    sizes = list(map(len, payloads))
    if max(sizes, default=0) < 128:
        heads = [tag + length for length in LENGTHS]
        return b"".join(chain.from_iterable(zip(map(heads.__getitem__, sizes), payloads, strict=True)))
    lengths = LENGTHS
    return b"".join([tag + (lengths[size] if size < 128 else varint(size)) + payload
                     for size, payload in zip(sizes, payloads, strict=True)])


def message_bytes(message: Message) -> bytes:
    return message.SerializeToString(deterministic=True)


def value_bytes(obj: Any) -> bytes:
    """A ``google.protobuf.Value`` of a JSON-like value (``records.to_value``'s mapping)."""
    kind = type(obj)
    if kind is str:
        return field(_VALUE_STRING, obj.encode())
    if kind is bool:
        return _VALUE_TRUE if obj else _VALUE_FALSE
    if kind is float:
        return _VALUE_NUMBER + _pack_double(obj)
    if kind is int:  # float() first: an int too large for a double raises OverflowError, as protobuf does
        return _VALUE_NUMBER + _pack_double(float(obj))
    if obj is None:
        return _VALUE_NULL
    if kind is dict:
        return field(_VALUE_STRUCT, map_entries(_STRUCT_FIELD, obj))
    if kind is list:
        return field(_VALUE_LIST, b"".join([field(_LIST_ITEM, value_bytes(item)) for item in obj]))
    return message_bytes(to_value(obj))  # tuples, Mapping types: rare; protobuf's own conversion


def map_entries(tag: bytes, mapping: Mapping[str, Any]) -> bytes:
    """The entries of a ``map<string, Value>`` (a Struct's fields, a record's metadata) in deterministic order."""
    keys = tuple(mapping)
    heads = _kept_key_fields(keys) if len(keys) <= _KEPT_KEYS else _key_fields(keys)
    out = []
    for key, head in heads:
        value = value_bytes(mapping[key])
        size = len(value)
        inner = head + _ENTRY_VALUE + (LENGTHS[size] if size < 128 else varint(size)) + value
        size = len(inner)
        out.append(tag + (LENGTHS[size] if size < 128 else varint(size)) + inner)
    return b"".join(out)


def _key_fields(keys: tuple[str, ...]) -> tuple[tuple[str, bytes], ...]:
    """Each key in upb's order with its map entry's key field."""
    return tuple((key, field(_ENTRY_KEY, data)) for data, key in sorted([(key.encode(), key) for key in keys],
                                                                       key=_map_order))


@functools.lru_cache(maxsize=_KEPT_ORDERS)
def _kept_key_fields(keys: tuple[str, ...]) -> tuple[tuple[str, bytes], ...]:
    """``_key_fields``, kept for the next map of these keys: a dataset's rows mostly share theirs, and then a map
    costs no sort and no key encoded."""
    return _key_fields(keys)


def _map_order(item: tuple[bytes, Any]) -> bytes:
    # 0xff never occurs in UTF-8, so a key that is a prefix of another sorts after it, as upb writes them.
    return item[0] + b"\xff"


def content_bytes(value: Any) -> bytes:
    """A ``Content`` by the record conventions (``records.to_content``): a string is text; an object with exactly
    one of text/messages/json/row is that content; anything else is JSON."""
    kind = type(value)
    if kind is str:
        return field(_CONTENT_TEXT, value.encode())
    if kind is not dict:  # a dict is neither a Content nor any other Mapping: its tests skipped (once a row)
        if isinstance(value, Content):
            return message_bytes(value)
        if not isinstance(value, Mapping):
            return field(_CONTENT_JSON, value_bytes(value))
    if len(value) == 1:
        ((key, inner),) = value.items()
        if key == "row" and ((type(inner) is dict and inner and _ROW_PARTS.issuperset(inner)) or is_row(inner)):
            return field(_CONTENT_ROW, row_bytes(inner))
        if key == "text" and isinstance(inner, str):
            return field(_CONTENT_TEXT, inner.encode())
        if key == "messages" and isinstance(inner, list):
            return message_bytes(to_content(value))  # rarer: protobuf's own encoding
        if key == "json":
            return field(_CONTENT_JSON, value_bytes(inner))
    return field(_CONTENT_JSON, value_bytes(value))


def row_bytes(parts: Mapping[str, Any]) -> bytes:
    """A ``TabularRow`` (``records.tabular_row``'s conversion and refusals): the features as a Struct's fields are,
    the prediction as a Value, each probability a map entry of a double."""
    features, probabilities = parts.get("features"), parts.get("probabilities")
    if (features is not None and not _str_keyed(features)) or (probabilities is not None
                                                                 and not _str_keyed(probabilities)):
        return message_bytes(tabular_row(parts))  # not a plain object: protobuf's conversion (and refusal)
    out = map_entries(_ROW_FEATURES, features) if features else b""
    if "prediction" in parts:
        out += field(_ROW_PREDICTION, value_bytes(parts["prediction"]))
    if probabilities:
        keys = tuple(probabilities)
        heads = _kept_probability_heads(keys) if len(keys) <= _KEPT_KEYS else _probability_heads(keys)
        entries = []
        for key, head in heads:
            probability = probabilities[key]
            if type(probability) is not float:
                if isinstance(probability, bool) or not isinstance(probability, int | float):
                    return message_bytes(tabular_row(parts))  # refused there, naming the class
                probability = float(probability)
            entries.append(head + _pack_double(probability))
        out += b"".join(entries)
    return out


def _probability_heads(keys: tuple[str, ...]) -> tuple[tuple[str, bytes], ...]:
    """Each class in upb's order with its probability entry up to the double (tag, length, key field, value tag)."""
    return tuple((key, _ROW_PROBABILITIES + varint(len(head) + 9) + head + _ENTRY_DOUBLE)
                 for key, head in _key_fields(keys))


_kept_probability_heads = functools.lru_cache(maxsize=_KEPT_ORDERS)(_probability_heads)


def _str_keyed(value: Any) -> bool:
    if type(value) is dict:
        return _STR.issuperset(map(type, value))
    return isinstance(value, Mapping) and all(type(key) is str for key in value)


def provenance_fields(sample_id: bytes, trial: int) -> bytes:
    """The inside of a record's ``provenance`` without ``dataset``: ``sample_id``, and ``trial`` when not 0."""
    size = len(sample_id)
    if not trial and size < 128:
        return _PROVENANCE_SAMPLE + LENGTHS[size] + sample_id
    if trial:
        return field(_PROVENANCE_SAMPLE, sample_id) + _PROVENANCE_TRIAL + varint(trial)
    return field(_PROVENANCE_SAMPLE, sample_id)


def provenance_parts(id_size: int, trial: int) -> tuple[bytes, bytes]:
    """``provenance_fields`` of an id of ``id_size`` bytes as (what comes before the id, what comes after it)."""
    return _PROVENANCE_SAMPLE + varint(id_size), (_PROVENANCE_TRIAL + varint(trial) if trial else b"")


def dataset_field(dataset: str) -> bytes:
    """``provenance.dataset``, which comes first inside the provenance (b"" when unnamed)."""
    return field(_PROVENANCE_DATASET, dataset.encode()) if dataset else b""


def task_records_entry(record: bytes) -> bytes:
    """One record's bytes inside a serialized ``TaskRecords``: a shard is these, concatenated."""
    return field(TASK_RECORD, record)
