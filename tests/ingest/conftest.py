"""Fixtures for ingest: a SQLite trace store, and both receivers on free ports."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
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
    SqliteTraceStore,
    TraceAssembler,
    start_grpc_receiver,
    start_http_receiver,
)


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
