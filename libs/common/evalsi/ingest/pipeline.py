"""The ingest pipeline's composition: the store, then the assembler, behind the one ``SpanSink`` interface.

Spans are stored before the assembler hears of them, so a trace it completes is always readable. The
completion loop asks the assembler (a pure component) which traces are complete and records that in the store;
publishing completed traces on the bus for policies comes later, at this same point.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol
from urllib.parse import unquote

from evalsi.errors import BadInputError, InfraError

from .assembly import CompletedTrace, TraceAssembler
from .clickhouse_store import ClickHouseTraceStore
from .handler import SpanSink
from .mappers import MappedSpan
from .sqlite_store import SqliteTraceStore

log = logging.getLogger("evalsi.ingest")
TRACE_URL_FORMS = "sqlite:///relative.db, sqlite:////absolute/path.db or clickhouse://host[:tcp_port]/database"


class CompletionStore(Protocol):
    async def mark_completed(self, project: str, trace_ids: Sequence[str]) -> None: ...


class AssemblingSink:
    """Stores spans, then tells the assembler which traces they belong to."""

    def __init__(self, store: SpanSink, assembler: TraceAssembler) -> None:
        self.store = store
        self.assembler = assembler

    async def consume(self, project: str, spans: Sequence[MappedSpan]) -> None:
        await self.store.consume(project, spans)
        self.assembler.observe(project, spans)


async def complete_once(
    assembler: TraceAssembler,
    store: CompletionStore,
    on_complete: Callable[[CompletedTrace], Awaitable[None]] | None = None,
) -> list[CompletedTrace]:
    """One pass of the completion loop: mark every due trace completed, then call ``on_complete`` for each."""
    done = assembler.pop_completed()
    by_project: dict[str, list[str]] = {}
    for trace in done:
        by_project.setdefault(trace.project, []).append(trace.trace_id)
    for project, trace_ids in by_project.items():
        await store.mark_completed(project, trace_ids)
    if on_complete is not None:
        for trace in done:
            await on_complete(trace)
    return done


async def run_completion_loop(assembler: TraceAssembler, store: CompletionStore, stop: asyncio.Event,
                              interval_s: float = 0.5) -> None:
    while not stop.is_set():
        try:
            await complete_once(assembler, store)
        except InfraError as exc:  # the store is down: try again next tick, the assembler forgets nothing
            log.warning("completing traces failed: %s", exc)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_s)


async def open_trace_store(url: str) -> SqliteTraceStore | ClickHouseTraceStore:
    """Open the trace store at ``url``: ``sqlite:///path`` or ``clickhouse://host[:tcp_port]/database``.

    A ClickHouse URL names the native TCP port (9000 when omitted); the database is created if missing and the
    schema migrated on open.
    """
    if url.startswith("clickhouse://"):
        return await ClickHouseTraceStore.open(url)
    if not url.startswith("sqlite:///") or len(url) == len("sqlite:///"):
        raise BadInputError(f"trace store URL {url!r} is not supported; accepted: {TRACE_URL_FORMS}")
    path = url[len("sqlite:///"):]
    if "?" in path:
        raise BadInputError(f"trace store URL {url!r}: SQLite URLs take no query parameters")
    return await SqliteTraceStore.open(unquote(path))
