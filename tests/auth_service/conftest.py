"""A real api with authentication for AuthService's tests: SQLite by default, Postgres where a test asks."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
from auth_api import AuthApi, start_auth_api

from evalsi.evaluators import Registry
from evalsi.stores import SqlMetadataStore, open_metadata_store
from evalsi.testing.services import PostgresServer


@pytest.fixture(scope="session")
def registry() -> Registry:
    return Registry.from_entry_points()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server


@pytest.fixture
async def postgres_url(postgres_server: PostgresServer) -> AsyncIterator[str]:
    """A new, empty database on the session's server, dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    admin = await asyncpg.connect(postgres_server.dsn)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    yield urlunsplit(urlsplit(postgres_server.dsn)._replace(path=f"/{name}"))
    admin = await asyncpg.connect(postgres_server.dsn)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


async def _started(url: str, registry: Registry, tmp_path: Path) -> AsyncIterator[AuthApi]:
    store = await open_metadata_store(url)
    assert isinstance(store, SqlMetadataStore)
    api = await start_auth_api(store, registry, tmp_path)
    try:
        yield api
    finally:
        await api.close()


@pytest.fixture
async def auth_api(registry: Registry, tmp_path: Path) -> AsyncIterator[AuthApi]:
    async for api in _started(f"sqlite:///{tmp_path / 'evalsi.db'}", registry, tmp_path):
        yield api


@pytest.fixture
async def auth_api_postgres(registry: Registry, tmp_path: Path, postgres_url: str) -> AsyncIterator[AuthApi]:
    async for api in _started(postgres_url, registry, tmp_path):
        yield api
