"""Fixtures for ingest: a SQLite trace store, the store contract over SQLite and ClickHouse, both receivers.

One real ClickHouse server runs per session (``ClickHouseServer``); each contract test gets its own database. When
ClickHouse cannot start, the tests that need it fail with the server's log, never skip.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from aiohttp import web
from ingest_helpers import MAX_BODY

from evalsi.ingest import (
    AssemblingSink,
    ExportHandler,
    OtlpHttpReceiver,
    TraceAssembler,
    start_grpc_receiver,
    start_http_receiver,
)
from evalsi.stores.traces import ClickHouseTraceStore, SqliteTraceStore
from evalsi.testing.services import ClickHouseServer

_databases = itertools.count(1)


class FailingSink:
    async def consume(self, project: str, spans: Sequence[Any]) -> None:
        from evalsi.errors import InfraError

        raise InfraError("disk full")


@dataclass
class Ingest:
    http_url: str
    grpc_target: str
    store: SqliteTraceStore
    handler: ExportHandler
    assembler: TraceAssembler


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteTraceStore]:
    store = await SqliteTraceStore.open(tmp_path / "traces.db")
    yield store
    await store.close()


@pytest.fixture(scope="session")
def clickhouse_server() -> Iterator[ClickHouseServer]:
    with ClickHouseServer() as server:
        yield server


@pytest.fixture
def trace_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh trace-store URL for the backend named by the test's ``backend`` parameter."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/traces.db"
    server: ClickHouseServer = request.getfixturevalue("clickhouse_server")
    return server.url_for(f"contract_{next(_databases)}")


@pytest.fixture
async def trace_store(trace_store_url: str) -> AsyncIterator[SqliteTraceStore | ClickHouseTraceStore]:
    from evalsi.stores.traces import open_trace_store

    store = await open_trace_store(trace_store_url)
    yield store
    await store.close()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test that takes ``trace_store`` or ``trace_store_url`` runs against both stores: the contract."""
    if {"trace_store", "trace_store_url"} & set(metafunc.fixturenames):
        metafunc.parametrize("trace_store_url", ["sqlite", "clickhouse"], indirect=True)


async def _start(handler: ExportHandler, max_body: int) -> tuple[web.AppRunner, grpc.aio.Server, int, int]:
    runner, http_port = await start_http_receiver(OtlpHttpReceiver(handler, max_body_bytes=max_body), "127.0.0.1", 0)
    server, grpc_port = await start_grpc_receiver(handler, "127.0.0.1", 0, max_body_bytes=max_body)
    return runner, server, http_port, grpc_port


@pytest.fixture
async def ingest(store: SqliteTraceStore) -> AsyncIterator[Ingest]:
    assembler = TraceAssembler()
    handler = ExportHandler(AssemblingSink(store, assembler))
    runner, server, http_port, grpc_port = await _start(handler, MAX_BODY)
    yield Ingest(f"http://127.0.0.1:{http_port}", f"127.0.0.1:{grpc_port}", store, handler, assembler)
    await server.stop(grace=None)
    await runner.cleanup()


@pytest.fixture
async def failing_ingest() -> AsyncIterator[tuple[str, str]]:
    handler = ExportHandler(FailingSink())
    runner, server, http_port, grpc_port = await _start(handler, MAX_BODY)
    yield f"http://127.0.0.1:{http_port}", f"127.0.0.1:{grpc_port}"
    await server.stop(grace=None)
    await runner.cleanup()
