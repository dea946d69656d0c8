"""TraceService: traces listed and read as span trees, with their online scores; feedback added."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from evalsi.api.config import HandlerLimits
from evalsi.api.context import CallContext
from evalsi.api.dependencies import (
    Retrigger,
)
from evalsi.api.errors import ApiError, NotFoundError
from evalsi.api.handlers_common import (
    bus_call,
    page_size,
    required,
)
from evalsi.authz.attributes import stored_trace
from evalsi.errors import BadInputError
from evalsi.labels import parse_label_filters
from evalsi.stores.traces.protocol import TraceStore
from evalsi.traces.model import Feedback, OnlineScore
from evalsi.traces.model import TraceSummary as StoredSummary
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.trace_service_pb2 import (
    AddFeedbackRequest,
    GetTraceRequest,
    ListTracesRequest,
    ListTracesResponse,
    Trace,
    TraceFeedback,
    TraceNode,
    TraceScore,
    TraceSummary,
)

NO_TRACE_STORE = (
    "no trace store is configured: start evalsi-api with --traces-url sqlite:///<path>/traces.db "
    "(EVALSI_TRACES_URL), the store evalsi-ingest writes"
)
_TRACE_ID = re.compile(r"^[0-9a-fA-F]{32}$")


class TraceHandlers:
    """Watch: the traces evalsi-ingest stored, listed and read back as trees of steps and Records.

    Without a store (``evalsi-api`` started without ``--traces-url``) every call is FAILED_PRECONDITION (400).
    """

    def __init__(self, store: TraceStore | None, *, limits: HandlerLimits | None = None,
                 retrigger: Retrigger | None = None, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._limits = limits or HandlerLimits()
        self._retrigger = retrigger
        self._clock = clock

    def _configured(self) -> TraceStore:
        if self._store is None:
            raise ApiError(grpc.StatusCode.FAILED_PRECONDITION, NO_TRACE_STORE)
        return self._store

    async def list_traces(self, request: ListTracesRequest, ctx: CallContext) -> ListTracesResponse:
        store = self._configured()
        bounds = {name: getattr(request, name) for name in ("min_score", "max_score") if request.HasField(name)}
        if bounds and not request.score_metric:
            raise BadInputError(f"score_metric: required with {' and '.join(bounds)} (the metric they bound)")
        if len(bounds) == 2 and bounds["min_score"] > bounds["max_score"]:
            raise BadInputError("min_score: must not exceed max_score")
        since = timestamp_ns(request.start_time) if request.HasField("start_time") else None
        until = timestamp_ns(request.end_time) if request.HasField("end_time") else None
        if since is not None and until is not None and until <= since:
            raise BadInputError("end_time: must be after start_time")
        limits = self._limits
        page = await store.list_traces(
            ctx.project,
            limit=page_size(request.page_size, limits.default_runs_page_size, limits.max_page_size),
            page_token=request.page_token,
            service=request.service_name or None,
            session_id=request.session_id or None,
            since_ns=since,
            until_ns=until,
            has_error=request.has_error if request.HasField("has_error") else None,
            **({"score_metric": request.score_metric, **bounds} if request.score_metric else {}),
            labels=parse_label_filters(request.labels, "labels"),
        )
        labels = await store.trace_labels(ctx.project, [summary.trace_id for summary in page.traces])
        summaries = [labelled_summary(ctx.project, summary, labels.get(summary.trace_id, {}))
                     for summary in page.traces]
        # Per trace, as GetTrace decides: a role conditioned on labels lists only the traces it may read (a page
        # may so hold fewer than page_size; the token still continues after the last one stored).
        visible = [summary for summary in summaries if await ctx.may_see(
            stored_trace({}, summary.trace_id, summary.service_name, summary.labels))]
        return ListTracesResponse(traces=visible, next_page_token=page.next_page_token)

    async def get_trace(self, request: GetTraceRequest, ctx: CallContext) -> Trace:
        store = self._configured()
        trace_id = required(request.trace_id, "trace_id", "a trace id (32 hex digits)").strip()
        if not _TRACE_ID.match(trace_id):
            raise BadInputError(f"trace_id: {request.trace_id!r} is not a trace id (32 hex digits)")
        trace_id = trace_id.lower()
        record = await store.get_trace(ctx.project, trace_id)
        summary = await store.get_summary(ctx.project, trace_id)
        if record is None or summary is None:
            raise NotFoundError(f"trace_id: trace {trace_id} not found in project {ctx.project!r}")
        labels = (await store.trace_labels(ctx.project, [trace_id])).get(trace_id, {})
        await ctx.check_access(stored_trace({}, trace_id, summary.service_name, labels))
        scores = await store.list_scores(ctx.project, trace_id=trace_id)
        feedback = await store.list_feedback(ctx.project, trace_id=trace_id,
                                             session_id=summary.session_id or None)
        return Trace(summary=labelled_summary(ctx.project, summary, labels), tree=span_tree(record), record=record,
                     scores=[trace_score(score) for score in scores],
                     feedback=[trace_feedback(item) for item in feedback])

    async def add_feedback(self, request: AddFeedbackRequest, ctx: CallContext) -> TraceFeedback:
        """Store a late signal; negative feedback on a completed trace re-triggers its policies."""
        store = self._configured()
        project = ctx.resolve_project(request.project)
        sent = request.feedback
        value = sent.value if sent.HasField("value") else None
        item = Feedback(
            id=sent.id or uuid.uuid4().hex, trace_id=sent.trace_id.strip().lower(), session_id=sent.session_id,
            name=sent.name, value=value, label=sent.label, comment=sent.comment, source=sent.source,
            negative=sent.negative or (value is not None and value < 0), created_at=self._clock(),
        ).check("feedback")
        summaries = await _feedback_traces(store, project, item)
        await _check_feedback(store, project, item.trace_id, summaries, ctx)
        await store.put_feedback(project, [item])
        if item.negative and self._retrigger is not None:
            for summary in summaries:
                if summary.completed_at is not None:
                    await bus_call("asking the policies to re-evaluate",
                                    self._retrigger(project, summary.trace_id, summary.span_count))
        return trace_feedback(item)


async def _feedback_traces(store: TraceStore, project: str, item: Feedback) -> list[StoredSummary]:
    """The stored traces feedback is about: the one it names, or every trace of the session it names (all pages,
    so the decision and the re-evaluation cover the whole session)."""
    if item.trace_id:
        summary = await store.get_summary(project, item.trace_id)
        return [summary] if summary is not None else []
    summaries: list[StoredSummary] = []
    token = ""
    while True:
        page = await store.list_traces(project, session_id=item.session_id, limit=1000, page_token=token)
        summaries.extend(page.traces)
        token = page.next_page_token
        if not token:
            return summaries


async def _check_feedback(store: TraceStore, project: str, trace_id: str, summaries: list[StoredSummary],
                          ctx: CallContext) -> None:
    """AddFeedback's final decision (the gate's was partial), on the labels of every trace the feedback is about,
    so a writer conditioned on labels adds feedback only where it may write: to a session only when it may write
    each of the session's traces. Feedback about nothing stored yet (a trace or session still to come) is decided
    without labels."""
    if not summaries:
        await ctx.check_access(stored_trace({}, trace_id, "", {}) if trace_id else {})
        return
    labels = await store.trace_labels(project, [summary.trace_id for summary in summaries])
    for summary in summaries:
        await ctx.check_access(stored_trace({}, summary.trace_id, summary.service_name,
                                            labels.get(summary.trace_id, {})))


def trace_score(score: OnlineScore) -> TraceScore:
    message = TraceScore(policy=score.policy, stage=score.stage, metric=score.metric, evaluator=score.evaluator,
                         outcome=score.outcome, label=score.label, reason=score.reason, revision=score.revision,
                         score_time=_seconds_timestamp(score.scored_at))
    if score.value is not None:
        message.value = score.value
    if score.passed is not None:
        message.passed = score.passed
    return message


def trace_feedback(item: Feedback) -> TraceFeedback:
    message = TraceFeedback(id=item.id, trace_id=item.trace_id, session_id=item.session_id, name=item.name,
                            label=item.label, comment=item.comment, source=item.source, negative=item.negative,
                            create_time=_seconds_timestamp(item.created_at))
    if item.value is not None:
        message.value = item.value
    return message


def _seconds_timestamp(seconds: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromNanoseconds(int(seconds * 1e9))
    return stamp


def timestamp_ns(stamp: Timestamp) -> int:
    return stamp.seconds * 1_000_000_000 + stamp.nanos


def _ns_timestamp(ns: int) -> Timestamp:
    return Timestamp(seconds=ns // 1_000_000_000, nanos=ns % 1_000_000_000)


def trace_summary(project: str, summary: Any) -> TraceSummary:
    """The store's summary row as the API's message."""
    message = TraceSummary(
        trace_id=summary.trace_id,
        project=project,
        root_span_id=summary.root_span_id,
        root_name=summary.root_name,
        service_name=summary.service_name,
        session_id=summary.session_id,
        span_count=summary.span_count,
        error_count=summary.error_count,
        input_tokens=summary.input_tokens,
        output_tokens=summary.output_tokens,
        revision=summary.revision,
        completions=summary.completions,
    )
    message.start_time.CopyFrom(_ns_timestamp(summary.start_ns))
    message.duration.FromNanoseconds(max(0, summary.end_ns - summary.start_ns))
    message.update_time.FromNanoseconds(int(summary.updated_at * 1e9))
    if summary.completed_at is not None:
        message.complete_time.FromNanoseconds(int(summary.completed_at * 1e9))
    return message


def labelled_summary(project: str, summary: Any, labels: dict[str, str]) -> TraceSummary:
    message = trace_summary(project, summary)
    message.labels.update(labels)
    return message


def span_tree(record: Record) -> list[TraceNode]:
    """The trajectory's steps as a tree, depth first, children in step (start time) order; orphans are roots."""
    steps = record.trajectory.steps
    index_of = {step.span_id or step.id: i for i, step in enumerate(steps)}
    children: dict[int, list[int]] = {}
    roots: list[int] = []
    for i, step in enumerate(steps):
        parent = index_of.get(step.parent_id) if step.parent_id else None
        if parent is None or parent == i:
            roots.append(i)
        else:
            children.setdefault(parent, []).append(i)
    nodes: list[TraceNode] = []
    seen: set[int] = set()
    stack = [(i, 0) for i in reversed(roots)]
    while stack:
        i, depth = stack.pop()
        if i in seen:  # a parent cycle (bad instrumentation): each span once
            continue
        seen.add(i)
        step = steps[i]
        kids = children.get(i, [])
        nodes.append(TraceNode(
            span_id=step.span_id or step.id, parent_span_id=step.parent_id, depth=depth, step_index=i,
            orphan=bool(step.parent_id) and step.parent_id not in index_of, child_count=len(kids),
        ))
        stack.extend((k, depth + 1) for k in reversed(kids))
    for i in range(len(steps)):  # spans only reachable through a cycle
        if i not in seen:
            step = steps[i]
            nodes.append(TraceNode(span_id=step.span_id or step.id, parent_span_id=step.parent_id, step_index=i,
                                   child_count=len(children.get(i, []))))
    return nodes
