"""The dataset of a submitted run: a file under the server's datasets directory (never outside it), read as a
stream and stored as shards, or a stored dataset named by ``spec.dataset.ref``, used as it is stored."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from evalsi.datasets import RecordStream, stream_dataset
from evalsi.datasets.shards import DatasetManifest, put_manifest, read_shard, write_dataset
from evalsi.datasets.stored import DatasetStore
from evalsi.edge_checks import text_problem
from evalsi.errors import BadInputError
from evalsi.runs.cluster_keys import refuse_unknown_cluster_key as cluster_key_warning
from evalsi.runs.spec import resolve_dataset_path
from evalsi.stores.objects import ObjectStore
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import EvalRun

Described = TypeVar("Described")  # what a dry run's ``describe`` makes of the records


def load_run_dataset(run: EvalRun, *, datasets_dir: Path) -> RecordStream:
    """The records of ``run.spec.dataset.path`` (a file under ``datasets_dir``, symlinks resolved), as a stream.

    The same readers as embedded runs, confined to the datasets directory; only files are read (``hf://`` is
    refused by name; a stored ``ref`` is read by :func:`store_run_dataset`). Records and errors name the dataset
    as the caller gave it: never the server's absolute paths, nor where a symbolic link leads.
    """
    source = run.spec.dataset
    kind = source.WhichOneof("kind")
    if kind is None:
        raise BadInputError("spec.dataset.path: required (a file under the server's datasets directory)")
    if kind != "path":
        raise BadInputError(
            f"spec.dataset.{kind}: this server reads datasets from files under its datasets directory "
            "(spec.dataset.path) or from its stored datasets (spec.dataset.ref)"
        )
    if source.split:
        raise BadInputError(f"spec.dataset.split: applies to hf datasets only, not to the file {source.path!r}")
    root = Path(datasets_dir)
    real = resolve_dataset_path(run, base_dir=root, datasets_dir=root)  # refuses (safely) what leads outside
    given = source.path
    try:
        # Record ids key result rows (a Postgres text column): one the store cannot hold is refused where it is.
        return stream_dataset(
            real, mapping=dict(source.mapping) or None, limit=source.limit or None, format=source.format or None,
            name=_shown(given, root), check_id=text_problem,
        )
    except BadInputError as exc:
        raise BadInputError(f"spec.dataset.path: {exc}") from None


OpenRecords = Callable[[EvalRun], RecordStream]


@dataclass(frozen=True)
class RunDataset:
    """Where a run's records are: a stored manifest (``key``) and what it says."""

    key: str
    manifest: DatasetManifest


async def store_run_dataset(
    run: EvalRun, *, project: str, objects: ObjectStore, open_records: OpenRecords
) -> RunDataset:
    """The run's dataset in the object store: a file is streamed into shards (one shard in memory at a time); a
    stored dataset (``spec.dataset.ref``) is its version's manifest, nothing copied."""
    if run.spec.dataset.WhichOneof("kind") == "ref":
        _refuse_reading_options(run)
        version, manifest = await DatasetStore(objects).resolve(project, run.spec.dataset.ref)
        return RunDataset(version.key, manifest)
    stream = await asyncio.to_thread(open_records, run)
    try:
        # The stream's own bytes go into the shards: each record is encoded once, and parsed never.
        manifest = await write_dataset(objects, stream, source=stream.source, format=stream.format)
    except BadInputError as exc:
        raise BadInputError(f"spec.dataset.path: {exc}") from None
    return RunDataset(await put_manifest(objects, manifest), manifest)


@dataclass(frozen=True)
class DatasetCount:
    """How many records a run's dataset holds, and their version: what a dry run says without the records."""

    records: int
    version: str
    source: str


async def count_run_dataset(
    run: EvalRun, *, project: str, objects: ObjectStore, open_records: OpenRecords
) -> DatasetCount:
    """The run's dataset counted and versioned, holding none of its records: a stored dataset (``spec.dataset.ref``)
    from its manifest alone, a file by reading it through (every row checked as a run would check it) without
    making a Record of any row. For a dry run whose projection needs no record's content."""
    if run.spec.dataset.WhichOneof("kind") == "ref":
        _refuse_reading_options(run)
        version, manifest = await DatasetStore(objects).resolve(project, run.spec.dataset.ref)
        return DatasetCount(manifest.records, version.version, manifest.source)

    def count() -> DatasetCount:
        stream = open_records(run)
        try:
            for _ in stream.encoded():
                pass
        except BadInputError as exc:
            raise BadInputError(f"spec.dataset.path: {exc}") from None
        return DatasetCount(stream.count, stream.version, stream.source)

    return await asyncio.to_thread(count)


async def describe_run_dataset(
    run: EvalRun, *, project: str, objects: ObjectStore, open_records: OpenRecords,
    describe: Callable[[Iterable[Record]], Described],
) -> tuple[Described, DatasetCount]:
    """A dry run's description, ``describe`` reading the run's records once, one at a time, in a thread (a file read
    through, a stored dataset a shard at a time): no whole dataset is ever held. With the records' count and
    version."""
    if run.spec.dataset.WhichOneof("kind") == "ref":
        _refuse_reading_options(run)
        version, manifest = await DatasetStore(objects).resolve(project, run.spec.dataset.ref)
        loop = asyncio.get_running_loop()

        def stored() -> Iterator[Record]:
            for shard in manifest.shards:
                yield from asyncio.run_coroutine_threadsafe(read_shard(objects, shard.key), loop).result()

        text = await asyncio.to_thread(describe, stored())
        return text, DatasetCount(manifest.records, version.version, manifest.source)

    def read() -> tuple[Described, DatasetCount]:
        stream = open_records(run)
        text = describe(_prefixed(stream))
        return text, DatasetCount(stream.count, stream.version, stream.source)

    return await asyncio.to_thread(read)


async def refuse_unknown_cluster_key(
    run: EvalRun, *, project: str, objects: ObjectStore, open_records: OpenRecords
) -> str:
    """Refuse (``BadInputError``, a 400) a ``spec.summary.clusterBy`` key no record of the run's dataset has: every
    record would be its own cluster, silently. The warning when only some records lack it (empty otherwise).
    Reads the records once, one at a time, only when the key is set."""
    key = run.spec.summary.cluster_by
    if not key:
        return ""

    def check(records: Iterable[Record]) -> str:
        return cluster_key_warning(records, key, "spec.summary.clusterBy")

    warning, _ = await describe_run_dataset(run, project=project, objects=objects, open_records=open_records,
                                            describe=check)
    return warning


def _refuse_reading_options(run: EvalRun) -> None:
    """A stored dataset holds records, read (and mapped) when it was stored: options for reading a file do not
    apply, and ignoring them would run over other records than the spec says."""
    source = run.spec.dataset
    for field, given in (("mapping", bool(source.mapping)), ("limit", bool(source.limit)),
                         ("format", bool(source.format)), ("split", bool(source.split))):
        if given:
            raise BadInputError(
                f"spec.dataset.{field}: applies when reading a file, not to the stored dataset {source.ref!r} "
                "(its records were read when it was stored); remove it"
            )


def _prefixed(stream: RecordStream) -> Iterator[Record]:
    """The stream's records; an error found while reading names the spec field it came from."""
    try:
        yield from stream
    except BadInputError as exc:
        raise BadInputError(f"spec.dataset.path: {exc}") from None


def _shown(given: str, root: Path) -> str:
    """How records and errors name the file: as the caller gave it, an absolute path relative to the datasets
    directory (as configured, and as it really is when it is itself reached through a link)."""
    for prefix in (str(root.absolute()), os.path.realpath(root)):
        if given.startswith(prefix + os.sep):
            return given[len(prefix) + 1 :]
    return given
