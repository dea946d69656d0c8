"""Datasets in the object store: content-addressed shards of records and one small manifest per version.

A shard is a serialized ``TaskRecords`` of at most ``shard_size`` consecutive records (deterministic bytes, so the
same records give the same key). The manifest (JSON, stored content-addressed too) lists the shards in order with
their record counts and byte sizes, the record count, the shard size, the source and the version: the
:func:`~evalsi.datasets.loader.dataset_version` of the records, computed while they stream past. Records are
cut into shards as they are read and spooled to a temporary file until the last one is read, then stored: no
process holds more than a few shards of a dataset, and a dataset refused part way leaves nothing in the store. A
run plans shards of ``DEFAULT_SHARD_SIZE`` records too, so a run's shard ``i`` is the dataset's shard ``i``
and is never copied.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import tempfile
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from evalsi.bus.v1alpha1.bus_pb2 import TaskRecords
from evalsi.datasets.loader import RecordStream, hash_record
from evalsi.datasets.wire import task_records_entry
from evalsi.errors import InfraError
from evalsi.stores.objects import ObjectStore, content_key
from evalsi.v1alpha1.record_pb2 import Record

DEFAULT_SHARD_SIZE = 500
"""Records per shard, for stored datasets and for a run's plan alike."""
MANIFEST_KIND = "evalsi.dataset-manifest/v1"
_PUTS_AT_ONCE = 8  # shards in flight to the object store
_WINDOW_BYTES = 16 << 20  # and at most about this much of them in memory


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
    """Cuts records into shards (and hashes Records as they pass); pure (the caller stores the bytes it returns).

    A shard's bytes are its records' entries in a ``TaskRecords``, concatenated: the same bytes as serializing
    the message, without building it.
    """

    def __init__(self, *, shard_size: int = DEFAULT_SHARD_SIZE) -> None:
        if shard_size < 1:
            raise ValueError(f"shard_size must be >= 1, got {shard_size}")
        self.shard_size = shard_size
        self.records = 0
        self.flushed = 0  # records in the shard flush() returned last
        self._digest = hashlib.sha256()
        self._pending: list[bytes] = []

    def add(self, record: Record) -> bytes | None:
        """Take one record; the bytes of a full shard once ``shard_size`` records are waiting, else None."""
        hash_record(self._digest, record)
        return self.add_encoded(record.SerializeToString(deterministic=True))

    def add_encoded(self, record: bytes) -> bytes | None:
        """:meth:`add` for a record already serialized (deterministically); not hashed: its source knows the
        version."""
        pending = self._pending
        pending.append(task_records_entry(record))
        self.records += 1
        if len(pending) == self.shard_size:
            return self.flush()
        return None

    def flush(self) -> bytes | None:
        """The bytes of the records waiting (a last, shorter shard), or None when none are."""
        if not self._pending:
            return None
        data = b"".join(self._pending)
        self.flushed = len(self._pending)
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
            hash_record(self._digest, record)
            self.records += 1

    @property
    def version(self) -> str:
        return self._digest.hexdigest()


async def write_dataset(
    objects: ObjectStore | None,
    records: Iterable[Record],
    *,
    source: str,
    format: str,
    shard_size: int = DEFAULT_SHARD_SIZE,
) -> DatasetManifest:
    """Store ``records`` as shards once all of them were read and found good; the manifest (not stored: see
    :func:`put_manifest`).

    Records are cut into shards as they are read, in a worker thread (a file reader blocks and parses), and the
    shards spooled to an unnamed temporary file; only when the last record was read do they go into the object
    store. A dataset refused at its last row so leaves nothing there: a content-addressed shard has no owner that
    could delete it later, as the same shard may belong to a dataset that is kept. Memory holds a few shards
    whatever the dataset's size. With ``objects`` None nothing is stored: the manifest's keys are what they would be
    (a dry run counts and versions the records the same way).
    """
    writer = ShardWriter(shard_size=shard_size)
    # A stream's records go as the bytes they were encoded to: none parsed, none encoded again.
    encoded = isinstance(records, RecordStream)
    items: Iterator[Any] = records.encoded() if isinstance(records, RecordStream) else iter(records)
    add: Callable[[Any], bytes | None] = writer.add_encoded if encoded else writer.add
    counts: list[tuple[int, int]] = []  # (records, bytes) of each shard
    keys: list[str] = []
    spool: BinaryIO | None = None

    def next_shard() -> bool:
        data = None
        for item in items:
            data = add(item)
            if data is not None:
                break
        else:
            data = writer.flush()
        if data is None:
            return False
        counts.append((writer.flushed, len(data)))
        if spool is None:
            keys.append(content_key(data))
        else:
            spool.write(data)
        return True

    try:
        if objects is not None:
            spool = await asyncio.to_thread(tempfile.TemporaryFile)
        while await asyncio.to_thread(next_shard):
            pass
        if objects is not None and spool is not None:
            keys = await _store_spooled(objects, spool, [size for _, size in counts])
    finally:
        if spool is not None:
            spool.close()
    version = records.version if isinstance(records, RecordStream) else writer.version
    shards = tuple(ShardRef(key, n, size) for key, (n, size) in zip(keys, counts, strict=True))
    return DatasetManifest(version, source, format, writer.records, shard_size, shards)


async def _store_spooled(objects: ObjectStore, spool: BinaryIO, sizes: list[int]) -> list[str]:
    """Put the spooled shards, a window of them at a time (the store's latency overlaps; memory stays bounded)."""
    await asyncio.to_thread(spool.seek, 0)
    keys: list[str] = []
    start = 0
    while start < len(sizes):
        stop, window = start, 0
        while stop < len(sizes) and stop - start < _PUTS_AT_ONCE and window < _WINDOW_BYTES:
            window += sizes[stop]
            stop += 1
        chunks = await asyncio.to_thread(_read_each, spool, sizes[start:stop])
        keys.extend(await asyncio.gather(*(objects.put(chunk) for chunk in chunks)))
        start = stop
    return keys


def _read_each(spool: BinaryIO, sizes: list[int]) -> list[bytes]:
    return [spool.read(size) for size in sizes]


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
