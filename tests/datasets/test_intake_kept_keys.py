"""The intake's shortcuts for rows from memory keep records byte-identical: a row that is plain already is encoded
without a converted copy (``formats.is_plain``), and maps whose keys repeat from row to row reuse their key order
and key fields (``wire._key_fields``, ``wire._probability_heads``) instead of sorting and encoding them again."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from evalsi.datasets import formats, records_from_rows, wire
from evalsi.datasets.formats import is_plain, to_plain
from evalsi.datasets.mapping import FieldMapping
from evalsi.datasets.rows import RecordBuilder
from evalsi.datasets.wire import METADATA, content_bytes, map_entries
from evalsi.records import to_content, to_value
from evalsi.v1alpha1.record_pb2 import Record

_keys = st.sampled_from(["", "a", "ab", "b", "é", "中", "a\x00", "zz"])  # prefixes of each other, non-ASCII
_leaf = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8)
         | st.tuples(st.integers()) | st.sampled_from([math.inf, -math.inf]))
_any = st.recursive(_leaf, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(_keys | st.integers(0, 3), inner, max_size=4), max_leaves=12)


def _same(left: Any, right: Any) -> bool:
    """Equal with the same types all the way down (1 == 1.0 == True would hide a conversion)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return list(left) == list(right) and all(_same(left[key], right[key]) for key in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right, strict=True))
    return bool(left == right)


@settings(max_examples=400, deadline=None)
@given(_any)
def test_is_plain_exactly_when_to_plain_gives_the_value_back(value: Any) -> None:
    try:
        converted = to_plain(value)
    except (TypeError, ValueError):
        assert not is_plain(value)
        return
    assert is_plain(value) == _same(converted, value)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(max_size=3) | st.integers(0, 3), _any, min_size=10, max_size=24))
def test_is_plain_of_a_dict_above_and_below_the_small_size_agrees_with_to_plain(value: dict[Any, Any]) -> None:
    # Up to formats._SMALL_DICT entries a dict is tested entry by entry, beyond a pass at a time: the same answers.
    try:
        converted = to_plain(value)
    except (TypeError, ValueError):
        assert not is_plain(value)
        return
    assert is_plain(value) == _same(converted, value)


def test_is_plain_refuses_what_to_plain_converts() -> None:
    assert is_plain({"a": [1, "x", None, True, 2.5, {"b": -0.0}]})
    for value in ({"a": math.nan}, {"a": [1.0, math.inf]}, {1: "x"}, {"a": (1,)}, {"a": {"b": [math.nan]}},
                  {"a": b"x"}, [1, 2.0, math.nan]):
        assert not is_plain(value), value
    for size in (formats._SMALL_DICT, formats._SMALL_DICT + 1):  # entry by entry, then a pass at a time
        row: dict[Any, Any] = {f"k{index}": [index, 0.5, {"x": None}] for index in range(size)}
        assert is_plain(row)
        for last in (math.nan, -math.inf, (1,), b"x", {"y": [math.nan]}):
            assert not is_plain({**row, f"k{size - 1}": last}), (size, last)
        assert not is_plain({**{key: 1 for key in range(size - 1)}, "a": 1})


@settings(max_examples=150, deadline=None)
@given(st.lists(st.dictionaries(_keys, st.integers(-5, 5) | st.floats(allow_nan=False) | st.text(max_size=3),
                                max_size=5), min_size=1, max_size=8))
def test_maps_sharing_keys_encode_as_protobuf_does_in_any_key_order(maps: list[dict[str, Any]]) -> None:
    # Each map twice, the second time with its keys in reverse insertion order: both orders are kept, each right.
    for metadata in [*maps, *({key: m[key] for key in reversed(m)} for m in maps)]:
        record = Record(id="x")
        for key, value in metadata.items():
            record.metadata[key].CopyFrom(to_value(value))
        assert b"\x0a\x01x" + map_entries(METADATA, metadata) == record.SerializeToString(deterministic=True)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.fixed_dictionaries({"probabilities": st.dictionaries(_keys, st.floats(0, 1) | st.integers(0, 1),
                                                                        min_size=1, max_size=4),
                                       "features": st.dictionaries(_keys, st.integers() | st.text(max_size=3),
                                                                   max_size=4)}), min_size=1, max_size=6))
def test_rows_sharing_classes_encode_as_protobuf_does(rows: list[dict[str, Any]]) -> None:
    for row in rows * 2:
        assert content_bytes({"row": row}) == to_content({"row": row}).SerializeToString(deterministic=True)


def test_past_the_kept_orders_maps_are_still_encoded_right() -> None:
    maps = [{f"k{index}": index, "a": 1.5, f"k{index}x": "v"} for index in range(wire._KEPT_ORDERS + 50)]
    for metadata in maps:  # more key lists than are kept: the first ones are dropped, then met again below
        map_entries(METADATA, metadata)
    for metadata in maps[-60:] + maps[:5]:
        record = Record(id="x")
        for key, value in metadata.items():
            record.metadata[key].CopyFrom(to_value(value))
        assert b"\x0a\x01x" + map_entries(METADATA, metadata) == record.SerializeToString(deterministic=True)
    assert wire._kept_key_fields.cache_info().currsize <= wire._KEPT_ORDERS
    wide = {f"w{index}": index for index in range(wire._KEPT_KEYS + 1)}  # too many keys to keep: made each time
    before = wire._kept_key_fields.cache_info()
    record = Record(id="x")
    for key, value in wide.items():
        record.metadata[key].CopyFrom(to_value(value))
    assert b"\x0a\x01x" + map_entries(METADATA, wide) == record.SerializeToString(deterministic=True)
    after = wire._kept_key_fields.cache_info()
    assert (after.hits, after.misses) == (before.hits, before.misses)  # not asked of the kept ones at all


def test_nested_rows_from_memory_are_the_records_of_their_converted_copies() -> None:
    rows = [{"id": f"r{index}", "reference": "cat", "metadata": {"split": "reference"} if index % 2 else {},
             "output": {"row": {"features": {"age": index, "city": "Celje", "score": index / 7},
                                "prediction": "cat", "probabilities": {"cat": 0.75, "dog": 0.25}}}}
            for index in range(5)]
    rows.append({"id": "nan", "output": {"row": {"features": {"x": math.nan}}}})  # NaN: converted, null
    built = records_from_rows(rows)
    builder = RecordBuilder("<memory>", FieldMapping())
    assert [record.SerializeToString(deterministic=True) for record in built.records] == [
        builder.add_row(to_plain(row)) for row in rows]
    assert built.version == builder.finish()
    assert built.records[-1].output.row.features["x"].WhichOneof("kind") == "null_value"
