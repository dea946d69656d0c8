"""An embedded run's records taken in as they are read: held in memory while the run they make fits its memory
budget, else streamed as shards into a local store, never all held as messages.

The budget is checked on the records as they arrive, by their count and their encoded size (``runs.memory_budget``,
``RecordCost``), not from an estimate made once every record is built: a run found over it at its n-th record
writes the n records read so far and every later one into content-addressed shards in the local store's object
directory, cut as the run's plan cuts them (``datasets.shards``, as the api's CreateRun stores a dataset), and
parses none of them. The run then reads them back a shard at a time (``runs.local``, ``datasets.run_records``).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

from evalsi.datasets import RecordStream
from evalsi.datasets.held import HeldRecords
from evalsi.datasets.shards import DatasetManifest, ShardRef, ShardWriter, iter_shards
from evalsi.evaluators import BoundEvaluator
from evalsi.evaluators.runner import session_key, units_total
from evalsi.runs.memory_budget import RecordCost
from evalsi.stores.objects import LocalObjectStore
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import EvalRun

OBJECTS_DIR = "objects"  # the local store's object directory, under its directory


@dataclass
class TakenRecords:
    """A run's records once read: ``records`` held in memory, or (``spilled``) shards under ``directory``."""

    source: str
    version: str
    count: int
    records: Sequence[Record] | None = None
    directory: Path | None = None  # the local store's directory, once the records went there
    manifest: DatasetManifest | None = None
    keep: bool = False  # the directory was the caller's (store_dir): it stays

    @property
    def spilled(self) -> bool:
        return self.manifest is not None

    def discard(self) -> None:
        """Remove the local store's directory (a run that will not go), unless it is the caller's."""
        if self.directory is not None and not self.keep:
            shutil.rmtree(self.directory, ignore_errors=True)

    async def batches(self) -> AsyncIterator[Sequence[Record]]:
        """The records: those held, at once; stored ones a shard at a time (one shard in memory)."""
        if self.manifest is None or self.directory is None:
            yield self.records or []
            return
        async for shard in iter_shards(LocalObjectStore(self.directory / OBJECTS_DIR), self.manifest):
            yield shard

    async def units(self, bound: Sequence[BoundEvaluator]) -> int:
        """The evaluations of ``bound`` over these records (a progress bar's total); stored records are read only
        when a span or session evaluator needs their steps or sessions."""
        if self.manifest is None or self.directory is None:
            return units_total(self.records or [], bound)
        scopes = [b.evaluator.scope for b in bound]
        per_record = len(scopes) - scopes.count("span") - scopes.count("session")
        if per_record == len(scopes):
            return self.count * per_record
        steps, sessions = 0, set[str]()
        async for shard in self.batches():
            steps += sum(len(record.trajectory.steps) for record in shard)
            sessions.update(session_key(record) or record.id for record in shard)
        return scopes.count("span") * steps + scopes.count("session") * len(sessions) + per_record * self.count


async def take_records(
    stream: RecordStream,
    document: EvalRun,
    *,
    budget_mb: float,
    store_dir: str | Path | None = None,
    shard_size: int,
) -> TakenRecords:
    """Read ``stream`` through: its records held while ``document``'s run over those read so far fits ``budget_mb``
    MiB, else every one of them as shards in a local store (in ``store_dir`` when given, whatever the budget; else
    a temporary directory). A bad record raises ``BadInputError`` where it is, leaving no temporary directory."""
    columns = stream.keep_columns() if store_dir is None else None
    batches = stream.encoded_batches()
    held: list[bytes] = []
    if store_dir is None:
        cost = RecordCost.of(document)
        per_record, factor = cost.result_bytes, cost.record_factor
        room = budget_mb * (1 << 20)
        used = 0  # cost.run_bytes(len(held), the bytes held), summed a batch at a time as they come
        for batch in batches:
            held += batch
            used += per_record * len(batch) + factor * sum(map(len, batch))
            if used > room:
                break
        else:
            # Held as read: parsed where a record is read, its columns read by the runner (datasets.held).
            return TakenRecords(stream.source, stream.version, len(held), records=HeldRecords(held, columns))
    stream.drop_columns()  # over the budget: the records go to shards, and nothing per record stays here
    del columns
    keep = store_dir is not None
    directory = Path(store_dir) if store_dir is not None else Path(tempfile.mkdtemp(prefix="evalsi-run-"))
    taken = TakenRecords(stream.source, "", 0, directory=directory, keep=keep)
    try:
        taken.manifest = await _write_shards(
            LocalObjectStore(directory / OBJECTS_DIR), _chain(held, chain.from_iterable(batches)), stream, shard_size
        )
    except BaseException:
        taken.discard()
        raise
    taken.version, taken.count = taken.manifest.version, taken.manifest.records
    return taken


def _chain(first: list[bytes], rest: Iterator[bytes]) -> Iterator[bytes]:
    """``first`` let go of as it is written, then ``rest``."""
    first.reverse()
    while first:
        yield first.pop()
    yield from rest


async def _write_shards(
    objects: LocalObjectStore, encoded: Iterator[bytes], stream: RecordStream, shard_size: int
) -> DatasetManifest:
    """Every record into shards of ``shard_size``, each stored as soon as it is full: one shard in memory."""
    writer = ShardWriter(shard_size=shard_size)
    shards: list[ShardRef] = []

    async def put(data: bytes | None) -> None:
        if data is not None:
            shards.append(ShardRef(await objects.put(data), writer.flushed, len(data)))

    for data in encoded:
        await put(writer.add_encoded(data))
    await put(writer.flush())
    return DatasetManifest(stream.version, stream.source, stream.format, writer.records, shard_size, tuple(shards))
