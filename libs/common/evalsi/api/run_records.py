"""ListRunRecords: a run's records as it evaluated them, so a result (its record_id) can be followed to what was
graded: the input, the output, the reference, the context, an agent's trajectory, usage and metadata.

For a target that generates outputs these are its outputs of one trial (the stored result of each generation task,
in shard order); for a run whose dataset carried the outputs, the dataset's records (one trial). They are read a
chunk at a time from the object store, never the whole run at once: a page is ``page_size`` records from a
position (chunk, offset) the page token carries; asked for given ``record_ids`` (at most
:data:`MAX_RECORD_IDS`), the chunks are read in order until every id was found or the records end.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from evalsi.bus.v1alpha1.bus_pb2 import STAGE_GENERATE
from evalsi.errors import BadInputError
from evalsi.runs.ports import RunRecords
from evalsi.stores.metadata import RunStore
from evalsi.targets.identity import generation_kind
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import Run

MAX_RECORD_IDS = 100
DATASET_CHUNK = 1000  # records of a given-outputs run read at once

Chunk = Callable[[], Awaitable[list[Record]]]


async def chunks_of(run: Run, trial: int, store: RunStore, records: RunRecords) -> list[Chunk]:
    """How to read each chunk of the run's records of ``trial``, in order, none of them read yet."""
    if generation_kind(run.spec.target, run.spec.harness) == "outputs":
        if trial != 0:
            raise BadInputError(f"trial: {trial}; run {run.id} graded the outputs its dataset carries, so its records "
                                "have trial 0 only")
        count = await records.record_count(run)
        return [_dataset_chunk(run, records, start, min(start + DATASET_CHUNK, count))
                for start in range(0, count, DATASET_CHUNK)]
    trials = max(run.spec.trials, 1)
    if not 0 <= trial < trials:
        raise BadInputError(f"trial: {trial} is not a trial of run {run.id} (0 to {trials - 1})")
    rows = await store.list_tasks(run.id, states=("done",), stage=STAGE_GENERATE)
    return [_output_chunk(records, row.output_ref) for row in sorted(rows, key=lambda r: r.shard) if row.trial == trial]


def _dataset_chunk(run: Run, records: RunRecords, start: int, stop: int) -> Chunk:
    return lambda: records.shard_records(run, start, stop)


def _output_chunk(records: RunRecords, ref: str) -> Chunk:
    return lambda: records.outputs(ref)


def parse_token(token: str) -> tuple[int, int]:
    """``"<chunk>:<offset>"`` → the position a page starts at; ``""`` is the start."""
    if not token:
        return 0, 0
    chunk, _, offset = token.partition(":")
    if not (chunk.isdigit() and offset.isdigit()):
        raise BadInputError(f"page_token: {token[:40]!r} is not a token this call returned (pass next_page_token)")
    return int(chunk), int(offset)


async def page_of(chunks: Sequence[Chunk], page_size: int, token: str) -> tuple[list[Record], str]:
    """``page_size`` records from the token's position, and the token of the next page ('' at the end)."""
    chunk, offset = parse_token(token)
    out: list[Record] = []
    while chunk < len(chunks):
        loaded = await chunks[chunk]()
        take = loaded[offset : offset + page_size - len(out)]
        out.extend(take)
        offset += len(take)
        if offset >= len(loaded):
            chunk, offset = chunk + 1, 0
        if len(out) == page_size:
            break
    return out, (f"{chunk}:{offset}" if chunk < len(chunks) else "")


async def find(chunks: Sequence[Chunk], record_ids: Sequence[str]) -> list[Record]:
    """The records of ``record_ids`` (at most :data:`MAX_RECORD_IDS`), in the run's order; absent ones are left
    out."""
    if len(record_ids) > MAX_RECORD_IDS:
        raise BadInputError(f"record_ids: {len(record_ids)} ids; at most {MAX_RECORD_IDS} at a time")
    wanted = set(record_ids)
    found: list[Record] = []
    for chunk in chunks:
        for record in await chunk():
            if record.id in wanted:
                found.append(record)
                wanted.discard(record.id)
        if not wanted:
            break
    return found
