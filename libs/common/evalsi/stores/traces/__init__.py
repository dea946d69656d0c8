"""Trace stores: SQLite for one process, ClickHouse for a deployment, both a ``TraceStore`` (``protocol``).

They share their read SQL (``query``, ``reads``); each keeps its own schema and write path. The trace model they
store is ``evalsi.traces``.
"""

from __future__ import annotations

from urllib.parse import unquote

from evalsi.errors import BadInputError
from evalsi.masking import mask_url

from .clickhouse import ClickHouseTraceStore
from .protocol import CompletionStore, FeedbackStore, ScoreStore, SpanSink, TraceReader, TraceStore
from .sqlite import SqliteTraceStore

__all__ = [
    "ClickHouseTraceStore",
    "CompletionStore",
    "FeedbackStore",
    "ScoreStore",
    "SpanSink",
    "SqliteTraceStore",
    "TraceReader",
    "TraceStore",
    "open_trace_store",
]

TRACE_URL_FORMS = "sqlite:///relative.db, sqlite:////absolute/path.db or clickhouse://host[:tcp_port]/database"


async def open_trace_store(url: str) -> TraceStore:
    """Open the trace store at ``url``: ``sqlite:///path`` or ``clickhouse://host[:tcp_port]/database``.

    A ClickHouse URL names the native TCP port (9000 when omitted); the database is created if missing and the
    schema migrated on open.
    """
    if url.startswith("clickhouse://"):
        return await ClickHouseTraceStore.open(url)
    if not url.startswith("sqlite:///") or len(url) == len("sqlite:///"):
        raise BadInputError(f"trace store URL {mask_url(url)!r} is not supported; accepted: {TRACE_URL_FORMS}")
    path = url[len("sqlite:///"):]
    if "?" in path:
        raise BadInputError(f"trace store URL {mask_url(url)!r}: SQLite URLs take no query parameters")
    return await SqliteTraceStore.open(unquote(path))
