"""A dataset refused part way leaves nothing in the object store, a real one (SeaweedFS's S3) or a local directory:
shards are spooled while the records are read and stored only once the last one was read and found good."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalsi.datasets import stream_dataset
from evalsi.datasets.shards import write_dataset
from evalsi.datasets.stored import DatasetStore
from evalsi.errors import BadInputError
from evalsi.stores import ObjectStore


def _rows(path: Path, count: int, *, bad_last: bool) -> Path:
    with path.open("w") as f:
        for i in range(count):
            f.write(json.dumps({"id": f"r{i}", "input": f"q{i}", "output": str(i % 3)}) + "\n")
        if bad_last:
            f.write('{"id": "broken", \n')
    return path


async def _shard_keys(path: Path) -> list[str]:
    """The keys the file's shards have (computed, nothing stored)."""
    manifest = await write_dataset(None, stream_dataset(path), source=path.name, format="jsonl", shard_size=100)
    return [shard.key for shard in manifest.shards]


async def test_a_run_dataset_with_a_bad_last_row_stores_no_shard(object_store: ObjectStore, tmp_path: Path) -> None:
    good = _rows(tmp_path / "good.jsonl", 250, bad_last=False)
    keys = await _shard_keys(good)
    assert len(keys) == 3
    bad = _rows(tmp_path / "good-then-bad.jsonl", 250, bad_last=True)
    with pytest.raises(BadInputError, match=r"^good\.jsonl:251: not valid JSON"):
        await write_dataset(object_store, stream_dataset(bad, name="good.jsonl"), source="good.jsonl", format="jsonl",
                            shard_size=100)
    assert [await object_store.exists(key) for key in keys] == [False, False, False]
    # The same records without the bad row are stored under exactly those keys.
    manifest = await write_dataset(object_store, stream_dataset(good), source="good.jsonl", format="jsonl",
                                   shard_size=100)
    assert [shard.key for shard in manifest.shards] == keys
    assert [await object_store.exists(key) for key in keys] == [True, True, True]


async def test_a_refused_upload_adds_no_version_and_no_shard(object_store: ObjectStore, tmp_path: Path) -> None:
    keys = await _shard_keys(_rows(tmp_path / "good.jsonl", 250, bad_last=False))
    store = DatasetStore(object_store, shard_size=100)
    bad = _rows(tmp_path / "bad.jsonl", 250, bad_last=True)
    with pytest.raises(BadInputError, match=r"^good\.jsonl:251"):
        await store.push("p", "questions", stream_dataset(bad, name="good.jsonl"), format="jsonl")
    assert await store.versions("p", "questions") == []
    assert [await object_store.exists(key) for key in keys] == [False, False, False]
