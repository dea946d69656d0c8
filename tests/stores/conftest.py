"""Real backing services for the store tests: one PostgreSQL cluster and one SeaweedFS S3 server per session.

A service that cannot start makes its tests error (``RuntimeError`` with the server's log), never skip.
Each metadata test gets a fresh database (or SQLite file) and each object test a fresh prefix, so tests
do not see each other's rows.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from evalsi.stores import SqlMetadataStore, open_metadata_store
from evalsi.testing.services import PostgresServer


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="session")
def postgres_dsn(postgres_server: PostgresServer) -> str:
    return postgres_server.dsn


def dsn_with_database(dsn: str, database: str) -> str:
    return urlunsplit(urlsplit(dsn)._replace(path=f"/{database}"))


@pytest.fixture
async def fresh_postgres_url(postgres_dsn: str) -> AsyncIterator[str]:
    """A new, empty database on the session's server, dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    admin = await asyncpg.connect(postgres_dsn)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    yield dsn_with_database(postgres_dsn, name)
    admin = await asyncpg.connect(postgres_dsn)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty metadata store of each dialect."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'evalsi.db'}"
    return request.getfixturevalue("fresh_postgres_url")


@pytest.fixture
async def metadata_store(store_url: str) -> AsyncIterator[SqlMetadataStore]:
    store = await open_metadata_store(store_url)
    try:
        yield store
    finally:
        await store.close()


