"""Stored datasets in the object store: versions are new objects (never mutated), refs resolve to a version,
concurrent appends keep every record."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from evalsi.datasets.stored import DatasetStore, parse_ref
from evalsi.errors import BadInputError
from evalsi.stores.objects import LocalObjectStore
from evalsi.v1alpha1.record_pb2 import Record


def _record(i: int) -> Record:
    record = Record(id=f"trace-{i}")
    record.input.text = f"question {i}"
    record.output.text = f"answer {i}"
    record.trajectory.trace_id = f"{i:032x}"
    return record


async def test_append_creates_versions_and_refs_resolve(tmp_path: Path) -> None:
    store = DatasetStore(LocalObjectStore(tmp_path), clock=lambda: 5.0)
    first = await store.append("p", "regressions", [_record(1), _record(2)])
    assert first is not None and first.records == 2
    assert await store.append("p", "regressions", [_record(2)]) is None  # already there: no new version
    second = await store.append("p", "regressions", [_record(2), _record(3)])
    assert second is not None and second.records == 3 and second.version != first.version
    assert [v.version for v in await store.versions("p", "regressions")] == [first.version, second.version]

    latest = await store.load("p", "datasets/regressions")
    assert [r.id for r in latest.records] == ["trace-1", "trace-2", "trace-3"]
    assert latest.version == second.version and latest.records[2].trajectory.trace_id == f"{3:032x}"
    assert latest.records[0].provenance.dataset == f"datasets/regressions@{second.version}"
    old = await store.load("p", f"datasets/regressions@{first.version[:10]}")
    assert [r.id for r in old.records] == ["trace-1", "trace-2"]  # the old version is unchanged
    assert await store.versions("other", "regressions") == []
    with pytest.raises(BadInputError, match="has no dataset"):
        await store.load("other", "datasets/regressions")
    with pytest.raises(BadInputError, match="is not a version"):
        await store.load("p", "datasets/regressions@ffff")


async def test_concurrent_appends_lose_nothing(tmp_path: Path) -> None:
    store = DatasetStore(LocalObjectStore(tmp_path))
    await asyncio.gather(*(store.append("p", "d", [_record(i)]) for i in range(6)))
    latest = await store.load("p", "datasets/d")
    assert sorted(r.id for r in latest.records) == sorted(f"trace-{i}" for i in range(6))
    assert len(await store.versions("p", "d")) == 6


def test_parse_ref_names_the_form() -> None:
    assert parse_ref("datasets/a-b@12ab") == ("a-b", "12ab")
    assert parse_ref("datasets/a") == ("a", "")
    with pytest.raises(BadInputError, match="expected datasets/<name>"):
        parse_ref("regressions@1")
