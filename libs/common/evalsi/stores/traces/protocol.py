"""The trace store, declared once: the roles its users take (each a small protocol) and ``TraceStore``, all of them.

Ingest writes spans through ``SpanSink`` and completes traces through ``CompletionStore``; the API and online
policies read through ``TraceReader``, ``ScoreStore`` and ``FeedbackStore``. ``SqliteTraceStore`` and
``ClickHouseTraceStore`` implement ``TraceStore``; a user that needs one role names that role, so a test can pass
something smaller (the ingest assembler is a ``SpanSink`` too).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from evalsi.traces.model import Feedback, MappedSpan, OnlineScore, TracePage, TraceSummary
from evalsi.v1alpha1.record_pb2 import Record


class SpanSink(Protocol):
    """Where mapped spans go: a store, the assembler, the bus. Raising InfraError makes the client retry."""

    async def consume(self, project: str, spans: Sequence[MappedSpan]) -> None: ...


@runtime_checkable
class SummaryRows(Protocol):
    """A store that can leave some traces' summaries to another process and sum traces from rows it is sent.

    ``evalsi-ingest --processes N``: process i summarizes and completes the traces of partition i. With
    ``summarize_only(owns)`` a store sums only the spans it writes of traces ``owns`` accepts; the processes send
    the owner the summary rows (``summaries.span_row``) of the rest, which it takes with ``add_span_rows``. The
    owner then knows every span of its traces and never reads them back, and each trace has one summary writer.
    """

    def summarize_only(self, owns: Callable[[str], bool]) -> None: ...

    async def add_span_rows(self, project: str, rows: Sequence[tuple[Any, ...]]) -> None: ...


class CompletionStore(Protocol):
    async def mark_completed(self, project: str, trace_ids: Sequence[str], *,
                             local: Collection[str] = ()) -> dict[str, int]:
        """Mark the traces completed; returns each one's span count (its revision for online evaluation).
        ``local`` names those of them whose spans, as far as the caller knows, all reached this store's process (no
        other process or replica told of spans of them): a store may then sum them from what it wrote itself."""
        ...


class TraceReader(Protocol):
    async def list_traces(
        self,
        project: str,
        *,
        limit: int = 50,
        page_token: str = "",
        service: str | None = None,
        session_id: str | None = None,
        since_ns: int | None = None,
        until_ns: int | None = None,
        has_error: bool | None = None,
        completed: bool | None = None,
        score_metric: str | None = None,
        min_score: float | None = None,
        max_score: float | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> TracePage:
        """Newest first (by start time); filters combine with AND; page on with ``next_page_token``."""
        ...

    async def trace_labels(self, project: str, trace_ids: Sequence[str]) -> dict[str, dict[str, str]]:
        """Each trace's labels (its resources' ``evalsi.label.*``); traces without any are absent."""
        ...

    async def get_summary(self, project: str, trace_id: str) -> TraceSummary | None: ...

    async def get_spans(self, project: str, trace_id: str) -> list[MappedSpan]: ...

    async def get_trace(self, project: str, trace_id: str) -> Record | None: ...


class ScoreStore(Protocol):
    """Online scores, stored with the traces; ``list_scores`` also rebuilds the policies' windows after a restart."""

    async def put_scores(self, project: str, scores: Sequence[OnlineScore]) -> None: ...

    async def list_scores(self, project: str, *, trace_id: str | None = None, policy: str | None = None,
                          since: float | None = None, until: float | None = None) -> list[OnlineScore]: ...


class FeedbackStore(Protocol):
    async def put_feedback(self, project: str, feedback: Sequence[Feedback]) -> None: ...

    async def list_feedback(self, project: str, *, trace_id: str | None = None,
                            session_id: str | None = None) -> list[Feedback]: ...


class TraceStore(SpanSink, CompletionStore, TraceReader, ScoreStore, FeedbackStore, Protocol):
    async def close(self) -> None: ...
