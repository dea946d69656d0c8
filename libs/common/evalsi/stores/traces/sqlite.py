"""The trace store on SQLite (standalone mode): spans and trace summaries, the assembled Record on read.

One ``sqlite3`` connection on one dedicated thread, so the event loop never blocks. A ``consume`` is one
transaction: spans are upserted by (project, tenant, trace, span), so an OTLP client's retry never doubles
anything, and the summary row of each trace it touched is recomputed from its spans with ``revision`` + 1
(the trace revision online evaluation keys on). Reads are ``TraceReads``, the SQL both trace stores share
(``query``); ``get_trace`` assembles the Record from the stored spans with ``evalsi.traces.assemble_record``.
Every row carries ``project_id`` and the reserved, empty ``tenant_id``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from evalsi.errors import InfraError
from evalsi.traces.model import Feedback, MappedSpan, OnlineScore, counts_toward_usage

from .query import (
    FEEDBACK_COLUMNS,
    SCORE_COLUMNS,
    SQLITE,
    TENANT,
    Dialect,
    Query,
    feedback_row,
    score_row,
)
from .reads import TraceReads

T = TypeVar("T")

_MIGRATIONS: tuple[tuple[int, str], ...] = (
    (1, """
    CREATE TABLE spans (
        project_id TEXT NOT NULL, tenant_id TEXT NOT NULL, trace_id TEXT NOT NULL, span_id TEXT NOT NULL,
        parent_span_id TEXT NOT NULL, name TEXT NOT NULL, service_name TEXT NOT NULL, session_id TEXT NOT NULL,
        mapper TEXT NOT NULL, scope TEXT NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,
        error INTEGER NOT NULL, step_type INTEGER NOT NULL, input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL, step BLOB NOT NULL, resource TEXT NOT NULL, received_at REAL NOT NULL,
        PRIMARY KEY (project_id, tenant_id, trace_id, span_id)
    );
    CREATE TABLE traces (
        project_id TEXT NOT NULL, tenant_id TEXT NOT NULL, trace_id TEXT NOT NULL, root_span_id TEXT NOT NULL,
        root_name TEXT NOT NULL, service_name TEXT NOT NULL, session_id TEXT NOT NULL, start_ns INTEGER NOT NULL,
        end_ns INTEGER NOT NULL, span_count INTEGER NOT NULL, error_count INTEGER NOT NULL,
        input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, revision INTEGER NOT NULL,
        updated_at REAL NOT NULL, completed_at REAL, completions INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (project_id, tenant_id, trace_id)
    );
    CREATE INDEX traces_by_start ON traces (project_id, tenant_id, start_ns DESC, trace_id);
    CREATE INDEX traces_by_session ON traces (project_id, tenant_id, session_id);
    """),
    (2, """
    CREATE TABLE online_scores (
        project_id TEXT NOT NULL, tenant_id TEXT NOT NULL, trace_id TEXT NOT NULL, policy TEXT NOT NULL,
        metric TEXT NOT NULL, revision INTEGER NOT NULL, stage TEXT NOT NULL, evaluator TEXT NOT NULL,
        outcome TEXT NOT NULL, value REAL, passed INTEGER, label TEXT NOT NULL, reason TEXT NOT NULL,
        scored_at REAL NOT NULL,
        PRIMARY KEY (project_id, tenant_id, trace_id, policy, metric)
    );
    CREATE INDEX online_scores_by_time ON online_scores (project_id, tenant_id, policy, scored_at);
    CREATE TABLE feedback (
        project_id TEXT NOT NULL, tenant_id TEXT NOT NULL, id TEXT NOT NULL, trace_id TEXT NOT NULL,
        session_id TEXT NOT NULL, name TEXT NOT NULL, value REAL, label TEXT NOT NULL, comment TEXT NOT NULL,
        source TEXT NOT NULL, negative INTEGER NOT NULL, created_at REAL NOT NULL,
        PRIMARY KEY (project_id, tenant_id, id)
    );
    CREATE INDEX feedback_by_trace ON feedback (project_id, tenant_id, trace_id);
    CREATE INDEX feedback_by_session ON feedback (project_id, tenant_id, session_id);
    """),
    # A span's OTLP bytes beside its step (query.OTLP_COLUMN); empty in rows written before.
    (3, "ALTER TABLE spans ADD COLUMN otlp BLOB NOT NULL DEFAULT x''"),
)

_SPAN_COLUMNS = ("project_id", "tenant_id", "trace_id", "span_id", "parent_span_id", "name", "service_name",
                 "session_id", "mapper", "scope", "start_ns", "end_ns", "error", "step_type", "input_tokens",
                 "output_tokens", "step", "resource", "received_at", "otlp")


def _migrate(conn: sqlite3.Connection, where: str) -> None:
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    latest = _MIGRATIONS[-1][0]
    if current > latest:
        raise InfraError(f"{where}: schema version {current} is newer than this evalsi knows ({latest}); upgrade")
    for version, sql in _MIGRATIONS:
        if version > current:
            conn.executescript(f"BEGIN IMMEDIATE; {sql}; PRAGMA user_version = {version}; COMMIT;")


def _span_row(project: str, span: MappedSpan, now: float, resources: dict[int, str]) -> tuple[Any, ...]:
    """``resources`` caches each resource's JSON by identity: the spans of one resource share one dict."""
    step = span.bare_step
    counted = counts_toward_usage(step) and step.HasField("usage")
    resource = resources.get(id(span.resource))
    if resource is None:
        resource = resources[id(span.resource)] = json.dumps(span.resource, sort_keys=True)
    return (
        project, TENANT, span.trace_id, span.span_id, span.parent_span_id, span.name, span.service_name,
        span.session_id, span.mapper, span.scope, span.start_ns, span.end_ns, int(span.error), int(step.type),
        step.usage.input_tokens if counted else 0, step.usage.output_tokens if counted else 0,
        span.step_bytes(), resource, now, span.otlp_bytes(),
    )


class SqliteTraceStore(TraceReads):
    """Spans and traces in one SQLite file: a ``TraceStore``."""

    dialect: ClassVar[Dialect] = SQLITE

    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self._clock = clock
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalsi-traces")
        self._conn: sqlite3.Connection | None = None

    @classmethod
    async def open(cls, path: str | Path, clock: Callable[[], float] = time.time) -> SqliteTraceStore:
        store = cls(Path(path), clock)

        def connect(_: None) -> None:
            store.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(store.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout = 10000")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            store._conn = conn
            _migrate(conn, f"SQLite trace store {store.path}")

        await store._run(connect, need_conn=False)
        return store

    async def _run(self, fn: Callable[[Any], T], *, need_conn: bool = True) -> T:
        conn = self._conn
        if need_conn and conn is None:
            raise InfraError(f"SQLite trace store {self.path} is closed")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, fn, conn)
        except (sqlite3.Error, OSError) as exc:
            raise InfraError(f"SQLite trace store {self.path}: {exc}") from exc

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await asyncio.get_running_loop().run_in_executor(self._executor, conn.close)
        self._executor.shutdown(wait=True)

    async def _select(self, query: Query) -> list[Sequence[Any]]:
        return await self._run(lambda conn: conn.execute(query.sql, query.bound()).fetchall())

    # --- the sink --------------------------------------------------------------------------------------------

    async def consume(self, project: str, spans: Sequence[MappedSpan]) -> None:
        if not spans:
            return
        now = self._clock()
        resources: dict[int, str] = {}  # alive only while ``spans`` holds the dicts, so ids are not reused
        rows = [_span_row(project, span, now, resources) for span in spans]
        trace_ids = sorted({span.trace_id for span in spans})
        insert = (f"INSERT INTO spans ({', '.join(_SPAN_COLUMNS)}) VALUES ({', '.join('?' * len(_SPAN_COLUMNS))}) "
                  f"ON CONFLICT (project_id, tenant_id, trace_id, span_id) DO UPDATE SET "
                  + ", ".join(f"{c} = excluded.{c}" for c in _SPAN_COLUMNS[4:]))

        def write(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(insert, rows)
                for trace_id in trace_ids:
                    self._summarize(conn, project, trace_id, now)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

        await self._run(write)

    @staticmethod
    def _summarize(conn: sqlite3.Connection, project: str, trace_id: str, now: float) -> None:
        key = (project, TENANT, trace_id)
        where = "project_id = ? AND tenant_id = ? AND trace_id = ?"
        count, start, end, errors, tokens_in, tokens_out = conn.execute(
            f"SELECT COUNT(*), MIN(start_ns), MAX(end_ns), SUM(error), SUM(input_tokens), SUM(output_tokens) "
            f"FROM spans WHERE {where}", key).fetchone()
        root = conn.execute(
            f"SELECT span_id, name, service_name FROM spans WHERE {where} AND parent_span_id = '' "
            f"ORDER BY start_ns, span_id LIMIT 1", key).fetchone()
        first = root or conn.execute(
            f"SELECT '', '', service_name FROM spans WHERE {where} ORDER BY start_ns, span_id LIMIT 1", key).fetchone()
        session = conn.execute(
            f"SELECT session_id FROM spans WHERE {where} AND session_id != '' ORDER BY start_ns, span_id LIMIT 1",
            key).fetchone()
        conn.execute(
            "INSERT INTO traces (project_id, tenant_id, trace_id, root_span_id, root_name, service_name, session_id, "
            "start_ns, end_ns, span_count, error_count, input_tokens, output_tokens, revision, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?) "
            "ON CONFLICT (project_id, tenant_id, trace_id) DO UPDATE SET root_span_id = excluded.root_span_id, "
            "root_name = excluded.root_name, service_name = excluded.service_name, session_id = excluded.session_id, "
            "start_ns = excluded.start_ns, end_ns = excluded.end_ns, span_count = excluded.span_count, "
            "error_count = excluded.error_count, input_tokens = excluded.input_tokens, "
            "output_tokens = excluded.output_tokens, revision = traces.revision + 1, updated_at = excluded.updated_at",
            (*key, first[0], first[1], first[2], session[0] if session else "", start, end, count, errors, tokens_in,
             tokens_out, now),
        )

    # --- completion ---------------------------------------------------------------------------------------

    async def mark_completed(self, project: str, trace_ids: Sequence[str], *,
                             local: Collection[str] = ()) -> dict[str, int]:
        """Record that the assembler completed these traces (again, for a late span); returns each completed
        trace's span count (its revision for online evaluation). ``local`` changes nothing here: one SQL
        statement sums every trace's stored spans."""
        if not trace_ids:
            return {}
        now = self._clock()

        def write(conn: sqlite3.Connection) -> dict[str, int]:
            counts: dict[str, int] = {}
            with conn:
                for trace_id in trace_ids:
                    row = conn.execute(
                        "UPDATE traces SET completed_at = ?, completions = completions + 1 "
                        "WHERE project_id = ? AND tenant_id = ? AND trace_id = ? RETURNING span_count",
                        (now, project, TENANT, trace_id)).fetchone()
                    if row is not None:
                        counts[trace_id] = row[0]
            return counts

        return await self._run(write)

    # --- online scores and late signals ------------------------------------------------------------------------

    async def put_scores(self, project: str, scores: Sequence[OnlineScore]) -> None:
        """Upsert by (trace, policy, metric); a row of an older trace revision never replaces a newer one."""
        if not scores:
            return
        rows = [(project, TENANT, *score_row(s)) for s in scores]
        columns = ("project_id", "tenant_id", *SCORE_COLUMNS)
        sql = (f"INSERT INTO online_scores ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
               "ON CONFLICT (project_id, tenant_id, trace_id, policy, metric) DO UPDATE SET "
               + ", ".join(f"{c} = excluded.{c}" for c in SCORE_COLUMNS if c not in ("trace_id", "policy", "metric"))
               + " WHERE excluded.revision >= online_scores.revision")

        def write(conn: sqlite3.Connection) -> None:
            with conn:
                conn.executemany(sql, rows)

        await self._run(write)

    async def put_feedback(self, project: str, feedback: Sequence[Feedback]) -> None:
        """Upsert by feedback id (a client's retry replaces its earlier row)."""
        if not feedback:
            return
        rows = [(project, TENANT, *feedback_row(f)) for f in feedback]
        columns = ("project_id", "tenant_id", *FEEDBACK_COLUMNS)
        sql = (f"INSERT INTO feedback ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
               "ON CONFLICT (project_id, tenant_id, id) DO UPDATE SET "
               + ", ".join(f"{c} = excluded.{c}" for c in FEEDBACK_COLUMNS[1:]))

        def write(conn: sqlite3.Connection) -> None:
            with conn:
                conn.executemany(sql, rows)

        await self._run(write)

    async def __aenter__(self) -> SqliteTraceStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(InfraError):
            await self.close()
