"""``Conn.insert_many``, the bulk insert under results and tasks, on both engines: every column type, the conflict
clause, the count of rows written, and batches larger than one Postgres statement takes (written in chunks)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from evalsi.errors import InfraError
from evalsi.stores.sql_engines import Database, PostgresDatabase, SqliteDatabase

_COLUMNS = (("name", "text"), ("count", "int"), ("big", "bigint"), ("ratio", "float"), ("blob", "bytes"))
_UPSERT = "ON CONFLICT (owner, name) DO UPDATE SET count = excluded.count WHERE excluded.count > things.count"


@pytest.fixture
async def database(store_url: str) -> AsyncIterator[Database]:
    """An empty database of each dialect (``store_url`` from conftest), with one table of every column type."""
    sqlite = store_url.startswith("sqlite:///")
    db: SqliteDatabase | PostgresDatabase = (SqliteDatabase(Path(store_url.removeprefix("sqlite:///"))) if sqlite
                                             else PostgresDatabase(store_url, pool_size=2))
    await db.open()
    blob = "blob" if sqlite else "bytea"
    await db.execute(f"CREATE TABLE things (owner text NOT NULL, name text NOT NULL, count integer NOT NULL, "
                     f"big bigint NOT NULL, ratio double precision NOT NULL, blob {blob} NOT NULL, "
                     "PRIMARY KEY (owner, name))")
    try:
        yield db
    finally:
        await db.close()


def _rows(count: int, start: int = 0, value: int = 1) -> list[tuple[str, int, int, float, bytes]]:
    return [(f"n{i:06d}", value, 2**40 + i, i / 4, bytes([i % 256]) * 3) for i in range(start, start + count)]


async def _things(db: Database) -> dict[tuple[str, str], tuple[int, int, float, bytes]]:
    rows = await db.fetch("SELECT owner, name, count, big, ratio, blob FROM things")
    return {(r[0], r[1]): (r[2], r[3], r[4], bytes(r[5])) for r in rows}


async def test_every_column_type_round_trips_with_the_constants(database: Database) -> None:
    async with database.transaction() as c:
        inserted = await c.insert_many("things", [("owner", "text", "alice")], _COLUMNS, _rows(3), _UPSERT)
    assert inserted == 3
    assert await _things(database) == {
        ("alice", "n000000"): (1, 2**40, 0.0, b"\x00" * 3),
        ("alice", "n000001"): (1, 2**40 + 1, 0.25, b"\x01" * 3),
        ("alice", "n000002"): (1, 2**40 + 2, 0.5, b"\x02" * 3),
    }


async def test_the_tail_decides_conflicts_and_the_count_is_rows_written(database: Database) -> None:
    async with database.transaction() as c:
        await c.insert_many("things", [("owner", "text", "alice")], _COLUMNS, _rows(4, value=5), _UPSERT)
    async with database.transaction() as c:  # two lower counts lose, one higher wins, one row is new
        rows = [*_rows(2, value=1), *_rows(1, start=2, value=9), *_rows(1, start=4, value=1)]
        assert await c.insert_many("things", [("owner", "text", "alice")], _COLUMNS, rows, _UPSERT) == 2
    counts = {name: values[0] for (_owner, name), values in (await _things(database)).items()}
    assert counts == {"n000000": 5, "n000001": 5, "n000002": 9, "n000003": 5, "n000004": 1}


async def test_two_bulk_inserts_in_one_transaction_each_write_only_their_rows(database: Database) -> None:
    async with database.transaction() as c:
        assert await c.insert_many("things", [("owner", "text", "alice")], _COLUMNS, _rows(3), _UPSERT) == 3
        assert await c.insert_many("things", [("owner", "text", "bob")], _COLUMNS, _rows(2, start=10), _UPSERT) == 2
    things = await _things(database)
    assert sorted(things) == [("alice", "n000000"), ("alice", "n000001"), ("alice", "n000002"),
                              ("bob", "n000010"), ("bob", "n000011")]


async def test_a_failed_bulk_insert_leaves_nothing_behind_for_the_next(database: Database) -> None:
    with pytest.raises((InfraError, sqlite3.IntegrityError)):  # Postgres errors become InfraError
        async with database.transaction() as c:  # a duplicate key without an ON CONFLICT clause fails
            await c.insert_many("things", [("owner", "text", "alice")], _COLUMNS, [*_rows(2), *_rows(1)], "")
    async with database.transaction() as c:
        assert await c.insert_many("things", [("owner", "text", "carol")], _COLUMNS, _rows(1), _UPSERT) == 1
    assert list(await _things(database)) == [("carol", "n000000")]


async def test_a_batch_larger_than_any_parameter_limit_is_written_whole(database: Database) -> None:
    async with database.transaction() as c:
        assert await c.insert_many("things", [("owner", "text", "alice")], _COLUMNS, _rows(70_000), _UPSERT) == 70_000
    assert (await database.fetch("SELECT count(*), sum(big) FROM things"))[0] == (
        70_000, sum(2**40 + i for i in range(70_000)))


async def test_batches_large_enough_for_copy_keep_the_tail_and_stay_apart_in_one_transaction(
    database: Database,
) -> None:
    """On Postgres from 2,000 rows the insert goes through COPY and a staging table; the contract is the same."""
    async with database.transaction() as c:
        assert await c.insert_many("things", [("owner", "text", "alice")], _COLUMNS, _rows(3000, value=5),
                                   _UPSERT) == 3000
    async with database.transaction() as c:  # lower counts lose, higher ones win; bob's rows are his alone
        rows = [*_rows(1500, value=1), *_rows(1500, start=1500, value=9)]
        assert await c.insert_many("things", [("owner", "text", "alice")], _COLUMNS, rows, _UPSERT) == 1500
        assert await c.insert_many("things", [("owner", "text", "bob")], _COLUMNS, _rows(2500), _UPSERT) == 2500
    things = await _things(database)
    assert len(things) == 5500
    assert sorted({values[0] for (owner, name), values in things.items() if owner == "alice"}) == [5, 9]
    assert things[("alice", "n001499")][0] == 5 and things[("alice", "n001500")][0] == 9
    assert things[("bob", "n002499")] == (1, 2**40 + 2499, 2499 / 4, bytes([2499 % 256]) * 3)


async def test_a_failed_copy_sized_batch_leaves_nothing_behind_for_the_next(database: Database) -> None:
    with pytest.raises((InfraError, sqlite3.IntegrityError)):
        async with database.transaction() as c:
            await c.insert_many("things", [("owner", "text", "alice")], _COLUMNS, [*_rows(2500), *_rows(1)], "")
    async with database.transaction() as c:
        assert await c.insert_many("things", [("owner", "text", "carol")], _COLUMNS, _rows(2000), _UPSERT) == 2000
    assert {owner for owner, _name in await _things(database)} == {"carol"}


async def test_a_task_sized_batch_with_one_existing_key_goes_through_the_tail_keeping_earlier_writes(
    database: Database,
) -> None:
    """On Postgres a few hundred rows go straight in by COPY under a savepoint; one existing key (here the batch's
    last row) undoes only that attempt, and the tail decides the batch with what the transaction wrote before."""
    async with database.transaction() as c:
        assert await c.insert_many("things", [("owner", "text", "alice")], _COLUMNS, _rows(1, start=499, value=5),
                                   _UPSERT) == 1
    async with database.transaction() as c:
        assert await c.insert_many("things", [("owner", "text", "bob")], _COLUMNS, _rows(300), _UPSERT) == 300
        assert await c.insert_many("things", [("owner", "text", "alice")], _COLUMNS, _rows(500, value=3),
                                   _UPSERT) == 499  # n000499 keeps its higher count
        assert await c.insert_many("things", [("owner", "text", "carol")], _COLUMNS, _rows(400), _UPSERT) == 400
    things = await _things(database)
    assert len(things) == 300 + 500 + 400
    assert things[("alice", "n000499")][0] == 5 and things[("alice", "n000498")][0] == 3
    assert things[("bob", "n000299")] == (1, 2**40 + 299, 299 / 4, bytes([299 % 256]) * 3)
