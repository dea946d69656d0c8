"""The reads both trace stores answer with the same SQL (``query``), over one primitive each provides: a SELECT."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from evalsi.traces.assembly import assemble_record
from evalsi.traces.model import Feedback, MappedSpan, OnlineScore, TracePage, TraceSummary
from evalsi.v1alpha1.record_pb2 import Record

from .labels import chunks, labels_by_trace, resources_query
from .query import (
    Dialect,
    Query,
    TraceFilters,
    feedback_from_row,
    feedback_query,
    list_traces_query,
    score_from_row,
    scores_query,
    span_from_row,
    spans_query,
    summary_query,
    trace_page,
)


class TraceReads(ABC):
    """``TraceReader``, ``list_scores`` and ``list_feedback`` of a trace store, written once for every dialect."""

    dialect: ClassVar[Dialect]

    @abstractmethod
    async def _select(self, query: Query) -> list[Sequence[Any]]:
        """The rows of a SELECT."""

    async def _select_spans(self, query: Query) -> list[Sequence[Any]]:
        """The rows of ``spans_query``, as ``span_from_row`` reads them (a store may decode columns first)."""
        return await self._select(query)

    async def _before_trace_read(self) -> None:  # noqa: B027 - a hook: most stores have nothing pending
        """Make what this store wrote visible to summary reads (ClickHouse writes its pending summaries)."""

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
        """Newest first (by start time); filters combine with AND; page on with ``next_page_token``.

        ``score_metric`` keeps traces with a scored online value of that metric, within ``min_score`` and
        ``max_score`` when given (inclusive); ``labels`` keeps traces carrying every one of them.
        """
        filters = TraceFilters(service, session_id, since_ns, until_ns, has_error, completed, score_metric,
                               min_score, max_score, dict(labels or {}))
        query = list_traces_query(self.dialect, project, limit, page_token, filters)
        await self._before_trace_read()
        return trace_page(await self._select(query), limit)

    async def get_summary(self, project: str, trace_id: str) -> TraceSummary | None:
        """The summary row of one trace in this project, or None."""
        query = summary_query(self.dialect, project, trace_id)
        await self._before_trace_read()
        rows = await self._select(query)
        return TraceSummary(*rows[0]) if rows else None

    async def trace_labels(self, project: str, trace_ids: Sequence[str]) -> dict[str, dict[str, str]]:
        """The labels of each of these traces (``labels``: from their spans' resources); unlabelled ones absent."""
        found: dict[str, dict[str, str]] = {}
        for chunk in chunks(trace_ids):
            found.update(labels_by_trace(await self._select(resources_query(Query(self.dialect), project, chunk))))
        return found

    async def get_spans(self, project: str, trace_id: str) -> list[MappedSpan]:
        rows = await self._select_spans(spans_query(self.dialect, project, trace_id))
        return [span_from_row(row) for row in rows]

    async def get_trace(self, project: str, trace_id: str) -> Record | None:
        """The assembled Record of a trace in this project, or None when the project has no such trace."""
        spans = await self.get_spans(project, trace_id)
        return assemble_record(spans, project=project) if spans else None

    async def list_scores(self, project: str, *, trace_id: str | None = None, policy: str | None = None,
                          since: float | None = None, until: float | None = None) -> list[OnlineScore]:
        """Online scores of this project, oldest first; filters combine with AND (times on ``scored_at``)."""
        query = scores_query(self.dialect, project, trace_id=trace_id, policy=policy, since=since, until=until)
        return [score_from_row(row) for row in await self._select(query)]

    async def list_feedback(self, project: str, *, trace_id: str | None = None,
                            session_id: str | None = None) -> list[Feedback]:
        """Signals joined to a trace: those naming it, and those naming its session (either filter, or both: OR)."""
        query = feedback_query(self.dialect, project, trace_id=trace_id, session_id=session_id)
        return [feedback_from_row(row) for row in await self._select(query)]
