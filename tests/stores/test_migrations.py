"""Schema migrations: versioned, applied once on open, idempotent, safe when services start together."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import asyncpg
import pytest

from evalsi.errors import InfraError
from evalsi.stores import LATEST_VERSION, MIGRATIONS, Migration, open_metadata_store
from evalsi.stores.migrations import migrate_postgres, migrate_sqlite

# Every version in order, as a first open applies them.
ALL_VERSIONS = tuple(m.version for m in MIGRATIONS)
EXTRA = Migration(
    LATEST_VERSION + 1,
    "an extra table",
    sqlite=("CREATE TABLE extra (project_id TEXT NOT NULL, tenant_id TEXT NOT NULL DEFAULT '')",),
    postgres=("CREATE TABLE extra (project_id text NOT NULL, tenant_id text NOT NULL DEFAULT '')",),
)
BROKEN = Migration(
    LATEST_VERSION + 1,
    "half a migration",
    sqlite=("CREATE TABLE half (x INTEGER)", "CREATE TABLE nonsense ("),
    postgres=("CREATE TABLE half (x integer)", "CREATE TABLE nonsense ("),
)


async def raw(url: str, sql: str) -> list[tuple[Any, ...]]:
    """Run one query on the store's database directly, beside the store."""
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url[len("sqlite:///") :])
        try:
            return [tuple(r) for r in conn.execute(sql).fetchall()]
        finally:
            conn.close()
    pg = await asyncpg.connect(url)
    try:
        return [tuple(r) for r in await pg.fetch(sql)]
    finally:
        await pg.close()


async def migrate(url: str, migrations: tuple[Migration, ...]) -> list[int]:
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url[len("sqlite:///") :], isolation_level=None)
        try:
            return migrate_sqlite(conn, where="test", migrations=migrations)
        finally:
            conn.close()
    pg = await asyncpg.connect(url)
    try:
        return await migrate_postgres(pg, where="test", migrations=migrations)
    finally:
        await pg.close()


async def test_the_first_open_applies_every_version_and_the_next_nothing(store_url: str) -> None:
    first = await open_metadata_store(store_url)
    await first.close()
    second = await open_metadata_store(store_url)
    await second.close()

    # Versions are consecutive from 1, so a gap (a migration deleted or renumbered) fails here.
    assert first.applied_migrations == ALL_VERSIONS == tuple(range(1, LATEST_VERSION + 1))
    assert second.applied_migrations == ()
    assert await raw(store_url, "SELECT version, name FROM schema_migrations") == [
        (m.version, m.name) for m in MIGRATIONS
    ]


async def test_every_table_carries_project_and_tenant(store_url: str) -> None:
    await (await open_metadata_store(store_url)).close()
    if store_url.startswith("sqlite"):
        tables = [r[0] for r in await raw(store_url, "SELECT name FROM sqlite_master WHERE type = 'table'")]
        columns = {t: {r[1] for r in await raw(store_url, f"PRAGMA table_info({t})")} for t in tables}
    else:
        rows = await raw(
            store_url, "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public'"
        )
        columns = {}
        for table, column in rows:
            columns.setdefault(table, set()).add(column)
    columns.pop("schema_migrations")
    assert sorted(columns) == [
        "api_keys", "audit_events", "case_report_agents", "case_reports", "cases", "leases", "policies",
        "policy_alerts", "project_packs", "projects", "results", "role_bindings", "roles", "run_labels", "runs",
        "tasks",
    ]
    for table, names in columns.items():
        assert {"project_id", "tenant_id"} <= names, table


async def test_a_new_version_applies_alone_on_an_existing_schema(store_url: str) -> None:
    await (await open_metadata_store(store_url)).close()

    assert await migrate(store_url, (*MIGRATIONS, EXTRA)) == [EXTRA.version]
    assert await migrate(store_url, (*MIGRATIONS, EXTRA)) == []
    versions = [r[0] for r in await raw(store_url, "SELECT version FROM schema_migrations ORDER BY version")]
    assert versions == [*(m.version for m in MIGRATIONS), EXTRA.version]
    assert await raw(store_url, "SELECT count(*) FROM extra") == [(0,)]


async def test_a_failing_migration_leaves_nothing_behind(store_url: str) -> None:
    await (await open_metadata_store(store_url)).close()

    with pytest.raises((sqlite3.Error, asyncpg.PostgresError)):
        await migrate(store_url, (*MIGRATIONS, BROKEN))

    assert sorted(r[0] for r in await raw(store_url, "SELECT version FROM schema_migrations")) == [
        m.version for m in MIGRATIONS
    ]
    with pytest.raises((sqlite3.Error, asyncpg.PostgresError)):
        await raw(store_url, "SELECT count(*) FROM half")


async def test_a_schema_newer_than_the_code_is_refused(store_url: str) -> None:
    await (await open_metadata_store(store_url)).close()
    await migrate(store_url, (*MIGRATIONS, EXTRA))

    with pytest.raises(InfraError, match=f"schema is at version {EXTRA.version}, newer than this evalsi knows"):
        await open_metadata_store(store_url)


async def test_services_starting_together_migrate_once(fresh_postgres_url: str) -> None:
    stores = await asyncio.gather(*(open_metadata_store(fresh_postgres_url, pool_size=2) for _ in range(5)))
    try:
        assert sorted(s.applied_migrations for s in stores) == [(), (), (), (), ALL_VERSIONS]
    finally:
        for store in stores:
            await store.close()
    assert sorted(await raw(fresh_postgres_url, "SELECT version FROM schema_migrations")) == [
        (m.version,) for m in MIGRATIONS
    ]


async def test_sqlite_processes_starting_together_migrate_once(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    stores = await asyncio.gather(*(open_metadata_store(url) for _ in range(4)))
    try:
        assert sorted(s.applied_migrations for s in stores) == [(), (), (), ALL_VERSIONS]
    finally:
        for store in stores:
            await store.close()
