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

The schema and its migrations are ``_clickhouse_schema``'s, the URL, login and chunked reads
``_clickhouse_client``'s, and what a summary pass or completion writes ``_clickhouse_summaries``'s; this module
is the store: its threads, span writes, reads, scores and feedback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import chain
from typing import Any, ClassVar, TypeVar

from evalsi.errors import InfraError
from evalsi.traces.model import Feedback, MappedSpan, OnlineScore, TraceSummary

from ._clickhouse_client import DEFAULT_PORT, READ_SETTINGS, clickhouse_login, parse_clickhouse_url, select_in
from ._clickhouse_schema import (
    FEEDBACK_ROW,
    MIGRATIONS,
    SCORE_ROW,
    SPAN_COLUMNS,
    SUMMARY_SOURCE,
    TRACE_ID,
    VERSION,
    migrate,
)
from ._clickhouse_summaries import SPAN_SUMS, Completion, SummaryWriter, WriteCounts
from .group_commit import GroupCommit
from .query import CLICKHOUSE, OTLP_COLUMN, STEP_COLUMN, TENANT, Dialect, Query, feedback_row, score_row
from .reads import TraceReads
from .summaries import SpanRow, sums, usage_tokens

__all__ = ["DEFAULT_PORT", "MIGRATIONS", "ClickHouseTraceStore", "WriteCounts", "clickhouse_login",
           "parse_clickhouse_url"]

T = TypeVar("T")
log = logging.getLogger("evalsi.ingest")
SUMMARY_INTERVAL_S = 0.5
# Span inserts wait up to this long for more spans, up to this many rows (``GroupCommit``): an insert costs the
# server about 40 ms of CPU whatever its size. Every export waits for its insert, so the linger bounds a client's
# rate: at 0.2 s a replica of 2 processes with 4 exports in flight idled its cores (about 30,000 spans/s, 70% busy);
# at 0.1 s it made 36,000-37,000 with as many inserts, the ones arriving during a write still sharing the next.
SPAN_LINGER_S = 0.1
SPAN_INSERT_ROWS = 10_000
_BYTES_COLUMNS = (STEP_COLUMN, OTLP_COLUMN)


@dataclass
class _SpanBatch:
    """One ``consume``'s rows, columnar in ``SPAN_COLUMNS`` order; the version column is filled when written."""

    project: str
    now: float
    columns: list[list[Any]]


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
        self.writes = WriteCounts()  # span counts on the span thread, the rest on the summary thread
        self._summaries = SummaryWriter(self._next_version, self.writes)
        self._owns: Callable[[str], bool] | None = None  # set by summarize_only: the traces this store sums
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
        migrate(client, self.where)
        self._client, self._summary_client = client, summary_client
        # The interval runs from when the store can write, not from before.
        self._summaries.summarized_at = time.monotonic()

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
                await self._run(self._summaries.write, summaries=True)
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
        # Column by column (a comprehension each, in ``SPAN_COLUMNS`` order): this runs for every span stored.
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
            batch.columns[VERSION][:] = [self._next_version()] * len(batch.columns[0])
        columns = batches[0].columns if len(batches) == 1 else [  # joined in C, not value by value
            list(chain.from_iterable(batch.columns[i] for batch in batches)) for i in range(len(SPAN_COLUMNS))]
        client.execute(f"INSERT INTO spans ({', '.join(SPAN_COLUMNS)}) VALUES", columns, columnar=True)
        self.writes.span_inserts += 1
        self.writes.span_rows += len(columns[0])
        owns = self._owns
        for batch in batches:
            # Whether this store sums a trace (else its owner does, from rows it is sent): asked once a trace.
            mine = {trace_id: owns is None or owns(trace_id) for trace_id in dict.fromkeys(batch.columns[TRACE_ID])}
            if not any(mine.values()):  # a process that is not the replica's summary writer: nothing to sum
                continue
            rows = [row for row in zip(*(batch.columns[i] for i in SUMMARY_SOURCE), strict=True) if mine[row[0]]]
            # For the summary thread, before the answer: a completion after it sums them.
            self._summaries.add(batch.project, batch.now, rows)
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
        self._summaries.add(project, self._clock(), rows)
        self._schedule_summaries()

    def _schedule_summaries(self) -> None:
        """Make sure a summary pass runs within the interval even if no more spans come to carry it."""
        if self._summary_timer is None and self._summary_task is None:
            self._summary_timer = asyncio.get_running_loop().call_later(self.summary_interval_s,
                                                                        self._start_summary_pass)

    def _start_summary_pass(self) -> None:
        self._summary_timer = None
        # A pass ran since this was scheduled (on the back of a write, or a completion): the next is due an
        # interval after that one, not now; each pass is an insert, whatever it holds.
        left = self.summary_interval_s - (time.monotonic() - self._summaries.summarized_at)
        if left > 0.005:
            self._summary_timer = asyncio.get_running_loop().call_later(left, self._start_summary_pass)
            return
        self._summary_task = asyncio.create_task(self._summary_pass(), name="trace-summaries")

    async def _summary_pass(self) -> None:
        try:
            await self._run(self._summaries.write, summaries=True)
        except InfraError as exc:
            log.warning("%s: trace summaries not written, retrying: %s", self.where, exc)
            self._summary_task = None
            if self._client is not None:
                self._schedule_summaries()
            return
        self._summary_task = None

    async def _summaries_written(self) -> None:
        """Write what is pending, so a read through this store sees every span it has stored."""
        await self._run(self._summaries.write, summaries=True)

    # --- completion and reads ------------------------------------------------------------------------------------

    async def mark_completed(self, project: str, trace_ids: Sequence[str], *,
                             local: Collection[str] = ()) -> dict[str, int]:
        """Record that the assembler completed these traces (again, for a late span), their summaries re-summed
        from every stored span; returns each completed trace's span count (its revision for online evaluation).
        ``local``: those of them no other process or replica stored spans of, whose spans this store may know."""
        if not trace_ids:
            return {}
        now = self._clock()

        completion = Completion(project, frozenset(trace_ids), frozenset(local), now)
        # With the pending summary pass, in one statement pair: a pass after it would replace the completion.
        return await self._run(lambda client: self._summaries.write(client, completion), summaries=True)

    async def _select(self, query: Query) -> list[Sequence[Any]]:
        return await self._run(lambda client: client.execute(query.sql, query.bound(), settings=READ_SETTINGS))

    async def _select_spans(self, query: Query) -> list[Sequence[Any]]:
        # The step and OTLP columns hold protobuf bytes: read strings as bytes and decode the text columns here.
        rows = await self._run(lambda client: client.execute(
            query.sql, query.bound(), settings={**READ_SETTINGS, "strings_as_bytes": True}))
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
        spans = await self._run(lambda client: select_in(client, SPAN_SUMS, project, [trace_id.lower()]))
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
        sql = f"INSERT INTO online_scores ({', '.join(SCORE_ROW)}) VALUES"
        await self._run(lambda client: client.execute(sql, rows))

    async def put_feedback(self, project: str, feedback: Sequence[Feedback]) -> None:
        """Insert; FINAL keeps the newest row per feedback id (a client's retry replaces its earlier row)."""
        if not feedback:
            return

        def write(client: Any) -> None:
            version = self._next_version()
            rows = [(project, TENANT, *feedback_row(item), version) for item in feedback]
            client.execute(f"INSERT INTO feedback ({', '.join(FEEDBACK_ROW)}) VALUES", rows)

        await self._run(write)

    async def __aenter__(self) -> ClickHouseTraceStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(InfraError):
            await self.close()
