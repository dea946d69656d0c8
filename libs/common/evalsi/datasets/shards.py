"""Datasets in the object store: content-addressed shards of records and one small manifest per version.

A shard is a serialized ``TaskRecords`` of at most ``shard_size`` consecutive records (deterministic bytes, so the
same records give the same key). The manifest (JSON, stored content-addressed too) lists the shards in order with
their record counts and byte sizes, the record count, the shard size, the source and the version: the
:func:`~evalsi.datasets.loader.dataset_version` of the records, computed while they stream past. Records are
written as they are read, so no process holds more than one shard of a dataset. A run plans shards of
``DEFAULT_SHARD_SIZE`` records too, so a run's shard ``i`` is the dataset's shard ``i`` and is never copied.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from evalsi.bus.v1alpha1.bus_pb2 import TaskRecords
from evalsi.errors import InfraError
from evalsi.stores.objects import ObjectStore, content_key
from evalsi.v1alpha1.record_pb2 import Record

DEFAULT_SHARD_SIZE = 500
"""Records per shard, for stored datasets and for a run's plan alike."""
MANIFEST_KIND = "evalsi.dataset-manifest/v1"


@dataclass(frozen=True)
class ShardRef:
    """Where one shard is, and what it holds."""

    key: str
    records: int
    bytes: int


@dataclass(frozen=True)
class DatasetManifest:
    """One dataset version: its shards in order and what identifies the records."""

    version: str  # dataset_version() of the records
    source: str  # the file, or datasets/<name>, the records came from
    format: str
    records: int
    shard_size: int
    shards: tuple[ShardRef, ...]

    def shard_at(self, start: int, stop: int) -> ShardRef:
        """The shard holding exactly records ``start`` to ``stop`` (exclusive); a plan must cut as the store did."""
        index, offset = divmod(start, self.shard_size)
        if offset or index >= len(self.shards) or stop - start != self.shards[index].records:
            raise ValueError(
                f"records {start}..{stop} are not one shard of a dataset cut every {self.shard_size} records "
                f"({self.records} records in {len(self.shards)} shards)"
            )
        return self.shards[index]

    def to_json(self) -> bytes:
        document = {
            "kind": MANIFEST_KIND,
            "version": self.version,
            "source": self.source,
            "format": self.format,
            "records": self.records,
            "shard_size": self.shard_size,
            "shards": [[shard.key, shard.records, shard.bytes] for shard in self.shards],
        }
        return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes, *, key: str = "") -> DatasetManifest:
        try:
            document = json.loads(data)
            if document.get("kind") != MANIFEST_KIND:
                raise ValueError(f"kind {document.get('kind')!r}, expected {MANIFEST_KIND!r}")
            return cls(
                version=str(document["version"]),
                source=str(document["source"]),
                format=str(document["format"]),
                records=int(document["records"]),
                shard_size=int(document["shard_size"]),
                shards=tuple(ShardRef(str(k), int(n), int(b)) for k, n, b in document["shards"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise InfraError(f"dataset manifest {key or '(unnamed)'} is not readable: {exc}") from None


class ShardWriter:
    """Cuts records into shards and hashes them as they pass; pure (the caller stores the bytes it returns)."""

    def __init__(self, *, shard_size: int = DEFAULT_SHARD_SIZE) -> None:
        if shard_size < 1:
            raise ValueError(f"shard_size must be >= 1, got {shard_size}")
        self.shard_size = shard_size
        self.records = 0
        self._digest = hashlib.sha256()
        self._pending: list[Record] = []

    def add(self, record: Record) -> bytes | None:
        """Take one record; the bytes of a full shard once ``shard_size`` records are waiting, else None."""
        _hash_into(self._digest, record)
        self._pending.append(record)
        self.records += 1
        if len(self._pending) == self.shard_size:
            return self.flush()
        return None

    def flush(self) -> bytes | None:
        """The bytes of the records waiting (a last, shorter shard), or None when none are."""
        if not self._pending:
            return None
        data = TaskRecords(records=self._pending).SerializeToString(deterministic=True)
        self._pending = []
        return data

    @property
    def waiting(self) -> int:
        return len(self._pending)

    def adopt(self, records: Iterable[Record]) -> None:
        """Count and hash a full shard that is stored already (appending to a version reuses its shards)."""
        if self._pending:
            raise ValueError("a stored shard can only follow whole shards")
        for record in records:
            _hash_into(self._digest, record)
            self.records += 1

    @property
    def version(self) -> str:
        return self._digest.hexdigest()


def _hash_into(digest: Any, record: Record) -> None:
    """``dataset_version``'s contribution of one record: its bytes without ``provenance.dataset``, length-prefixed.

    The field is cleared and restored rather than the record copied: this runs once per record of every upload.
    """
    provenance = record.provenance
    named = provenance.dataset
    if named:
        provenance.dataset = ""
    data = record.SerializeToString(deterministic=True)
    if named:
        provenance.dataset = named
    digest.update(len(data).to_bytes(8, "big"))
    digest.update(data)


async def write_dataset(
    objects: ObjectStore | None,
    records: Iterator[Record],
    *,
    source: str,
    format: str,
    shard_size: int = DEFAULT_SHARD_SIZE,
) -> DatasetManifest:
    """Store ``records`` as shards while reading them; the manifest (not stored: see :func:`put_manifest`).

    ``records`` is pulled a shard at a time in a worker thread (a file reader blocks and parses), so the event
    loop stays free. With ``objects`` None nothing is stored: the manifest's keys are what they would be
    (a dry run counts and versions the records the same way).
    """
    writer = ShardWriter(shard_size=shard_size)
    shards: list[ShardRef] = []

    def next_shard() -> bytes | None:
        for record in records:
            data = writer.add(record)
            if data is not None:
                return data
        return writer.flush()

    while True:
        before = writer.records
        data = await asyncio.to_thread(next_shard)
        if data is None:
            break
        key = await objects.put(data) if objects is not None else content_key(data)
        shards.append(ShardRef(key, writer.records - before, len(data)))
    return DatasetManifest(writer.version, source, format, writer.records, shard_size, tuple(shards))


async def put_manifest(objects: ObjectStore, manifest: DatasetManifest) -> str:
    """Store the manifest; its key names the dataset version everywhere (a run's label, a stored version)."""
    return await objects.put(manifest.to_json())


async def read_manifest(objects: ObjectStore, key: str) -> DatasetManifest:
    return DatasetManifest.from_json(await objects.get(key), key=key)


async def read_shard(objects: ObjectStore, key: str) -> list[Record]:
    holder = TaskRecords()
    holder.ParseFromString(await objects.get(key))
    return list(holder.records)


async def iter_shards(objects: ObjectStore, manifest: DatasetManifest) -> AsyncIterator[list[Record]]:
    """The records a shard at a time, in order: at most one shard in memory."""
    for shard in manifest.shards:
        yield await read_shard(objects, shard.key)
