"""Records held as their bytes with the columns of the text rows they were made of (datasets.held): the columns say
exactly what the records' messages say (ids, trials, texts, which fields are present), reading a record gives
``Record.FromString`` of its bytes, slices are shards of the same, and the runner writes the same result bytes over
held records as over the parsed messages, while parsing only the records an evaluator's function is called with."""

from __future__ import annotations

import random
from typing import Any

import pytest

from evalsi.bus.v1alpha1.bus_pb2 import ResultColumns, TaskRecords
from evalsi.datasets import records_from_rows, stream_rows
from evalsi.datasets.held import TEXT_FIELDS, HeldRecords
from evalsi.datasets.wire import TASK_RECORD, entries
from evalsi.evaluators import EvalContext, Registry, evaluator
from evalsi.evaluators.runner import RunnerOptions, run_evaluators
from evalsi.runs.intake import take_records
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import EvalRun

_TEXTS = ["Paris", "paris ", "", "日本語のテキスト", "é" * 200, "x" * 125, "y" * 126, "  Paris\t", "Rome", "ß"]


def _rows(count: int, seed: int) -> list[dict[str, Any]]:
    """Text rows: some fields absent or None, texts empty, long, unicode; some ids repeated (trials)."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for index in range(count):
        row: dict[str, Any] = {"id": f"r{rng.randrange(count // 2 + 1)}" if index % 4 == 0 else f"s{index}-é"}
        for name in TEXT_FIELDS:
            pick = rng.random()
            if pick < 0.1:
                continue  # absent
            row[name] = None if pick < 0.2 else rng.choice(_TEXTS)
        rows.append(row)
    return rows


def _held(rows: list[dict[str, Any]]) -> HeldRecords:
    stream = stream_rows(rows)
    columns = stream.keep_columns()
    return HeldRecords(list(stream.encoded()), columns)


@pytest.mark.parametrize("seed", range(5))
def test_the_columns_say_what_the_records_say(seed: int) -> None:
    rows = _rows(300, seed)
    held, records = _held(rows), records_from_rows(rows).records
    assert held.columns is not None
    assert held.columns.keys == [(r.id, r.provenance.trial) for r in records]
    for name in TEXT_FIELDS:
        assert held.columns.texts(name) == [getattr(r, name).text for r in records], name
        assert [text is not None for text in held.columns.values(name)] == [r.HasField(name) for r in records]
    assert [held[index] for index in range(len(held))] == records
    assert list(held) == records


def test_a_slice_is_a_shard_of_the_same_records_and_columns() -> None:
    rows = _rows(100, 7)
    held, records = _held(rows), records_from_rows(rows).records
    held[12]  # read before the slice: stays read in it
    shard = held[10:40]
    assert isinstance(shard, HeldRecords) and len(shard) == 30
    assert list(shard) == records[10:40]
    assert shard.columns is not None and shard.columns.keys == [(r.id, r.provenance.trial) for r in records[10:40]]
    assert list(held[::3]) == records[::3]  # a stepped slice: the records, without columns
    assert held[::3].columns is None


def test_a_record_of_another_shape_leaves_no_columns() -> None:
    rows: list[dict[str, Any]] = [{"id": "a", "output": "x"}, {"id": "b", "output": "y", "metadata": {"k": 1}}]
    rows += [{"id": "c", "output": "z"}]
    held = _held(rows)
    assert held.columns is None  # the columns would not say what the second record holds
    assert list(held) == records_from_rows(rows).records
    assert _held([{"output": "no id"}]).columns is None  # a generated id is not a text row's


@evaluator("test/needs-input", version="1.0.0", cheap=True, requires=["input", "output"])
def _needs_input(record: Record) -> bool:
    return record.input.text == record.output.text


async def _columns(records: Any, refs: list[str]) -> ResultColumns:
    registry = Registry.from_entry_points()
    registry.add(_needs_input)
    bound = [registry.resolve(ref).bind() for ref in refs]
    columns = ResultColumns()
    await run_evaluators(records, bound, lambda _b: EvalContext(), options=RunnerOptions(chunk_size=64),
                         columns=columns)
    return columns


@pytest.mark.parametrize("seed", range(3))
async def test_the_runner_writes_the_same_results_over_held_records(seed: int) -> None:
    rows = _rows(400, seed)
    held = _held(rows)
    got = await _columns(held, ["builtin/exact-match", "test/needs-input"])
    want = await _columns(records_from_rows(rows).records, ["builtin/exact-match", "test/needs-input"])
    assert list(got.data) == list(want.data)
    for name in ("evaluators", "record_ids", "trials", "outcomes", "score_names"):
        assert list(getattr(got, name)) == list(getattr(want, name)), name
    assert [repr(v) for v in got.values] == [repr(v) for v in want.values]


async def test_only_the_records_a_function_is_called_with_are_parsed() -> None:
    rows = [{"id": f"r{i}", "output": "Paris", "reference": "Paris" if i % 5 else "Rome"} for i in range(100)]
    held = _held(rows)
    columns = await _columns(held, ["builtin/exact-match"])
    assert len(columns.data) == 100
    # The batch form decided the equal texts from the columns; only the mismatches went to the function.
    assert sum(record is not None for record in held._parsed) <= 20


def test_entries_are_a_repeated_fields_wire_form() -> None:
    data = _held(_rows(200, 11)).data()
    assert any(len(item) >= 128 for item in data) and any(len(item) < 128 for item in data)
    records = [Record.FromString(item) for item in data]
    assert entries(TASK_RECORD, data) == TaskRecords(records=records).SerializeToString()


async def test_records_past_the_memory_budget_keep_no_columns() -> None:
    document = EvalRun()
    document.spec.target.outputs.SetInParent()
    document.spec.evaluators.add(ref="builtin/exact-match")
    stream = stream_rows(_rows(500, 3))
    taken = await take_records(stream, document, budget_mb=0.001, shard_size=100)
    try:
        assert taken.spilled and taken.records is None
        assert stream._builder.columns is None  # nothing per record held once the records go to shards
    finally:
        taken.discard()
