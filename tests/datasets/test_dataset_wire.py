"""Records encoded straight to wire bytes must be protobuf's own deterministic bytes, so versions and shard keys
stay what they were when records were built as messages (the pinned values below were computed that way)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalsi.datasets import dataset_version, load_dataset, records_from_rows, stream_dataset
from evalsi.datasets.mapping import FieldMapping
from evalsi.datasets.rows import RecordBuilder, RowError
from evalsi.datasets.shards import write_dataset
from evalsi.datasets.wire import METADATA, content_bytes, map_entries, value_bytes, varint
from evalsi.errors import BadInputError
from evalsi.records import to_content, to_value
from evalsi.v1alpha1.record_pb2 import Record

_keys = st.text(max_size=6)  # empty keys, prefixes of each other and non-ASCII keys all come up
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=200),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=5),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_json)
def test_a_value_encodes_as_protobuf_does(value: Any) -> None:
    assert value_bytes(value) == to_value(value).SerializeToString(deterministic=True)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_keys, _json, max_size=8))
def test_a_map_encodes_in_upbs_deterministic_order(metadata: dict[str, Any]) -> None:
    record = Record(id="x")
    for key, value in metadata.items():
        record.metadata[key].CopyFrom(to_value(value))
    assert b"\x0a\x01x" + map_entries(METADATA, metadata) == record.SerializeToString(deterministic=True)


@settings(max_examples=200, deadline=None)
@given(_json | st.fixed_dictionaries({"text": st.text()}) | st.fixed_dictionaries({"json": _json}))
def test_a_content_encodes_by_the_record_conventions(value: Any) -> None:
    assert content_bytes(value) == to_content(value).SerializeToString(deterministic=True)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.fixed_dictionaries(
    {"input": _json, "output": _json},
    optional={"id": st.text(min_size=1, max_size=8), "reference": _json, "context": st.lists(_json, max_size=3),
              "metadata": st.dictionaries(_keys, _json, max_size=3), "extra": _json, "trial": st.integers(0, 3)},
), min_size=1, max_size=6, unique_by=lambda row: (row.get("id"), row.get("trial"))))
def test_encoded_records_are_their_own_deterministic_serialization(rows: list[dict[str, Any]]) -> None:
    rows = [row for row in rows if not ("extra" in row and "extra" in row.get("metadata", {}))]
    builder = RecordBuilder("rows.jsonl", FieldMapping())
    try:
        encoded = [builder.add_row(row) for row in rows]
    except RowError as exc:  # rows sharing an id and a trial are refused, by the same rule as before
        assert "appears twice" in str(exc)
        return
    records = [Record.FromString(data) for data in encoded]
    for data, record, row in zip(encoded, records, rows, strict=True):
        assert record.SerializeToString(deterministic=True) == data
        assert record.provenance.dataset == "rows.jsonl" and record.provenance.sample_id == record.id
        assert record.input == to_content(row["input"]) if row["input"] is not None else not record.HasField("input")
    assert builder.finish() == dataset_version(records)


GOLDEN_ROWS: list[dict[str, Any]] = [
    {"id": "a", "input": "What is 2+2?", "output": "4", "reference": "4"},
    {"input": "no id here", "output": {"text": "t"}, "reference": {"json": {"b": 1, "a": [1, 2.5, None, True]}}},
    {"input": "no id here", "output": {"text": "t"}, "reference": {"json": {"b": 1, "a": [1, 2.5, None, True]}}},
    {"id": 7, "input": {"q": "x", "n": -0.0, "big": 12345678901234567890}, "category": "math", "level": 3},
    {"id": "a", "input": "again", "trial": 5, "metadata": {"ab": 1, "a": {"": [], "z": {}}, "é": "accent", "": None}},
    {"id": "a", "input": "third"},
    {"id": "m", "input": {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo",
                                         "tool_calls": [{"id": "c1", "function": {"name": "f",
                                                                                  "arguments": "{\"x\": 1}"}}]}]},
     "context": ["ctx one", {"text": "ctx two"}, {"k": "v"}],
     "usage": {"input_tokens": 10, "latency_ms": 250, "cost_usd": 0.5}},
    {"id": "t", "input": "traj", "trajectory": {"steps": [{"type": "STEP_TYPE_TOOL", "name": "search",
                                                           "attributes": {"b": 1, "a": 2}}], "session_id": "s1"},
     "extra": {"nested": {"deep": [1, {"x": "y"}]}}, "metadata": {"k": 1}},
    {"id": "u\u00e9\u4e2d", "input": "", "output": "x" * 300, "reference": ["list", "ref"]},
    {"input": "", "flag": False, "num": 1e300, "neg": -3},
]
# Computed by the loader that built every record as a protobuf message (before records were encoded directly).
GOLDEN_VERSION = "3b6e6a37ad6ab024a06797e8f4752b8d7c93cfcfbc8789ed345fc387232f2313"
GOLDEN_SHARDS = [
    "sha256/597143d6cebf74b4c616a608aaa84247890fe9a8dba5b33ae3f341cf6793feae",
    "sha256/6f6e4ca1a759ee16f67e4767690b8b9408a4e897a76527041ea38e3f7acc6c65",
    "sha256/f9618b67dcc136b3b408b259c951c45d2982e2ca6ce4ab5b3f63b3d132c37395",
]


def test_versions_and_shard_keys_are_what_they_were(tmp_path: Path) -> None:
    data = tmp_path / "golden.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in GOLDEN_ROWS))
    assert records_from_rows(GOLDEN_ROWS).version == GOLDEN_VERSION
    assert load_dataset(data).version == dataset_version(load_dataset(data).records) == GOLDEN_VERSION
    manifest = asyncio.run(write_dataset(None, stream_dataset(data, name="golden.jsonl"), source="golden.jsonl",
                                         format="jsonl", shard_size=4))
    assert (manifest.version, [shard.key for shard in manifest.shards]) == (GOLDEN_VERSION, GOLDEN_SHARDS)


def test_what_cannot_be_encoded_is_refused_naming_its_field() -> None:
    for row, field in (
        ({"id": "a", "input": "\ud800"}, "field 'input'"),
        ({"id": "a", "output": {"x": ["\ud800"]}}, "field 'output'"),
        ({"id": "a", "reference": {"x": 10**400}}, "field 'reference': int too large"),
        ({"id": "a", "extra": 10**400}, "field 'metadata.extra': int too large"),
        ({"id": "a", "metadata": {"\ud800": 1}}, "field 'metadata.\ud800'"),
        ({"id": "\ud800", "input": "x"}, "field 'id'"),
        ({"id": "a", "context": ["ok", "\ud800"]}, "field 'context.1'"),
    ):
        with pytest.raises(BadInputError) as refused:
            records_from_rows([row])
        assert str(refused.value).startswith(f"<memory>: record 0: {field}"), str(refused.value)


def test_varint_is_protobufs_on_each_side_of_its_table() -> None:
    """The ready-made varints (0 to 16,383) and the computed ones after them, negative ints as ten bytes: the bytes
    protobuf's own encoder writes."""
    from google.protobuf.internal.encoder import _VarintBytes

    numbers = [*range(0, 20_000), 2**21 - 1, 2**21, 2**31 - 1, 2**63 - 1, -1, -2, -(2**31)]
    for number in numbers:
        assert varint(number) == _VarintBytes(number % (1 << 64)), number
