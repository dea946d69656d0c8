"""An embedded evaluation's records taken in as they are read (runs.intake): held within the memory budget, else
streamed as shards into the local store, decided on the records as they arrive; the run's document is the same
either way, and the records it stores are those records_from_rows makes."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest

import evalsi
from evalsi.datasets import load_dataset, records_from_rows, stream_dataset, stream_rows
from evalsi.datasets.shards import read_shard
from evalsi.errors import BadInputError
from evalsi.runs.intake import OBJECTS_DIR, take_records
from evalsi.runs.memory_budget import RECORD_OVERHEAD, RESULT_BYTES, RecordCost
from evalsi.stores.objects import LocalObjectStore
from evalsi.v1alpha1.run_pb2 import EvalRun

ROWS = [
    {"id": f"r{i:03d}", "input": f"question {i}", "output": "yes" if i % 3 else "no", "reference": "yes"}
    for i in range(50)
]


def _document(evaluators: int = 1) -> EvalRun:
    document = EvalRun()
    document.spec.target.outputs.SetInParent()
    for _ in range(evaluators):
        document.spec.evaluators.add(ref="builtin/exact-match")
    return document


def _budget_for(records: int, document: EvalRun) -> float:
    """A budget (MiB) that the first ``records`` of ROWS fit and one more does not."""
    sizes = [len(data) for data in stream_rows(ROWS).encoded()]
    cost = RecordCost.of(document)
    within = cost.run_bytes(records, sum(sizes[:records]))
    beyond = cost.run_bytes(records + 1, sum(sizes[: records + 1]))
    return (within + beyond) / 2 / (1 << 20)


def comparable(results: Any) -> dict[str, Any]:
    document = json.loads(results.to_json())
    for key in ("id", "createTime", "startTime", "endTime"):
        document.pop(key, None)
    document["manifest"].pop("created", None)
    return document


def test_the_run_bytes_count_results_and_the_records_built() -> None:
    assert RecordCost.of(_document(2)).run_bytes(10, 1000) == 10 * 2 * RESULT_BYTES + RECORD_OVERHEAD * 1000
    generating = _document(1)
    generating.spec.target.model.model = "m"
    generating.spec.trials = 3
    # each record's 3 trials' results, the record and its 3 generated copies
    assert RecordCost.of(generating).run_bytes(10, 1000) == 10 * 3 * RESULT_BYTES + RECORD_OVERHEAD * 1000 * 4


async def test_records_within_the_budget_are_held_as_records_from_rows_makes_them() -> None:
    taken = await take_records(stream_rows(ROWS), _document(), budget_mb=1024, shard_size=7)
    expected = records_from_rows(ROWS)
    assert not taken.spilled and taken.directory is None
    assert list(taken.records) == expected.records
    assert (taken.count, taken.version, taken.source) == (50, expected.version, expected.source)


async def test_records_held_are_parsed_a_batch_at_a_time_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("evalsi.datasets.held._PARSE_BATCH", 7)
    taken = await take_records(stream_rows(ROWS), _document(), budget_mb=1024, shard_size=7)
    assert taken.records is not None
    taken.records[10]  # one read already: the batches around it are parsed, it is kept
    assert list(taken.records) == records_from_rows(ROWS).records


async def test_records_found_over_the_budget_part_way_all_go_to_shards_in_order(tmp_path: Path) -> None:
    document = _document()
    taken = await take_records(stream_rows(ROWS), document, budget_mb=_budget_for(20, document), shard_size=7)
    try:
        assert taken.spilled and taken.records is None and taken.directory is not None
        assert taken.manifest is not None and len(taken.manifest.shards) == math.ceil(50 / 7)
        objects = LocalObjectStore(taken.directory / OBJECTS_DIR)
        stored = [record for shard in taken.manifest.shards for record in await read_shard(objects, shard.key)]
        expected = records_from_rows(ROWS)
        assert stored == expected.records  # the 21 read before the budget was passed, then the rest
        assert (taken.count, taken.version) == (50, expected.version)
    finally:
        taken.discard()
    assert not taken.directory.exists()


async def test_a_budget_that_holds_every_record_keeps_them_in_memory() -> None:
    document = _document()
    taken = await take_records(stream_rows(ROWS), document, budget_mb=_budget_for(50, document) * 2, shard_size=7)
    assert not taken.spilled and len(taken.records or []) == 50


async def test_a_store_dir_takes_the_records_whatever_the_budget_and_is_kept(tmp_path: Path) -> None:
    taken = await take_records(stream_rows(ROWS), _document(), budget_mb=1024, store_dir=tmp_path / "kept",
                               shard_size=20)
    taken.discard()
    assert taken.spilled and taken.keep and (tmp_path / "kept" / OBJECTS_DIR).is_dir()


async def test_a_bad_row_after_the_spill_leaves_no_temporary_directory(monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    rows = [*ROWS, {"id": "bad", "output": "x", "trial": -1}]
    with pytest.raises(BadInputError, match=r"<memory>: record 50: field 'trial'"):
        await take_records(stream_rows(rows), _document(), budget_mb=0, shard_size=7)
    assert list(tmp_path.iterdir()) == []


async def test_a_file_over_the_budget_streams_into_shards_with_the_version_load_dataset_gives(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    taken = await take_records(stream_dataset(data), _document(), budget_mb=0, shard_size=16)
    try:
        assert taken.spilled and taken.version == load_dataset(data).version and taken.count == 50
    finally:
        taken.discard()


@pytest.mark.parametrize("scopes", [["exact-match"], ["exact-match", "fuzzy-match"]])
def test_evaluate_gives_one_document_held_spilled_part_way_and_spilled_at_once(scopes: list[str]) -> None:
    document = _document(len(scopes))
    held = evalsi.evaluate(ROWS, scopes, memory_budget=1024)
    part_way = evalsi.evaluate(ROWS, scopes, memory_budget=_budget_for(10, document))
    at_once = evalsi.evaluate(ROWS, scopes, memory_budget=0)
    assert held.stored is None and part_way.stored is not None and at_once.stored is not None
    assert comparable(held) == comparable(part_way) == comparable(at_once)
    for results in (part_way, at_once):
        results.close()


def test_mixed_rows_with_skips_errors_and_metadata_give_one_document_held_or_spilled() -> None:
    @evalsi.evaluator("test/intake-picky", version="1.0.0", requires=["output"])
    def picky(record: evalsi.Record) -> bool:
        if record.output.text == "boom":
            raise ValueError("cannot judge a boom")
        return record.output.text == record.reference.text

    rows: list[dict[str, Any]] = []
    for i in range(60):
        row: dict[str, Any] = {"id": f"m{i}", "input": f"q {i}", "reference": "yes", "tier": i % 4}
        if i % 7:  # every seventh has no output: skipped by both evaluators
            row["output"] = "boom" if i % 5 == 0 else ("yes" if i % 2 else "no")
        if i % 9 == 0:
            row["trial"] = 0
        rows.append(row)
    evaluators: list[Any] = ["exact-match", picky]
    held = evalsi.evaluate(rows, evaluators, cluster_by="tier", memory_budget=1024)
    spilled = evalsi.evaluate(rows, evaluators, cluster_by="tier", memory_budget=_budget_for(5, _document(2)))
    try:
        assert held.stored is None and spilled.stored is not None
        assert comparable(held) == comparable(spilled)
        picky_summary = held.metric("intake-picky")
        assert picky_summary.skipped == 9 and picky_summary.errors > 0 and picky_summary.clusters == 4
    finally:
        spilled.close()


def test_evaluate_over_the_budget_with_progress_counts_every_evaluation(capsys: pytest.CaptureFixture[str]) -> None:
    with evalsi.evaluate(ROWS, ["exact-match"], memory_budget=0, progress=True) as results:
        assert len(results) == 50 and results.metric("exact-match").n == 50


def test_evaluate_refuses_a_bad_row_beyond_the_budget_naming_it() -> None:
    rows = [*ROWS, {"id": "r001", "output": "again", "trial": 0}]
    with pytest.raises(BadInputError, match="record 50: id 'r001' with trial 0 appears twice"):
        asyncio.run(evalsi.evaluate_async(rows, ["exact-match"], memory_budget=0))
