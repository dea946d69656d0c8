"""What a ClickHouse trace store's summary passes and completions write: one summary row per trace and revision.

Span rows reach the summary writer from the span thread (after their insert) or from other processes
(``add``); a pass (``write``, on the store's summary thread) sums every trace they touched into one read of
``traces FINAL`` and one insert, and a completion goes into the same pair. A trace's spans are read back from
``spans FINAL`` only when the writer does not know them all (``KnownTraces``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ._clickhouse_client import IN_KEY, select_in
from ._clickhouse_schema import TRACE_ROW
from .query import TENANT
from .summaries import KnownTraces, SpanRow, sums

# The spans' summary columns, in ``SUMMARY_SOURCE`` order (what ``summaries.sums`` reads).
SPAN_SUMS = ("SELECT trace_id, span_id, parent_span_id, name, service_name, session_id, start_ns, end_ns, error, "
             f"input_tokens, output_tokens FROM spans FINAL WHERE {IN_KEY}")
_PREVIOUS = ("SELECT trace_id, revision, completed_at, completions, first_seen, version FROM traces FINAL "
             f"WHERE {IN_KEY}")


@dataclass
class WriteCounts:
    """Statements this store sent: each insert costs the server about 40 ms of CPU whatever its size."""

    span_inserts: int = 0
    span_rows: int = 0
    summary_inserts: int = 0
    traces_read_back: int = 0  # traces whose spans a summary pass or completion read back from ``spans FINAL``


@dataclass(frozen=True)
class Completion:
    project: str
    trace_ids: frozenset[str]
    local: frozenset[str]  # those no other process or replica stored spans of (the assembler's knowledge)
    now: float


@dataclass
class _Unsummarized:
    """A project's spans written since its last summary pass, by trace and span (a span written twice counts once:
    its last copy), and the newest batch's clock."""

    now: float
    traces: dict[str, dict[str, tuple[Any, ...]]]


class SummaryWriter:
    """The summary rows of one store: rows to sum arrive from any thread (``add``); ``write`` runs on the store's
    one summary thread, which keeps ``revision`` (read, + 1, write) exact for a single writer."""

    def __init__(self, next_version: Callable[[], int], writes: WriteCounts) -> None:
        self._next_version = next_version
        self.writes = writes
        self.pending: dict[str, _Unsummarized] = {}  # touched on the summary thread only
        self._known = KnownTraces()  # touched on the summary thread only
        self._incoming: list[tuple[str, float, Sequence[SpanRow]]] = []  # rows written or sent, to be summed
        self._incoming_lock = threading.Lock()
        self.summarized_at = time.monotonic()

    def add(self, project: str, now: float, rows: Sequence[SpanRow]) -> None:
        """Rows of spans already stored, summed by the next pass or completion (any thread)."""
        with self._incoming_lock:
            self._incoming.append((project, now, rows))

    def _take_incoming(self) -> None:
        """Rows added since the last pass, into what this pass sums (summary thread)."""
        with self._incoming_lock:
            incoming, self._incoming = self._incoming, []
        for project, now, rows in incoming:
            pending = self.pending.get(project)
            if pending is None:
                pending = self.pending[project] = _Unsummarized(now, {})
            pending.now = max(pending.now, now)
            traces = pending.traces
            for row in rows:
                traces.setdefault(row[0], {})[row[1]] = row

    def write(self, client: Any, completion: Completion | None = None) -> dict[str, int]:
        """One summary pass per project over the traces written since the last (on the summary thread); with a
        ``completion``, its traces are marked complete in the same pass (one read and one insert, not a pass and
        then a completion). Returns the completed traces' span counts."""
        self.summarized_at = time.monotonic()
        self._take_incoming()
        counts: dict[str, int] = {}
        projects = list(self.pending)
        if completion is not None and completion.project not in self.pending:
            projects.append(completion.project)
        for project in projects:
            pending = self.pending.get(project)
            traces = {} if pending is None else pending.traces
            if completion is not None and completion.project == project:
                counts.update(self._summarize(client, project, tuple(sorted({*traces, *completion.trace_ids})),
                                              completion.now, batch=traces, completion=completion))
            else:
                assert pending is not None
                self._summarize(client, project, tuple(sorted(traces)), pending.now, batch=traces)
            self.pending.pop(project, None)  # only once written: a failed pass leaves it for the next
        return counts

    def _summarize(self, client: Any, project: str, trace_ids: Sequence[str], now: float, *,
                   batch: dict[str, dict[str, SpanRow]], completion: Completion | None = None) -> dict[str, int]:
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
        previous = {r[0]: r[1:] for r in select_in(client, _PREVIOUS, project, trace_ids)}
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
        for row in select_in(client, SPAN_SUMS, project, stored):
            by_trace.setdefault(row[0], {})[row[1]] = row
        self.writes.traces_read_back += len(stored)
        version = self._next_version()
        out: list[list[Any]] = [[] for _ in TRACE_ROW]
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
            client.execute(f"INSERT INTO traces ({', '.join(TRACE_ROW)}) VALUES", out, columnar=True)
            self.writes.summary_inserts += 1
            for trace_id, rows in by_trace.items():  # only once written: the version must be the stored row's
                self._known.remember(project, trace_id, version, rows)
        return {trace_id: len(by_trace[trace_id]) for trace_id in completing if trace_id in by_trace}
