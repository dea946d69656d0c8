"""ListRunRecords' paging and lookup over a run's chunks (evalsi.api.run_records): pages cross chunk boundaries
and empty chunks, every record comes once, a lookup stops reading once every id is found, and bad tokens and too
many ids are refused naming the field. (Against a real stack, with generated outputs and trials:
tests/ui/test_runs_pages.py.)"""

from __future__ import annotations

import pytest

from evalsi.api.run_records import MAX_RECORD_IDS, Chunk, find, page_of, parse_token
from evalsi.errors import BadInputError
from evalsi.v1alpha1.record_pb2 import Record


def chunks(sizes: list[int], reads: list[int]) -> list[Chunk]:
    """Chunks of records r0, r1, ... of these sizes; ``reads`` collects the index of each chunk read."""
    out: list[Chunk] = []
    start = 0
    for index, size in enumerate(sizes):
        records = [Record(id=f"r{n}") for n in range(start, start + size)]
        start += size

        async def read(index: int = index, records: list[Record] = records) -> list[Record]:
            reads.append(index)
            return list(records)

        out.append(read)
    return out


@pytest.mark.parametrize("page_size", [1, 2, 3, 4, 7, 50])
async def test_pages_cover_every_record_once_in_order(page_size: int) -> None:
    source = chunks([3, 0, 5, 1], [])
    ids: list[str] = []
    token, pages = "", 0
    while True:
        records, token = await page_of(source, page_size, token)
        assert len(records) <= page_size
        ids.extend(r.id for r in records)
        pages += 1
        if not token:
            break
    assert ids == [f"r{n}" for n in range(9)]
    assert pages == max(1, -(-9 // page_size))


async def test_a_page_reads_only_the_chunks_it_needs() -> None:
    reads: list[int] = []
    source = chunks([3, 5, 4], reads)
    records, token = await page_of(source, 2, "1:2")
    assert [r.id for r in records] == ["r5", "r6"] and token == "1:4" and reads == [1]


async def test_find_stops_once_every_id_is_found() -> None:
    reads: list[int] = []
    source = chunks([3, 3, 3], reads)
    found = await find(source, ["r4", "r1"])
    assert [r.id for r in found] == ["r1", "r4"]  # in the run's order
    assert reads == [0, 1]
    assert [r.id for r in await find(chunks([2], []), ["absent"])] == []


async def test_refusals_name_the_field() -> None:
    with pytest.raises(BadInputError, match="page_token"):
        parse_token("not-a-token")
    with pytest.raises(BadInputError, match="record_ids"):
        await find(chunks([1], []), [f"r{n}" for n in range(MAX_RECORD_IDS + 1)])
    assert parse_token("") == (0, 0) and parse_token("3:17") == (3, 17)
