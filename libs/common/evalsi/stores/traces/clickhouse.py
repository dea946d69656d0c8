"""The trace store on ClickHouse (server mode): the same methods as the SQLite store, on a schema 18.16 accepts.

Tables (every row carries ``project_id`` and the reserved, empty ``tenant_id``):

- ``spans``: ``ReplacingMergeTree(version)`` ordered by (project, tenant, trace, span), so an OTLP retry replaces
  the span it repeats; times are ``UInt64`` nanoseconds, with a materialized ``DateTime`` (``start_time``) that
  partitions by day (``toYYYYMMDD``). The canonical ``Step`` is stored as its protobuf bytes, and beside it
  the redacted OTLP span (``otlp``) whose attributes, kind, events and links a read merges into the step.
- ``traces``: one summary row per revision, ``ReplacingMergeTree(version)`` ordered by (project, tenant, trace)
  and partitioned by the day the trace was first seen, so every revision of a trace lands in one partition and
  ``FINAL`` keeps only the newest.

Reads use ``FINAL`` with ``optimize_move_to_prewhere = 0``, so filters on summary columns apply after the
replacing merge, never to a superseded revision. Writes are columnar batches. Span inserts (and reads) go through
one client on one dedicated thread; summary passes and completions through a second client on a second thread,
which keeps ``revision`` (read, + 1, write) exact for a single ingest process and keeps an insert's answer from
queueing behind a pass (a pass's read and insert took more of the writer's wall time than the span inserts, most
of it waiting on the server). Span batches that arrive while a write runs, or within ``span_linger_s`` of the first, are
merged into one insert (``GroupCommit``): an insert costs the server about 40 ms of CPU whatever its size, and each
``consume`` still returns only once its spans are written.

Summaries of the traces those spans belong to are written at most every ``summary_interval_s`` (0.5 s), one
pass for every batch since the last: each statement costs the server milliseconds whatever its size (a part of
some forty files per insert), and a summary pass is a read and an insert, so a pass per batch was a fifth of
the replica's throughput. Reads and completions through this store write what is pending first, so they see
every span it has stored; another process (the API) sees an in-progress trace's summary up to the interval
late. A pass that fails keeps its traces pending for the next. A completion goes in the same read and insert as
the pending pass, and a trace whose spans this store knows (``KnownTraces``) is not read back to be summed.

Neither TTL, DateTime64 nor LowCardinality is used: 18.16 lacks them (retention, when it
comes, is a scheduled ``ALTER TABLE ... DELETE``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import chain
from typing import Any, ClassVar, TypeVar
from urllib.parse import unquote, urlsplit

from evalsi.errors import BadInputError, InfraError
from evalsi.masking import mask_url
from evalsi.stores.urls import TRACES_PASSWORD_FILE_ENV, with_password_file
from evalsi.traces.model import Feedback, MappedSpan, OnlineScore, TraceSummary

from .group_commit import GroupCommit
from .query import (
    CLICKHOUSE,
    FEEDBACK_COLUMNS,
    OTLP_COLUMN,
    SCORE_COLUMNS,
    STEP_COLUMN,
    TENANT,
    TRACE_COLUMNS,
    Dialect,
    Query,
    feedback_row,
    score_row,
)
from .reads import TraceReads
from .summaries import KnownTraces, SpanRow, sums, usage_tokens

T = TypeVar("T")
log = logging.getLogger("evalsi.ingest")
DEFAULT_PORT = 9000
SUMMARY_INTERVAL_S = 0.5
# Span inserts wait up to this long for more spans, up to this many rows (``GroupCommit``): an insert costs the
# server about 40 ms of CPU whatever its size.
SPAN_LINGER_S = 0.2
SPAN_INSERT_ROWS = 10_000
_IDS_PER_QUERY = 2_000
_IN_KEY = "project_id = %(project)s AND tenant_id = %(tenant)s AND trace_id IN %(traces)s"
# The spans' summary columns, in ``_SUMMARY_SOURCE`` order (what ``summaries.sums`` reads).
_SPAN_SUMS = ("SELECT trace_id, span_id, parent_span_id, name, service_name, session_id, start_ns, end_ns, error, "
              f"input_tokens, output_tokens FROM spans FINAL WHERE {_IN_KEY}")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEX_IDS = re.compile(r"[0-9a-f]+(?:','[0-9a-f]+)*")  # trace ids joined by "','", each only hex digits
# Filters on non-key columns must see rows after FINAL's replacing merge, not before it in PREWHERE.
_READ_SETTINGS = {"optimize_move_to_prewhere": 0}
_BYTES_COLUMNS = (STEP_COLUMN, OTLP_COLUMN)

_MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (1, (
        """CREATE TABLE IF NOT EXISTS spans (
            project_id String, tenant_id String, trace_id String, span_id String, parent_span_id String,
            name String, service_name String, session_id String, mapper String, scope String,
            start_ns UInt64, end_ns UInt64, start_time DateTime MATERIALIZED toDateTime(intDiv(start_ns, 1000000000)),
            error UInt8, step_type Int32, input_tokens UInt64, output_tokens UInt64, step String, resource String,
            received_at Float64, version UInt64
        ) ENGINE = ReplacingMergeTree(version)
        PARTITION BY toYYYYMMDD(start_time)
        ORDER BY (project_id, tenant_id, trace_id, span_id)""",
        """CREATE TABLE IF NOT EXISTS traces (
            project_id String, tenant_id String, trace_id String, root_span_id String, root_name String,
            service_name String, session_id String, start_ns UInt64, end_ns UInt64, span_count UInt64,
            error_count UInt64, input_tokens UInt64, output_tokens UInt64, revision UInt64, updated_at Float64,
            completed_at Nullable(Float64), completions UInt64, first_seen DateTime, version UInt64
        ) ENGINE = ReplacingMergeTree(version)
        PARTITION BY toYYYYMMDD(first_seen)
        ORDER BY (project_id, tenant_id, trace_id)""",
    )),
    (2, (
        # The newest trace revision wins FINAL: a re-evaluation after late spans replaces the trace's scores.
        """CREATE TABLE IF NOT EXISTS online_scores (
            project_id String, tenant_id String, trace_id String, policy String, metric String, revision UInt64,
            stage String, evaluator String, outcome String, value Nullable(Float64), passed Nullable(UInt8),
            label String, reason String, scored_at Float64
        ) ENGINE = ReplacingMergeTree(revision)
        ORDER BY (project_id, tenant_id, trace_id, policy, metric)""",
        """CREATE TABLE IF NOT EXISTS feedback (
            project_id String, tenant_id String, id String, trace_id String, session_id String, name String,
            value Nullable(Float64), label String, comment String, source String, negative UInt8,
            created_at Float64, version UInt64
        ) ENGINE = ReplacingMergeTree(version)
        ORDER BY (project_id, tenant_id, id)""",
    )),
    # A span's OTLP bytes beside its step (query.OTLP_COLUMN); empty in rows written before.
    (3, ("ALTER TABLE spans ADD COLUMN otlp String DEFAULT ''",)),
)
_SCORE_ROW = ("project_id", "tenant_id", *SCORE_COLUMNS)
_FEEDBACK_ROW = ("project_id", "tenant_id", *FEEDBACK_COLUMNS, "version")

_SPAN_COLUMNS = ("project_id", "tenant_id", "trace_id", "span_id", "parent_span_id", "name", "service_name",
                 "session_id", "mapper", "scope", "start_ns", "end_ns", "error", "step_type", "input_tokens",
                 "output_tokens", "step", "resource", "received_at", "otlp", "version")
_VERSION, _TRACE_ID = _SPAN_COLUMNS.index("version"), _SPAN_COLUMNS.index("trace_id")
# The span columns a trace summary is made of, in the order ``_summarize`` reads its rows.
_SUMMARY_SOURCE = tuple(_SPAN_COLUMNS.index(name) for name in (
    "trace_id", "span_id", "parent_span_id", "name", "service_name", "session_id", "start_ns", "end_ns", "error",
    "input_tokens", "output_tokens"))
_TRACE_ROW = ("project_id", "tenant_id", *TRACE_COLUMNS, "first_seen", "version")


@dataclass
class WriteCounts:
    """Statements this store sent: each insert costs the server about 40 ms of CPU whatever its size."""

    span_inserts: int = 0
    span_rows: int = 0
    summary_inserts: int = 0
    traces_read_back: int = 0  # traces whose spans a summary pass or completion read back from ``spans FINAL``


@dataclass(frozen=True)
class _Completion:
    project: str
    trace_ids: frozenset[str]
    local: frozenset[str]  # those no other process or replica stored spans of (the assembler's knowledge)
    now: float


@dataclass
class _SpanBatch:
    """One ``consume``'s rows, columnar in ``_SPAN_COLUMNS`` order; the version column is filled when written."""

    project: str
    now: float
    columns: list[list[Any]]


def _select_in(client: Any, sql: str, project: str, trace_ids: Sequence[str]) -> list[tuple[Any, ...]]:
    """``sql`` (filtering on ``trace_id IN %(traces)s``) for any number of traces: in chunks, because the server
    refuses a query text over ``max_query_size`` (256 KiB), some seven thousand ids."""
    rows: list[tuple[Any, ...]] = []
    for start in range(0, len(trace_ids), _IDS_PER_QUERY):
        chunk = trace_ids[start:start + _IDS_PER_QUERY]
        joined = "','".join(chunk)
        params: dict[str, Any] = {"project": project, "tenant": TENANT}
        if _HEX_IDS.fullmatch(joined):
            # Hex ids need no escaping: written into the text here, in C, rather than escaped one by one in Python
            # by the driver (3% of an ingest process's CPU, for the summary passes' reads).
            query = sql.replace("%(traces)s", f"('{joined}')")
        else:
            query, params["traces"] = sql, tuple(chunk)
        rows.extend(client.execute(query, params, settings=_READ_SETTINGS))
    return rows


def parse_clickhouse_url(url: str) -> tuple[str, int, str]:
    """``clickhouse://[user@]host[:tcp_port]/database`` → (host, port, database); the port is the native TCP one.
    The user and its password are :func:`clickhouse_login`'s."""
    forms = "clickhouse://[user@]host[:tcp_port]/database"
    match = re.fullmatch(r"clickhouse://(?:[^/@?#]*@)?([^/:?#@]+)(?::([^/?#]*))?/([^/?#]*)", url)
    if not match:
        raise BadInputError(f"trace store URL {mask_url(url)!r} is not supported; a ClickHouse URL is {forms}")
    host, port_text, database = match.groups()
    if port_text is not None and not port_text.isdigit():
        raise BadInputError(f"trace store URL {mask_url(url)!r}: port {port_text!r} is not a number")
    port = int(port_text) if port_text else DEFAULT_PORT
    if not 0 < port < 65536:
        raise BadInputError(f"trace store URL {mask_url(url)!r}: port {port} is out of range")
    if not _NAME.match(database):
        raise BadInputError(f"trace store URL {mask_url(url)!r}: database {database!r} must be a plain name ({forms})")
    return host, port, database


def clickhouse_login(url: str) -> tuple[str, str]:
    """The user and password the store signs in with: the URL's ``user[:password]@`` (``default`` and no password
    when it names none), the password else read from the file ``EVALSI_TRACES_PASSWORD_FILE`` names (evalsi.yaml's
    ``traces.password_file``, which ``evalsi serve`` hands on), so it need not sit in the URL."""
    password_file = os.environ.get(TRACES_PASSWORD_FILE_ENV, "")
    if password_file:
        url = with_password_file(url, password_file, TRACES_PASSWORD_FILE_ENV)
    parts = urlsplit(url)
    return unquote(parts.username or "") or "default", unquote(parts.password or "")


@dataclass
class _Unsummarized:
    """A project's spans written since its last summary pass, by trace and span (a span written twice counts once:
    its last copy), and the newest batch's clock."""

    now: float
    traces: dict[str, dict[str, tuple[Any, ...]]]


class ClickHouseTraceStore(TraceReads):
    """Spans and traces in one ClickHouse database: a ``TraceStore``."""

    dialect: ClassVar[Dialect] = CLICKHOUSE

    def __init__(self, host: str, port: int, database: str, clock: Callable[[], float] = time.time, *,
                 summary_interval_s: float = SUMMARY_INTERVAL_S, span_linger_s: float = SPAN_LINGER_S,
                 user: str = "default", password: str = "") -> None:
        self.host, self.port, self.database = host, port, database
        self._login = {"user": user, "password": password}
        self._clock = clock
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalsi-traces-ch")
        self._summary_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalsi-traces-ch-summaries")
        self._client: Any = None
        self._summary_client: Any = None  # summary passes and completions only, on ``_summary_executor``
        self._last_version = 0
        self._lock = threading.Lock()
        self._span_commits: GroupCommit[_SpanBatch] = GroupCommit(
            self._write_span_batches, size=lambda batch: len(batch.columns[0]), linger_s=span_linger_s,
            max_size=SPAN_INSERT_ROWS)
        self.summary_interval_s = summary_interval_s
        self._unsummarized: dict[str, _Unsummarized] = {}  # touched on the summary thread only
        self.writes = WriteCounts()  # span counts on the span thread, the rest on the summary thread
        self._known = KnownTraces()  # touched on the summary thread only
        self._owns: Callable[[str], bool] | None = None  # set by summarize_only: the traces this store sums
        self._incoming: list[tuple[str, float, Sequence[SpanRow]]] = []  # rows written or sent, to be summed
        self._incoming_lock = threading.Lock()
        self._summarized_at = time.monotonic()
        self._summary_timer: asyncio.TimerHandle | None = None
        self._summary_task: asyncio.Task[None] | None = None

    @property
    def where(self) -> str:
        return f"ClickHouse trace store {self.host}:{self.port}/{self.database}"

    @classmethod
    async def open(cls, url: str, clock: Callable[[], float] = time.time, *,
                   summary_interval_s: float = SUMMARY_INTERVAL_S,
                   span_linger_s: float = SPAN_LINGER_S) -> ClickHouseTraceStore:
        host, port, database = parse_clickhouse_url(url)
        user, password = clickhouse_login(url)
        store = cls(host, port, database, clock, summary_interval_s=summary_interval_s, span_linger_s=span_linger_s,
                    user=user, password=password)
        await store._run(lambda _: store._connect(), need_client=False)
        return store

    def _connect(self) -> None:
        from clickhouse_driver import Client

        bootstrap = Client(self.host, port=self.port, database="default", connect_timeout=5, send_receive_timeout=60,
                           **self._login)
        try:
            bootstrap.execute(f"CREATE DATABASE IF NOT EXISTS {self.database}")
        finally:
            bootstrap.disconnect()
        client, summary_client = (Client(self.host, port=self.port, database=self.database, connect_timeout=5,
                                         send_receive_timeout=60, **self._login) for _ in range(2))
        self._migrate(client)
        self._client, self._summary_client = client, summary_client
        self._summarized_at = time.monotonic()  # the interval runs from when the store can write, not from before

    def _migrate(self, client: Any) -> None:
        client.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version UInt32, applied_at DateTime) "
                       "ENGINE = MergeTree ORDER BY version")
        current = client.execute("SELECT max(version) FROM schema_migrations")[0][0] or 0
        latest = _MIGRATIONS[-1][0]
        if current > latest:
            raise InfraError(f"{self.where}: schema version {current} is newer than this evalsi knows ({latest}); "
                             "upgrade")
        for version, statements in _MIGRATIONS:
            if version > current:
                for sql in statements:
                    client.execute(sql)
                client.execute("INSERT INTO schema_migrations (version, applied_at) VALUES",
                               [{"version": version, "applied_at": int(time.time())}], types_check=True)

    async def _run(self, fn: Callable[[Any], T], *, need_client: bool = True, summaries: bool = False) -> T:
        """``fn(client)`` on the span thread, or with ``summaries`` on the summary thread with its client."""
        from clickhouse_driver.errors import Error as ClickHouseError

        client = self._summary_client if summaries else self._client
        if need_client and client is None:
            raise InfraError(f"{self.where} is closed")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._summary_executor if summaries else self._executor, fn, client)
        except (TimeoutError, ClickHouseError, OSError, EOFError) as exc:
            raise InfraError(f"{self.where}: {exc}") from exc

    def _next_version(self) -> int:
        """A strictly increasing version (nanoseconds), so the newest write always wins ``FINAL``."""
        with self._lock:
            self._last_version = max(time.time_ns(), self._last_version + 1)
            return self._last_version

    async def close(self) -> None:
        if self._summary_timer is not None:
            self._summary_timer.cancel()
        if self._summary_task is not None:
            self._summary_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, InfraError):
                await self._summary_task
        if self._client is not None:
            try:  # what is pending is derived from stored spans: a failure here loses no data, only a preview
                await self._run(self._write_summaries, summaries=True)
            except InfraError as exc:
                log.warning("%s: trace summaries not written at close: %s", self.where, exc)
        for executor, client in ((self._executor, self._client), (self._summary_executor, self._summary_client)):
            if client is not None:
                with contextlib.suppress(Exception):
                    await asyncio.get_running_loop().run_in_executor(executor, client.disconnect)
            executor.shutdown(wait=True)
        self._client = self._summary_client = None
        log.info("%s closed: %s", self.where, self.writes)

    # --- the sink --------------------------------------------------------------------------------------------

    async def consume(self, project: str, spans: Sequence[MappedSpan]) -> None:
        if not spans:
            return
        now = self._clock()
        count = len(spans)
        # Column by column (a comprehension each, in ``_SPAN_COLUMNS`` order): this runs for every span stored.
        steps = [span.bare_step for span in spans]
        tokens_in, tokens_out = map(list, zip(*map(usage_tokens, steps), strict=True))
        resources: dict[int, str] = {}  # each resource's JSON once: its spans share one dict (alive during the call)
        for span in spans:
            if id(span.resource) not in resources:
                resources[id(span.resource)] = json.dumps(span.resource, sort_keys=True)
        columns: list[list[Any]] = [
            [project] * count, [TENANT] * count, [span.trace_id for span in spans], [span.span_id for span in spans],
            [span.parent_span_id for span in spans], [span.name for span in spans],
            [span.service_name for span in spans], [span.session_id for span in spans],
            [span.mapper for span in spans], [span.scope for span in spans], [span.start_ns for span in spans],
            [span.end_ns for span in spans], [int(span.error) for span in spans], [int(step.type) for step in steps],
            tokens_in, tokens_out,
            [span.step_bytes() for span in spans], [resources[id(span.resource)] for span in spans],
            [now] * count, [span.otlp_bytes() for span in spans], [0] * count]
        await self._span_commits.submit(_SpanBatch(project, now, columns))
        self._schedule_summaries()

    async def _write_span_batches(self, batches: list[_SpanBatch]) -> None:
        """One insert for every batch; their traces' summaries follow with the next summary pass."""
        await self._run(lambda client: self._write_spans(client, batches))

    def _write_spans(self, client: Any, batches: Sequence[_SpanBatch]) -> None:
        for batch in batches:
            # A version per batch, in arrival order: a span in two merged batches is replaced as if written twice.
            batch.columns[_VERSION][:] = [self._next_version()] * len(batch.columns[0])
        columns = batches[0].columns if len(batches) == 1 else [  # joined in C, not value by value
            list(chain.from_iterable(batch.columns[i] for batch in batches)) for i in range(len(_SPAN_COLUMNS))]
        client.execute(f"INSERT INTO spans ({', '.join(_SPAN_COLUMNS)}) VALUES", columns, columnar=True)
        self.writes.span_inserts += 1
        self.writes.span_rows += len(columns[0])
        owns = self._owns
        for batch in batches:
            # Whether this store sums a trace (else its owner does, from rows it is sent): asked once a trace.
            mine = {trace_id: owns is None or owns(trace_id) for trace_id in dict.fromkeys(batch.columns[_TRACE_ID])}
            rows = [row for row in zip(*(batch.columns[i] for i in _SUMMARY_SOURCE), strict=True) if mine[row[0]]]
            with self._incoming_lock:  # for the summary thread, before the answer: a completion after sums them
                self._incoming.append((batch.project, batch.now, rows))
        # No summary pass here even when one is due: its read and insert would hold this write's answer (and the
        # requests it answers) back; the timer ``consume`` set runs it next, while the next insert gathers.

    def summarize_only(self, owns: Callable[[str], bool]) -> None:
        """Sum only the spans written here of traces ``owns`` accepts; another process sends their owner the rest
        (``SummaryRows``). Every trace then has one summary writer, which knows all its spans."""
        self._owns = owns

    async def add_span_rows(self, project: str, rows: Sequence[SpanRow]) -> None:
        """Summary rows of spans another process stored (already written: it sends them after its insert), summed
        into this store's next summary pass or completion as if written here."""
        if not rows:
            return
        if self._client is None:
            raise InfraError(f"{self.where} is closed")
        # Handed over, not a hop to the writer thread: that waits behind a span insert, and the sender's notice
        # (so its export's answer) would wait on this process's writes.
        with self._incoming_lock:
            self._incoming.append((project, self._clock(), rows))
        self._schedule_summaries()

    def _take_incoming(self) -> None:
        """Rows written here or sent by other processes (``add_span_rows``), into what the next summary pass sums
        (summary thread)."""
        with self._incoming_lock:
            incoming, self._incoming = self._incoming, []
        for project, now, rows in incoming:
            pending = self._unsummarized.get(project)
            if pending is None:
                pending = self._unsummarized[project] = _Unsummarized(now, {})
            pending.now = max(pending.now, now)
            traces = pending.traces
            for row in rows:
                traces.setdefault(row[0], {})[row[1]] = row

    def _write_summaries(self, client: Any, completion: _Completion | None = None) -> dict[str, int]:
        """One summary pass per project over the traces written since the last (on the writer thread); with a
        ``completion``, its traces are marked complete in the same pass (one read and one insert, not a pass and
        then a completion). Returns the completed traces' span counts."""
        self._summarized_at = time.monotonic()
        self._take_incoming()
        counts: dict[str, int] = {}
        projects = list(self._unsummarized)
        if completion is not None and completion.project not in self._unsummarized:
            projects.append(completion.project)
        for project in projects:
            pending = self._unsummarized.get(project)
            traces = {} if pending is None else pending.traces
            if completion is not None and completion.project == project:
                counts.update(self._summarize(client, project, tuple(sorted({*traces, *completion.trace_ids})),
                                              completion.now, batch=traces, completion=completion))
            else:
                assert pending is not None
                self._summarize(client, project, tuple(sorted(traces)), pending.now, batch=traces)
            self._unsummarized.pop(project, None)  # only once written: a failed pass leaves it for the next
        return counts

    def _schedule_summaries(self) -> None:
        """Make sure a summary pass runs within the interval even if no more spans come to carry it."""
        if self._summary_timer is None and self._summary_task is None:
            self._summary_timer = asyncio.get_running_loop().call_later(self.summary_interval_s,
                                                                        self._start_summary_pass)

    def _start_summary_pass(self) -> None:
        self._summary_timer = None
        # A pass ran since this was scheduled (on the back of a write, or a completion): the next is due an
        # interval after that one, not now; each pass is an insert, whatever it holds.
        left = self.summary_interval_s - (time.monotonic() - self._summarized_at)
        if left > 0.005:
            self._summary_timer = asyncio.get_running_loop().call_later(left, self._start_summary_pass)
            return
        self._summary_task = asyncio.create_task(self._summary_pass(), name="trace-summaries")

    async def _summary_pass(self) -> None:
        try:
            await self._run(self._write_summaries, summaries=True)
        except InfraError as exc:
            log.warning("%s: trace summaries not written, retrying: %s", self.where, exc)
            self._summary_task = None
            if self._client is not None:
                self._schedule_summaries()
            return
        self._summary_task = None

    async def _summaries_written(self) -> None:
        """Write what is pending, so a read through this store sees every span it has stored."""
        await self._run(self._write_summaries, summaries=True)

    def _summarize(self, client: Any, project: str, trace_ids: Sequence[str], now: float, *,
                   batch: dict[str, dict[str, SpanRow]], completion: _Completion | None = None) -> dict[str, int]:
        """Write the summary of every trace in ``trace_ids``: at ``revision`` + 1 where ``batch`` has spans of it, and
        marked complete where ``completion`` names it; returns each completed trace's span count.

        A trace's spans are read back from ``spans FINAL`` (most of the server's work per span) only when this
        store does not know them all: a trace without a summary yet has all its stored spans in ``batch`` (they
        were just inserted by this store's one writer); a trace whose newest summary row this store wrote has the
        rows it summed then (``KnownTraces``) plus ``batch``. A trace being completed is read back unless the
        assembler knows that no other process or replica stored spans of it (``local``), so a summary another
        replica wrote concurrently is corrected at completion.
        """
        completing = completion.trace_ids if completion is not None else frozenset()
        local = completion.local if completion is not None else frozenset()
        previous = {
            r[0]: r[1:] for r in _select_in(
                client, f"SELECT trace_id, revision, completed_at, completions, first_seen, version FROM traces FINAL "
                f"WHERE {_IN_KEY}", project, trace_ids)
        }
        by_trace: dict[str, dict[str, SpanRow]] = {}
        stored: list[str] = []
        for trace_id in trace_ids:
            new, before = batch.get(trace_id), previous.get(trace_id)
            if trace_id in completing and trace_id not in local:
                stored.append(trace_id)
            elif before is None:
                if new is None:
                    stored.append(trace_id)
                else:
                    by_trace[trace_id] = dict(new)
            elif (known := self._known.rows(project, trace_id, before[4])) is not None:
                by_trace[trace_id] = {**known, **new} if new else known
            else:
                stored.append(trace_id)
        for row in _select_in(client, _SPAN_SUMS, project, stored):
            by_trace.setdefault(row[0], {})[row[1]] = row
        self.writes.traces_read_back += len(stored)
        version = self._next_version()
        out: list[list[Any]] = [[] for _ in _TRACE_ROW]
        for trace_id, rows in by_trace.items():
            revision, completed_at, completions, first_seen, _ = previous.get(trace_id, (0, None, 0, None, 0))
            if trace_id in batch:
                revision += 1
            if trace_id in completing:
                completed_at, completions = now, completions + 1
            values = (project, TENANT, trace_id, *sums(list(rows.values())), revision, now, completed_at, completions,
                      first_seen or int(now), version)
            for column, value in zip(out, values, strict=True):
                column.append(value)
        if out[0]:
            client.execute(f"INSERT INTO traces ({', '.join(_TRACE_ROW)}) VALUES", out, columnar=True)
            self.writes.summary_inserts += 1
            for trace_id, rows in by_trace.items():  # only once written: the version must be the stored row's
                self._known.remember(project, trace_id, version, rows)
        return {trace_id: len(by_trace[trace_id]) for trace_id in completing if trace_id in by_trace}

    # --- completion and reads ------------------------------------------------------------------------------------

    async def mark_completed(self, project: str, trace_ids: Sequence[str], *,
                             local: Collection[str] = ()) -> dict[str, int]:
        """Record that the assembler completed these traces (again, for a late span), their summaries re-summed
        from every stored span; returns each completed trace's span count (its revision for online evaluation).
        ``local``: those of them no other process or replica stored spans of, whose spans this store may know."""
        if not trace_ids:
            return {}
        now = self._clock()

        completion = _Completion(project, frozenset(trace_ids), frozenset(local), now)
        # With the pending summary pass, in one statement pair: a pass after it would replace the completion.
        return await self._run(lambda client: self._write_summaries(client, completion), summaries=True)

    async def _select(self, query: Query) -> list[Sequence[Any]]:
        return await self._run(lambda client: client.execute(query.sql, query.bound(), settings=_READ_SETTINGS))

    async def _select_spans(self, query: Query) -> list[Sequence[Any]]:
        # The step and OTLP columns hold protobuf bytes: read strings as bytes and decode the text columns here.
        rows = await self._run(lambda client: client.execute(
            query.sql, query.bound(), settings={**_READ_SETTINGS, "strings_as_bytes": True}))
        return [[value.decode() if isinstance(value, bytes) and i not in _BYTES_COLUMNS else value
                 for i, value in enumerate(row)] for row in rows]

    async def _before_trace_read(self) -> None:
        await self._summaries_written()

    async def get_summary(self, project: str, trace_id: str) -> TraceSummary | None:
        """The summary row of one trace in this project, or None."""
        summary = await super().get_summary(project, trace_id)
        if summary is not None:
            return summary
        # Spans another process stored within the last summary interval: summed here (revision 0: no summary
        # written yet), so a trace is readable as soon as its export is answered, wherever it was stored.
        spans = await self._run(lambda client: _select_in(client, _SPAN_SUMS, project, [trace_id.lower()]))
        if not spans:
            return None
        row: tuple[Any, ...] = (trace_id.lower(), *sums(spans), 0, self._clock(), None, 0)
        return TraceSummary(*row)

    # --- online scores and late signals ------------------------------------------------------------------------

    async def put_scores(self, project: str, scores: Sequence[OnlineScore]) -> None:
        """Insert; FINAL keeps the newest trace revision per (trace, policy, metric)."""
        if not scores:
            return
        rows = [(project, TENANT, *score_row(score)) for score in scores]
        sql = f"INSERT INTO online_scores ({', '.join(_SCORE_ROW)}) VALUES"
        await self._run(lambda client: client.execute(sql, rows))

    async def put_feedback(self, project: str, feedback: Sequence[Feedback]) -> None:
        """Insert; FINAL keeps the newest row per feedback id (a client's retry replaces its earlier row)."""
        if not feedback:
            return

        def write(client: Any) -> None:
            version = self._next_version()
            rows = [(project, TENANT, *feedback_row(item), version) for item in feedback]
            client.execute(f"INSERT INTO feedback ({', '.join(_FEEDBACK_ROW)}) VALUES", rows)

        await self._run(write)

    async def __aenter__(self) -> ClickHouseTraceStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(InfraError):
            await self.close()
