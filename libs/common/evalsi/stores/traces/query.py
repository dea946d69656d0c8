"""The trace stores' SQL, written once for SQLite and ClickHouse: filters, score filters, paging tokens, ordering,
and the rows both stores keep.

The two dialects differ only in how a statement names its parameters (``?`` for ``sqlite3``, ``%(name)s`` for
``clickhouse_driver``), in reading through ``FINAL`` (ClickHouse's ``ReplacingMergeTree`` tables keep every
version of a row until a merge; ``FINAL`` reads the newest) and in the form of the score filter's subquery.
Everything else here is plain SQL both accept.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalsi.errors import BadInputError
from evalsi.traces.model import Feedback, MappedSpan, OnlineScore, TracePage, TraceSummary
from evalsi.v1alpha1.record_pb2 import Step

from .labels import label_clauses

TENANT = ""  # reserved: every row has one, empty until tenancy exists
MAX_PAGE = 1000

TRACE_COLUMNS = ("trace_id", "root_span_id", "root_name", "service_name", "session_id", "start_ns", "end_ns",
                 "span_count", "error_count", "input_tokens", "output_tokens", "revision", "updated_at",
                 "completed_at", "completions")
# A stored span as ``span_from_row`` reads it.
SPAN_READ_COLUMNS = ("trace_id", "span_id", "parent_span_id", "name", "start_ns", "end_ns", "error", "session_id",
                     "mapper", "service_name", "step", "resource", "scope", "otlp")
STEP_COLUMN = SPAN_READ_COLUMNS.index("step")
# The span's OTLP bytes beside its step (``MappedSpan.otlp_bytes``): its attributes, kind, events and links, merged
# into the step when it is read; empty in rows written before the column existed, whose steps hold them.
OTLP_COLUMN = SPAN_READ_COLUMNS.index("otlp")
SCORE_COLUMNS = ("trace_id", "revision", "policy", "stage", "metric", "evaluator", "outcome", "value", "passed",
                 "label", "reason", "scored_at")
FEEDBACK_COLUMNS = ("id", "trace_id", "session_id", "name", "value", "label", "comment", "source", "negative",
                    "created_at")


@dataclass(frozen=True)
class Dialect:
    name: str
    named_params: bool  # ``%(p0)s`` (clickhouse_driver) rather than ``?`` (sqlite3)
    final: str  # appended to a table name in reads: " FINAL" where replaced rows linger until a merge
    # Whether the score filter is a correlated EXISTS (SQLite: one primary-key probe per trace while the page is
    # walked in start order, 0.7 ms for a page of 100,000 scored traces where ``IN (subquery)`` takes 130 ms) or
    # ``trace_id IN (subquery)`` (ClickHouse 18.16 has no correlated subqueries; it builds the set once).
    correlated_exists: bool


SQLITE = Dialect("sqlite", named_params=False, final="", correlated_exists=True)
CLICKHOUSE = Dialect("clickhouse", named_params=True, final=" FINAL", correlated_exists=False)


@dataclass
class Query:
    """A statement and its parameters, bound in the dialect's style as they are added."""

    dialect: Dialect
    sql: str = ""
    values: list[Any] = field(default_factory=list)

    def param(self, value: Any) -> str:
        """A new placeholder bound to ``value`` (a value used twice is added twice: ``?`` marks are positional)."""
        self.values.append(value)
        return f"%(p{len(self.values) - 1})s" if self.dialect.named_params else "?"

    def bound(self) -> tuple[Any, ...] | dict[str, Any]:
        if self.dialect.named_params:
            return {f"p{i}": value for i, value in enumerate(self.values)}
        return tuple(self.values)

    def project_key(self, project: str) -> list[str]:
        return [f"project_id = {self.param(project)}", f"tenant_id = {self.param(TENANT)}"]


@dataclass(frozen=True)
class TraceFilters:
    """What ``list_traces`` filters on; filters combine with AND, ``None`` is no filter."""

    service: str | None = None
    session_id: str | None = None
    since_ns: int | None = None
    until_ns: int | None = None
    has_error: bool | None = None
    completed: bool | None = None
    score_metric: str | None = None  # traces with a scored online value of this metric ...
    min_score: float | None = None  # ... within these bounds (inclusive) when given
    max_score: float | None = None
    labels: Mapping[str, str] = field(default_factory=dict)  # every one of them (``labels.label_clauses``)


# --- paging tokens ---------------------------------------------------------------------------------------------


def encode_token(start_ns: int, trace_id: str) -> str:
    return base64.urlsafe_b64encode(f"{start_ns}:{trace_id}".encode()).decode()


def decode_token(token: str) -> tuple[int, str]:
    try:
        start, trace_id = base64.urlsafe_b64decode(token.encode()).decode().split(":", 1)
        return int(start), trace_id
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadInputError(f"page_token {token!r}: not a token this store issued") from exc


def trace_page(rows: Sequence[Sequence[Any]], limit: int) -> TracePage:
    """The page of ``limit`` summaries from the ``limit + 1`` rows ``list_traces_query`` asks for."""
    traces = [TraceSummary(*row) for row in rows[:limit]]
    token = encode_token(traces[-1].start_ns, traces[-1].trace_id) if len(rows) > limit else ""
    return TracePage(traces, token)


# --- statements ------------------------------------------------------------------------------------------------


def list_traces_query(dialect: Dialect, project: str, limit: int, page_token: str, filters: TraceFilters) -> Query:
    """Newest first (by start time, then trace id), ``limit + 1`` rows so the caller knows a next page exists."""
    if not 1 <= limit <= MAX_PAGE:
        raise BadInputError(f"limit {limit}: must be 1 to {MAX_PAGE}")
    q = Query(dialect)
    clauses = q.project_key(project)
    if filters.score_metric is not None:
        clauses.append(_scored_clause(q, project, filters))
    clauses += label_clauses(q, project, filters.labels)
    if filters.service is not None:
        clauses.append(f"service_name = {q.param(filters.service)}")
    if filters.session_id is not None:
        clauses.append(f"session_id = {q.param(filters.session_id)}")
    # Times are unsigned on ClickHouse; no span starts before the epoch, so a bound below 0 means 0 on both.
    if filters.since_ns is not None:
        clauses.append(f"start_ns >= {q.param(max(filters.since_ns, 0))}")
    if filters.until_ns is not None:
        clauses.append(f"start_ns < {q.param(max(filters.until_ns, 0))}")
    if filters.has_error is not None:
        clauses.append("error_count > 0" if filters.has_error else "error_count = 0")
    if filters.completed is not None:
        clauses.append("completed_at IS NOT NULL" if filters.completed else "completed_at IS NULL")
    if page_token:
        start, trace_id = decode_token(page_token)
        start = max(start, 0)
        before, same = q.param(start), q.param(start)
        clauses.append(f"(start_ns < {before} OR (start_ns = {same} AND trace_id > {q.param(trace_id)}))")
    q.sql = (f"SELECT {', '.join(TRACE_COLUMNS)} FROM traces{dialect.final} WHERE {' AND '.join(clauses)} "
             f"ORDER BY start_ns DESC, trace_id LIMIT {q.param(limit + 1)}")
    return q


def _scored_clause(q: Query, project: str, filters: TraceFilters) -> str:
    """Traces with a scored online value of ``filters.score_metric`` within the bounds given (inclusive)."""
    if q.dialect.correlated_exists:
        scored = ["s.project_id = traces.project_id", "s.tenant_id = traces.tenant_id", "s.trace_id = traces.trace_id"]
    else:
        scored = q.project_key(project)
    scored += [f"metric = {q.param(filters.score_metric)}", "outcome = 'scored'", "value IS NOT NULL"]
    if filters.min_score is not None:
        scored.append(f"value >= {q.param(filters.min_score)}")
    if filters.max_score is not None:
        scored.append(f"value <= {q.param(filters.max_score)}")
    where = " AND ".join(scored)
    if q.dialect.correlated_exists:
        return f"EXISTS (SELECT 1 FROM online_scores s WHERE {where})"
    return f"trace_id IN (SELECT trace_id FROM online_scores{q.dialect.final} WHERE {where})"


def summary_query(dialect: Dialect, project: str, trace_id: str) -> Query:
    q = Query(dialect)
    where = [*q.project_key(project), f"trace_id = {q.param(trace_id.lower())}"]
    q.sql = f"SELECT {', '.join(TRACE_COLUMNS)} FROM traces{dialect.final} WHERE {' AND '.join(where)}"
    return q


def spans_query(dialect: Dialect, project: str, trace_id: str) -> Query:
    q = Query(dialect)
    where = [*q.project_key(project), f"trace_id = {q.param(trace_id.lower())}"]
    q.sql = (f"SELECT {', '.join(SPAN_READ_COLUMNS)} FROM spans{dialect.final} WHERE {' AND '.join(where)} "
             "ORDER BY start_ns, span_id")
    return q


def scores_query(dialect: Dialect, project: str, *, trace_id: str | None, policy: str | None,
                 since: float | None, until: float | None) -> Query:
    """Online scores of a project, oldest first; filters combine with AND (times on ``scored_at``)."""
    q = Query(dialect)
    clauses = q.project_key(project)
    if trace_id:
        clauses.append(f"trace_id = {q.param(trace_id.lower())}")
    if policy is not None:
        clauses.append(f"policy = {q.param(policy)}")
    if since is not None:
        clauses.append(f"scored_at >= {q.param(since)}")
    if until is not None:
        clauses.append(f"scored_at < {q.param(until)}")
    q.sql = (f"SELECT {', '.join(SCORE_COLUMNS)} FROM online_scores{dialect.final} WHERE {' AND '.join(clauses)} "
             "ORDER BY scored_at, trace_id, policy, metric")
    return q


def feedback_query(dialect: Dialect, project: str, *, trace_id: str | None, session_id: str | None) -> Query:
    """Signals naming the trace and those naming its session (either, or both: OR), oldest first."""
    q = Query(dialect)
    clauses = q.project_key(project)
    either = []
    if trace_id:
        either.append(f"trace_id = {q.param(trace_id.lower())}")
    if session_id:
        either.append(f"session_id = {q.param(session_id)}")
    if either:
        clauses.append(f"({' OR '.join(either)})")
    q.sql = (f"SELECT {', '.join(FEEDBACK_COLUMNS)} FROM feedback{dialect.final} WHERE {' AND '.join(clauses)} "
             "ORDER BY created_at, id")
    return q


# --- rows, in the column order both stores use -----------------------------------------------------------------


def span_from_row(row: Sequence[Any]) -> MappedSpan:
    """A stored span from its ``SPAN_READ_COLUMNS`` row."""
    return MappedSpan(
        trace_id=row[0], span_id=row[1], parent_span_id=row[2], name=row[3], start_ns=row[4], end_ns=row[5],
        error=bool(row[6]), session_id=row[7], mapper=row[8], service_name=row[9], step=Step.FromString(row[10]),
        resource=json.loads(row[11]), scope=row[12], otlp=row[13] or None,
    )


def score_row(score: OnlineScore) -> tuple[object, ...]:
    passed = None if score.passed is None else int(score.passed)
    return (score.trace_id.lower(), score.revision, score.policy, score.stage, score.metric, score.evaluator,
            score.outcome, score.value, passed, score.label, score.reason, score.scored_at)


def score_from_row(row: Sequence[Any]) -> OnlineScore:
    trace_id, revision, policy, stage, metric, evaluator, outcome, value, passed, label, reason, at = row
    return OnlineScore(
        trace_id=str(trace_id), revision=int(revision), policy=str(policy), stage=str(stage), metric=str(metric),
        evaluator=str(evaluator), outcome=str(outcome), value=None if value is None else float(value),
        passed=None if passed is None else bool(passed), label=str(label), reason=str(reason), scored_at=float(at),
    )


def feedback_row(item: Feedback) -> tuple[object, ...]:
    return (item.id, item.trace_id.lower(), item.session_id, item.name, item.value, item.label, item.comment,
            item.source, int(item.negative), item.created_at)


def feedback_from_row(row: Sequence[Any]) -> Feedback:
    id_, trace_id, session_id, name, value, label, comment, source, negative, created_at = row
    return Feedback(
        id=str(id_), trace_id=str(trace_id), session_id=str(session_id), name=str(name),
        value=None if value is None else float(value), label=str(label), comment=str(comment), source=str(source),
        negative=bool(negative), created_at=float(created_at),
    )
