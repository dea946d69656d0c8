"""Datasets as content-addressed shards and a manifest; streaming readers; a served run's record access."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalsi.bus.v1alpha1.bus_pb2 import TaskRecords
from evalsi.datasets import dataset_version, load_dataset, stream_dataset
from evalsi.datasets.run_records import DATASET_LABEL, StoredRunRecords
from evalsi.datasets.shards import (
    DatasetManifest,
    iter_shards,
    put_manifest,
    read_manifest,
    write_dataset,
)
from evalsi.datasets.stored import DatasetStore
from evalsi.errors import BadInputError, InfraError
from evalsi.runs.plan import DEFAULT_SHARD_SIZE
from evalsi.stores.objects import LocalObjectStore
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import Run


def _write_jsonl(path: Path, rows: int) -> Path:
    with path.open("w") as f:
        for i in range(rows):
            f.write(json.dumps({"id": f"r{i}", "input": f"q{i}", "output": str(i % 3), "reference": "1"}) + "\n")
    return path


def _objects_in(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and not p.name.startswith(".")}


def test_stored_shards_are_the_plans_shards() -> None:
    assert DEFAULT_SHARD_SIZE == 500  # runs.plan takes its shard size from datasets.shards


async def test_a_dataset_goes_once_into_shards_and_a_manifest(tmp_path: Path) -> None:
    data = _write_jsonl(tmp_path / "qa.jsonl", 1234)
    objects = LocalObjectStore(tmp_path / "objects")
    manifest = await write_dataset(objects, iter(stream_dataset(data)), source="qa.jsonl", format="jsonl",
                                   shard_size=500)
    key = await put_manifest(objects, manifest)
    expected = load_dataset(data)
    assert manifest.version == expected.version == dataset_version(expected.records)
    assert (manifest.records, [s.records for s in manifest.shards]) == (1234, [500, 500, 234])
    # Exactly the shards and the manifest were written: no blob of the whole dataset.
    assert _objects_in(tmp_path / "objects") == {key, *(s.key for s in manifest.shards)}
    assert [s.bytes for s in manifest.shards] == [len(await objects.get(s.key)) for s in manifest.shards]
    back = await read_manifest(objects, key)
    assert back == manifest
    read: list[Record] = []
    async for shard in iter_shards(objects, back):
        read.extend(shard)
    assert read == expected.records  # every field round-trips, provenance included

    # Content-addressed: the same records give the same keys, stored or only counted (a dry run).
    again = await write_dataset(None, iter(stream_dataset(data)), source="qa.jsonl", format="jsonl", shard_size=500)
    assert again == manifest


def test_a_manifest_that_is_not_one_is_an_infra_error() -> None:
    with pytest.raises(InfraError, match="dataset manifest k is not readable"):
        DatasetManifest.from_json(b'{"kind": "other"}', key="k")


def test_a_stream_reads_lazily_and_once(tmp_path: Path) -> None:
    data = tmp_path / "bad.jsonl"
    data.write_text('{"id": "a", "input": "x"}\n{"id": "b", "input": "y"}\nnot json\n')
    stream = stream_dataset(data)
    records = iter(stream)
    assert [next(records).id, next(records).id] == ["a", "b"]  # read before the bad line is reached
    with pytest.raises(RuntimeError, match="once every record was read"):
        _ = stream.version
    with pytest.raises(BadInputError, match=r"bad.jsonl:3: not valid JSON"):
        next(records)
    with pytest.raises(RuntimeError, match="read once"):
        iter(stream)
    named = stream_dataset(data, name="given.jsonl", limit=1)
    assert [r.provenance.dataset for r in named] == ["given.jsonl"] and named.count == 1


async def test_appending_reuses_full_shards_and_keeps_old_versions(tmp_path: Path) -> None:
    objects = LocalObjectStore(tmp_path)
    store = DatasetStore(objects, shard_size=2)
    records = [Record(id=f"t{i}") for i in range(5)]
    first = await store.append("p", "d", records[:3])
    assert first is not None
    _, first_manifest = await store.resolve("p", "datasets/d")
    second = await store.append("p", "d", [records[2], records[3], records[4]])  # t2 is there already
    assert second is not None and second.records == 5
    _, second_manifest = await store.resolve("p", "datasets/d")
    assert second_manifest.shards[0] == first_manifest.shards[0]  # the full shard is reused, not rewritten
    assert [s.records for s in second_manifest.shards] == [2, 2, 1]
    assert second.version == dataset_version(records)
    old = await store.load("p", f"datasets/d@{first.version}")
    assert [r.id for r in old.records] == ["t0", "t1", "t2"]


async def test_pushing_the_same_records_twice_keeps_one_version(tmp_path: Path) -> None:
    data = _write_jsonl(tmp_path / "qa.jsonl", 7)
    store = DatasetStore(LocalObjectStore(tmp_path / "objects"), shard_size=3)
    first = await store.push("p", "qa", iter(stream_dataset(data)), format="jsonl")
    second = await store.push("p", "qa", iter(stream_dataset(data)), format="jsonl")
    assert first == second and len(await store.versions("p", "qa")) == 1
    assert first.ref == f"datasets/qa@{load_dataset(data).version}"


async def test_a_served_run_reads_the_stored_shards(tmp_path: Path) -> None:
    data = _write_jsonl(tmp_path / "qa.jsonl", 1100)
    objects = LocalObjectStore(tmp_path / "objects")
    manifest = await write_dataset(objects, iter(stream_dataset(data)), source="qa.jsonl", format="jsonl")
    run = Run(id="run-1")
    run.labels[DATASET_LABEL] = await put_manifest(objects, manifest)
    records = StoredRunRecords(objects)
    assert await records.record_count(run) == 1100
    # A task of shard 1 carries the stored shard's key: nothing is written to publish it.
    before = _objects_in(tmp_path / "objects")
    assert await records.shard_ref(run, 500, 1000) == manifest.shards[1].key
    assert _objects_in(tmp_path / "objects") == before
    expected = load_dataset(data).records
    assert await records.shard_records(run, 450, 1050) == expected[450:1050]
    # A range the store did not cut is stored once for the task that needs it.
    odd = await records.shard_ref(run, 10, 20)
    assert list(TaskRecords.FromString(await objects.get(odd)).records) == expected[10:20]
    with pytest.raises(Exception, match="has no dataset manifest"):
        await records.record_count(Run(id="run-2"))
