"""The RPC handlers of the public services, the same for gRPC and HTTP/JSON.

Each is ``async def name(request, ctx) -> response`` (an async generator for server streams). They
validate before anything is written, name the field at fault, and reach the rest of the system only
through the dependencies given to them (:mod:`evalsi.api.dependencies`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import grpc
from google.protobuf import struct_pb2
from google.protobuf.timestamp_pb2 import Timestamp

from evalsi.api.config import HandlerLimits
from evalsi.api.context import CallContext
from evalsi.api.datasets_handlers import DatasetHandlers
from evalsi.api.dependencies import (
    Control,
    CountTasks,
    DescribePlan,
    Evaluate,
    LoadRecords,
    Retrigger,
    ValidateRun,
    Watch,
)
from evalsi.api.errors import ApiError, NotFoundError
from evalsi.api.file_params import refuse_file_params
from evalsi.api.run_dataset import read_run_dataset, store_run_dataset
from evalsi.bus.v1alpha1.bus_pb2 import (
    CONTROL_ACTION_CANCEL,
    CONTROL_ACTION_CREATED,
    CONTROL_ACTION_RESUME,
    RunControl,
)
from evalsi.connection_rules import evaluate_problems, pin_models, policy_problems, refuse, run_problems
from evalsi.connections import Connections
from evalsi.datasets.run_records import DATASET_LABEL
from evalsi.edge_checks import text_problem
from evalsi.errors import BadInputError, DeadlineExceeded, InfraError
from evalsi.evaluators import Registry
from evalsi.limits import check_resamples
from evalsi.policy import ERROR, NO_CONTENT, SCORED, SKIPPED, compile_policy, unset_alert_secrets, window_start
from evalsi.policy import KIND as POLICY_KIND
from evalsi.policy.spec import DEFAULT_WINDOW_S
from evalsi.projects import DEFAULT_PROJECT, PROJECT_LABEL, check_project
from evalsi.records import from_value
from evalsi.runs.compare import compare_runs
from evalsi.runs.spec import API_VERSION
from evalsi.stats import summarize
from evalsi.stores import MetadataStore, ObjectStore, PolicyStore, StoredPolicy, policy_hash
from evalsi.stores.traces.protocol import ScoreStore, TraceStore
from evalsi.traces.model import Feedback, OnlineScore
from evalsi.v1alpha1.catalog_service_pb2 import ListEvaluatorsRequest, ListEvaluatorsResponse, PackInfo
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest, EvaluateResponse
from evalsi.v1alpha1.monitor_service_pb2 import (
    ApplyPolicyRequest,
    DeletePolicyRequest,
    GetPolicyRequest,
    GetPolicyStatsRequest,
    ListPoliciesRequest,
    ListPoliciesResponse,
    MetricStats,
    Policy,
    PolicyStats,
    WindowStats,
)
from evalsi.v1alpha1.policy_pb2 import OnlineEvalPolicy
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import (
    RUN_STATE_BUDGET_EXCEEDED,
    RUN_STATE_CANCELLED,
    RUN_STATE_FAILED,
    RUN_STATE_PENDING,
    RUN_STATE_SUCCEEDED,
    Comparison,
    DatasetSource,
    EvalRun,
    Run,
    RunState,
)
from evalsi.v1alpha1.run_service_pb2 import (
    RUN_EVENT_TYPE_STATE,
    RUN_EVENT_TYPE_SUMMARY,
    CancelRunRequest,
    CompareRunsRequest,
    CreateRunRequest,
    DatasetVersion,
    GetRunRequest,
    ListDatasetVersionsRequest,
    ListDatasetVersionsResponse,
    ListRunResultsRequest,
    ListRunResultsResponse,
    ListRunsRequest,
    ListRunsResponse,
    ResumeRunRequest,
    RunEvent,
    UploadDatasetRequest,
    WatchRunRequest,
)
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

TERMINAL_STATES = frozenset({RUN_STATE_SUCCEEDED, RUN_STATE_FAILED, RUN_STATE_CANCELLED, RUN_STATE_BUDGET_EXCEEDED})
RESUMABLE_STATES = frozenset({RUN_STATE_FAILED, RUN_STATE_CANCELLED, RUN_STATE_BUDGET_EXCEEDED})
RESERVED_LABEL_PREFIX = "evals.si/"


def state_name(state: int) -> str:
    try:
        return RunState.Name(state).removeprefix("RUN_STATE_").lower().replace("_", "-")
    except ValueError:
        return f"state {state}"


def _now() -> Timestamp:
    stamp = Timestamp()
    stamp.GetCurrentTime()
    return stamp


def _required(value: str, field: str, what: str) -> str:
    if not value.strip():
        raise BadInputError(f"{field}: {what} is required")
    return value


def _page_size(value: int, default: int, limit: int) -> int:
    if value < 0:
        raise BadInputError(f"page_size: {value} must be zero (the default, {default}) or positive")
    return min(value or default, limit)


async def _bus_call(what: str, call: Any) -> Any:
    """An outbound call on the bus; its failures are infrastructure failures, not bugs of ours."""
    try:
        return await call
    except (BadInputError, InfraError, NotFoundError, DeadlineExceeded):  # DeadlineExceeded: the deadline passed (504)
        raise
    except Exception as exc:
        raise InfraError(f"{what}: {type(exc).__name__}: {exc}") from exc


# --- EvaluationService ---------------------------------------------------------------------------


class EvaluationHandlers:
    """Score: synchronous evaluation of small batches, answered by a worker."""

    def __init__(
        self, evaluate: Evaluate, *, registry: Registry | None = None, limits: HandlerLimits | None = None,
        connections: Connections | None = None,
    ) -> None:
        """``connections``: the judges the server offers (evalsi.yaml judges:); none when not given."""
        self._evaluate = evaluate
        self._registry = registry
        self._limits = limits or HandlerLimits()
        self._connections = connections or Connections()

    async def evaluate(self, request: EvaluateRequest, ctx: CallContext) -> EvaluateResponse:
        return await self._evaluate_one(request, ctx.project, ctx)

    async def evaluate_stream(
        self, requests: AsyncIterator[EvaluateRequest], ctx: CallContext
    ) -> AsyncIterator[EvaluateResponse]:
        """One response per request, in request order; up to ``stream_window`` evaluated at once."""
        window: asyncio.Queue[Any] = asyncio.Queue(maxsize=self._limits.stream_window)
        done = object()

        async def feed() -> None:
            try:
                index = 0
                async for request in requests:
                    project = ctx.resolve_project(request.project)
                    if not request.request_id:  # one id per request, so each answer can be traced
                        request.request_id = f"{ctx.request_id}-{index}"
                    index += 1
                    task = asyncio.ensure_future(self._evaluate_one(request, project, ctx))
                    try:
                        await window.put(task)
                    except asyncio.CancelledError:
                        task.cancel()
                        raise
            except Exception as exc:  # a malformed message or bad project ends the stream after what came before
                await window.put(exc)
                return
            await window.put(done)

        feeder = asyncio.create_task(feed())
        try:
            while (item := await window.get()) is not done:
                if isinstance(item, Exception):
                    raise item
                yield await item
        finally:
            feeder.cancel()
            while not window.empty():
                item = window.get_nowait()
                if isinstance(item, asyncio.Future):
                    item.cancel()
                    with contextlib.suppress(BaseException):
                        await item

    async def _evaluate_one(self, request: EvaluateRequest, project: str, ctx: CallContext) -> EvaluateResponse:
        self.check(request)
        # Judges only by the names of the server's connections granted to the project, never an address or key.
        refuse(evaluate_problems(self._connections, request, project, self._registry))
        request.project = project
        if not request.request_id:
            request.request_id = ctx.request_id
        # The worker works under the caller's deadline and stops when it passes (evalsi.bus.requests).
        response = await _bus_call("evaluate", self._evaluate(request, ctx.time_remaining()))
        if not response.request_id:
            response.request_id = request.request_id
        return response

    def check(self, request: EvaluateRequest) -> None:
        """Refuse a request a worker could only fail on, naming the field."""
        if not request.records:
            raise BadInputError("records: at least one record is required")
        limit = self._limits.max_sync_records
        if len(request.records) > limit:
            raise BadInputError(
                f"records: {len(request.records)} records exceed the limit of {limit} per synchronous call; "
                "send smaller batches, or create a run"
            )
        if not request.evaluators:
            raise BadInputError("evaluators: at least one evaluator is required (`evalsi catalog list` shows them)")
        check_resamples(request.summary.bootstrap_resamples, "summary.bootstrap_resamples")
        confidence = request.summary.confidence
        if confidence and not 0 < confidence < 1:  # NaN included
            raise BadInputError(f"summary.confidence: must be between 0 and 1 (e.g. 0.95), got {confidence}")
        refuse_file_params((f"evaluators[{i}]", ref.params) for i, ref in enumerate(request.evaluators))
        aliases: dict[str, int] = {}
        for index, ref in enumerate(request.evaluators):
            where = f"evaluators[{index}]"
            _required(ref.ref, f"{where}.ref", "an evaluator reference (such as builtin/exact-match)")
            alias = ref.alias
            if self._registry is not None:
                try:
                    evaluator = self._registry.resolve(ref.ref)
                except BadInputError as exc:
                    raise BadInputError(f"{where}.ref: {exc}") from None
                params = from_value(struct_pb2.Value(struct_value=ref.params)) if ref.HasField("params") else {}
                try:
                    evaluator.bind(params)
                except BadInputError as exc:
                    raise BadInputError(f"{where}.params: {exc}") from None
                alias = alias or evaluator.short_name
            if ref.judge and request.judges and ref.judge not in request.judges:
                raise BadInputError(
                    f"{where}.judge: no judge named {ref.judge!r}; judges given: {', '.join(sorted(request.judges))}"
                )
            if alias and alias in aliases:
                raise BadInputError(
                    f"{where}.alias: {alias!r} is also evaluators[{aliases[alias]}]'s; give one of them another alias"
                )
            aliases[alias] = index


# --- RunService ----------------------------------------------------------------------------------


class RunHandlers:
    """Run: create, read, watch, cancel, resume, list results and compare runs."""

    def __init__(
        self,
        *,
        store: MetadataStore,
        objects: ObjectStore,
        control: Control,
        watch: Watch,
        validate_run: ValidateRun,
        load_records: LoadRecords,
        limits: HandlerLimits | None = None,
        connections: Connections | None = None,
        count_tasks: CountTasks | None = None,
        describe_plan: DescribePlan | None = None,
    ) -> None:
        """``connections``: the judges and agents the server offers (evalsi.yaml); none when not given.
        ``count_tasks``: the size of a run's plan, so a PENDING run counts tasks as a running one does (without
        it a pending run shows 0 tasks until the scheduler plans it)."""
        self._connections = connections or Connections()
        self._count_tasks = count_tasks
        self._describe_plan = describe_plan
        self._store = store
        self._objects = objects
        self._control = control
        self._watch = watch
        self._validate_run = validate_run
        self._load_records = load_records
        self._limits = limits or HandlerLimits()
        self._datasets = DatasetHandlers(objects, max_upload_bytes=self._limits.max_dataset_upload_bytes)

    async def create_run(self, request: CreateRunRequest, ctx: CallContext) -> Run:
        if not request.HasField("run"):
            raise BadInputError("run: the EvalRun document (metadata and spec) is required")
        document = request.run
        metadata = document.metadata
        project = ctx.resolve_project(request.project, metadata.project, metadata.labels.get(PROJECT_LABEL, ""))
        reserved = sorted(
            key for key in metadata.labels if key.startswith(RESERVED_LABEL_PREFIX) and key != PROJECT_LABEL
        )
        if reserved:
            raise BadInputError(
                f"run.metadata.labels: {reserved[0]!r} is set by the server ({RESERVED_LABEL_PREFIX}* labels other "
                f"than {PROJECT_LABEL} are reserved); remove it"
            )
        # Endpoints only by the names of the server's connections granted to the project; the models they
        # default to are written into the spec, so its manifest and hash say what runs.
        refuse(run_problems(self._connections, document, project))
        pin_models(self._connections, document)
        refuse_file_params((f"spec.evaluators[{i}]", ref.params) for i, ref in enumerate(document.spec.evaluators))
        # Validation and loading read files; keep them off the event loop.
        await asyncio.to_thread(self._validate_run, document)
        if request.dry_run:
            dataset = await _bus_call("reading the dataset", read_run_dataset(
                document, project=project, objects=self._objects, open_records=self._load_records))
            run = self._pending_run(document, project, len(dataset.records), dataset.version)
            # The same text as an embedded `evalsi run --dry-run` of the spec.
            run.message = (
                "dry run: nothing was called or stored"
                if self._describe_plan is None
                else self._describe_plan(
                    document, dataset.records, project=project, dataset=_dataset_name(document.spec.dataset)
                )
            )
            return run
        # The records go once, a shard at a time, into the object store; the run keeps their manifest's key.
        stored = await _bus_call("storing the run's records", store_run_dataset(
            document, project=project, objects=self._objects, open_records=self._load_records))
        run = self._pending_run(document, project, stored.manifest.records, stored.manifest.version)
        if document.spec.dataset.WhichOneof("kind") == "ref":
            run.manifest.dataset = f"{stored.manifest.source}@{stored.manifest.version}"
        run.id = "run-" + uuid.uuid4().hex[:16]
        run.labels[DATASET_LABEL] = stored.key
        await self._store.create_run(run)
        try:
            await _bus_call("announcing the run", self._control(_control(run, CONTROL_ACTION_CREATED)))
        except InfraError as exc:
            # Stored but unannounced: make it resumable rather than forever pending.
            run.state = RUN_STATE_FAILED
            run.message = f"the schedulers could not be told about the run ({exc}); resume it with ResumeRun"
            run.end_time.CopyFrom(_now())
            with contextlib.suppress(Exception):
                await self._store.update_run(run)
            raise InfraError(f"run {run.id} was stored but not started: {exc}; resume it later") from exc
        return run

    async def upload_dataset(self, requests: AsyncIterator[UploadDatasetRequest], ctx: CallContext) -> DatasetVersion:
        first = await anext(requests, None)
        if first is None:
            raise BadInputError("UploadDataset: no request; the first names the dataset (name, filename)")
        return await self._datasets.upload(ctx.resolve_project(first.project), first, requests)

    async def list_dataset_versions(
        self, request: ListDatasetVersionsRequest, ctx: CallContext
    ) -> ListDatasetVersionsResponse:
        versions = await self._datasets.versions(ctx.resolve_project(request.project), request.name)
        return ListDatasetVersionsResponse(versions=versions)

    def _pending_run(self, document: EvalRun, project: str, records: int, version: str) -> Run:
        spec = document.spec
        run = Run(project=project, name=document.metadata.name, spec=spec, state=RUN_STATE_PENDING)
        run.labels.update(document.metadata.labels)
        now = _now()
        run.create_time.CopyFrom(now)
        if self._count_tasks is not None:
            run.progress.total_tasks = self._count_tasks(document, records)
        run.manifest.dataset = _dataset_name(spec.dataset)
        run.manifest.dataset_version = version
        run.manifest.seed = spec.seed
        run.manifest.created.CopyFrom(now)
        return run

    async def get_run(self, request: GetRunRequest, ctx: CallContext) -> Run:
        return await self._get(ctx.project, request.id)

    async def list_runs(self, request: ListRunsRequest, ctx: CallContext) -> ListRunsResponse:
        if request.state not in RunState.values():
            raise BadInputError(f"state: {request.state} is not a run state; accepted: {', '.join(RunState.keys())}")
        labels: dict[str, str] = {}
        for index, item in enumerate(request.labels):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise BadInputError(f"labels[{index}]: expected key=value, got {item!r}")
            labels[key.strip()] = value.strip()
        limits = self._limits
        runs, token = await self._store.list_runs(
            ctx.project,
            state=request.state,
            name_contains=request.name_contains,
            labels=labels,
            page_size=_page_size(request.page_size, limits.default_runs_page_size, limits.max_page_size),
            page_token=request.page_token,
        )
        return ListRunsResponse(runs=runs, next_page_token=token)

    async def watch_run(self, request: WatchRunRequest, ctx: CallContext) -> AsyncIterator[RunEvent]:
        """The stored state first, then the bus's events until the run ends.

        The subscription starts before the stored run is read, so nothing between the two is lost;
        the stored run is re-read whenever the bus is quiet for ``watch_poll_s``, so a missed terminal
        event still ends the watch.
        """
        run_id = _required(request.id, "id", "a run id")
        queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=256)
        pump = asyncio.create_task(_pump(self._watch(run_id), queue))
        try:
            await asyncio.sleep(0)  # let the subscription begin
            run = await self._get(ctx.project, run_id)
            if run.state in TERMINAL_STATES:
                yield _final_event(run)
                return
            yield _state_event(run)
            last_state = run.state
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), self._limits.watch_poll_s)
                except TimeoutError:
                    item = None
                if item is None or item is _END:
                    run = await self._get(ctx.project, run_id)
                    if run.state in TERMINAL_STATES:
                        yield _final_event(run)
                        return
                    if item is _END:
                        raise InfraError(f"the event stream of run {run_id} ended before the run did; watch again")
                    if run.state != last_state:
                        last_state = run.state
                        yield _state_event(run)
                    continue
                if isinstance(item, Exception):
                    raise InfraError(f"watching run {run_id}: {type(item).__name__}: {item}") from item
                event: RunEvent = item
                if not event.run_id:
                    event.run_id = run_id
                yield event
                if event.state in TERMINAL_STATES:
                    return
                if event.state:
                    last_state = event.state
        finally:
            pump.cancel()
            with contextlib.suppress(BaseException):
                await pump

    async def cancel_run(self, request: CancelRunRequest, ctx: CallContext) -> Run:
        run = await self._get(ctx.project, request.id)
        if run.state in TERMINAL_STATES:
            return run
        await _bus_call("requesting the cancel", self._control(_control(run, CONTROL_ACTION_CANCEL)))
        return run

    async def resume_run(self, request: ResumeRunRequest, ctx: CallContext) -> Run:
        run = await self._get(ctx.project, request.id)
        if run.state not in RESUMABLE_STATES:
            raise BadInputError(
                f"id: run {run.id} is {state_name(run.state)}; only cancelled, failed or budget-exceeded runs "
                "can be resumed"
            )
        await _bus_call("requesting the resume", self._control(_control(run, CONTROL_ACTION_RESUME)))
        # What the scheduler makes of it at once: pending again, its cancelled and failed tasks to be redone.
        run.state, run.message = RUN_STATE_PENDING, "resume requested"
        run.ClearField("end_time")
        return run

    async def list_run_results(self, request: ListRunResultsRequest, ctx: CallContext) -> ListRunResultsResponse:
        run = await self._get(ctx.project, request.id)
        limits = self._limits
        results, token = await self._store.list_results(
            ctx.project,
            run.id,
            evaluator=request.evaluator,
            page_size=_page_size(request.page_size, limits.default_results_page_size, limits.max_page_size),
            page_token=request.page_token,
        )
        return ListRunResultsResponse(results=results, next_page_token=token)

    async def compare_runs(self, request: CompareRunsRequest, ctx: CallContext) -> Comparison:
        confidence = request.confidence or 0.95
        if not 0 < confidence < 1:
            raise BadInputError(f"confidence: {request.confidence} must be between 0 and 1, such as 0.95")
        fields = ("run_a", "run_b")
        runs = [await self._get(ctx.project, getattr(request, field), field=field) for field in fields]
        for field, run in zip(fields, runs, strict=True):
            if not run.summaries:
                raise BadInputError(
                    f"{field}: run {run.id} has no summaries yet (it is {state_name(run.state)}); "
                    "compare runs that have finished"
                )
        for run in runs:
            async for batch in self._store.iter_results(
                ctx.project, run.id, batch_size=self._limits.compare_batch_size
            ):
                run.results.extend(batch)
        # Numeric work on possibly large runs: off the event loop.
        return await asyncio.to_thread(compare_runs, runs[0], runs[1], confidence=confidence)

    async def _get(self, project: str, run_id: str, *, field: str = "id") -> Run:
        _required(run_id, field, "a run id")
        run = await self._store.get_run(project, run_id)
        if run is None:
            raise NotFoundError(f"{field}: run {run_id!r} not found in project {project!r}")
        return run


_END = object()


async def _pump(events: AsyncIterator[RunEvent], queue: asyncio.Queue[Any]) -> None:
    """Move the bus's events into the queue; its failure or end goes in as the last item."""
    try:
        async for event in events:
            await queue.put(event)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        await queue.put(exc)
        return
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            with contextlib.suppress(Exception):
                await close()
    await queue.put(_END)


def _control(run: Run, action: int) -> RunControl:
    return RunControl(run_id=run.id, project=run.project, action=action)


def _state_event(run: Run) -> RunEvent:
    event = RunEvent(
        run_id=run.id,
        type=RUN_EVENT_TYPE_STATE,
        state=run.state,
        progress=run.progress,
        summaries=run.summaries,
        gates=run.gates,
        message=run.message,
    )
    event.time.CopyFrom(_now())
    return event


def _final_event(run: Run) -> RunEvent:
    event = RunEvent(
        run_id=run.id,
        type=RUN_EVENT_TYPE_SUMMARY,
        state=run.state,
        progress=run.progress,
        summaries=run.summaries,
        gates=run.gates,
        message=run.message,
    )
    event.time.CopyFrom(run.end_time if run.HasField("end_time") else _now())
    return event


def _dataset_name(source: DatasetSource) -> str:
    kind = source.WhichOneof("kind")
    return getattr(source, kind) if kind else ""


# --- CatalogService ------------------------------------------------------------------------------


class CatalogHandlers:
    """The evaluators this deployment offers, by pack."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        # The registry does not change while the server runs: build each manifest once.
        self._manifests = {ev.ref: ev.manifest() for ev in registry.evaluators()}

    @property
    def registry(self) -> Registry:
        return self._registry

    async def list_evaluators(self, request: ListEvaluatorsRequest, ctx: CallContext) -> ListEvaluatorsResponse:
        pack = request.pack.strip() or None
        try:
            evaluators = self._registry.evaluators(pack)
        except BadInputError as exc:
            raise BadInputError(f"pack: {exc}") from None
        response = ListEvaluatorsResponse(evaluators=[self._manifests[ev.ref] for ev in evaluators])
        for name, info in sorted(self._registry.packs.items()):
            if pack is None or name == pack:
                count = len(self._registry.evaluators(name))
                response.packs.append(
                    PackInfo(name=name, description=info.description, default_on=info.default_on, evaluators=count)
                )
        return response


# --- TraceService --------------------------------------------------------------------------------

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
        since = _timestamp_ns(request.start_time) if request.HasField("start_time") else None
        until = _timestamp_ns(request.end_time) if request.HasField("end_time") else None
        if since is not None and until is not None and until <= since:
            raise BadInputError("end_time: must be after start_time")
        limits = self._limits
        page = await store.list_traces(
            ctx.project,
            limit=_page_size(request.page_size, limits.default_runs_page_size, limits.max_page_size),
            page_token=request.page_token,
            service=request.service_name or None,
            session_id=request.session_id or None,
            since_ns=since,
            until_ns=until,
            has_error=request.has_error if request.HasField("has_error") else None,
            **({"score_metric": request.score_metric, **bounds} if request.score_metric else {}),
        )
        return ListTracesResponse(
            traces=[trace_summary(ctx.project, summary) for summary in page.traces],
            next_page_token=page.next_page_token,
        )

    async def get_trace(self, request: GetTraceRequest, ctx: CallContext) -> Trace:
        store = self._configured()
        trace_id = _required(request.trace_id, "trace_id", "a trace id (32 hex digits)").strip()
        if not _TRACE_ID.match(trace_id):
            raise BadInputError(f"trace_id: {request.trace_id!r} is not a trace id (32 hex digits)")
        trace_id = trace_id.lower()
        record = await store.get_trace(ctx.project, trace_id)
        summary = await store.get_summary(ctx.project, trace_id)
        if record is None or summary is None:
            raise NotFoundError(f"trace_id: trace {trace_id} not found in project {ctx.project!r}")
        scores = await store.list_scores(ctx.project, trace_id=trace_id)
        feedback = await store.list_feedback(ctx.project, trace_id=trace_id,
                                             session_id=summary.session_id or None)
        return Trace(summary=trace_summary(ctx.project, summary), tree=span_tree(record), record=record,
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
        await store.put_feedback(project, [item])
        if item.negative and self._retrigger is not None:
            summaries = [await store.get_summary(project, item.trace_id)] if item.trace_id else [
                s for s in (await store.list_traces(project, session_id=item.session_id, limit=1000)).traces]
            for summary in summaries:
                if summary is not None and summary.completed_at is not None:
                    await _bus_call("asking the policies to re-evaluate",
                                    self._retrigger(project, summary.trace_id, summary.span_count))
        return trace_feedback(item)


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


def _timestamp_ns(stamp: Timestamp) -> int:
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


# --- MonitorService ------------------------------------------------------------------------------

NO_POLICY_STORE = "no policy store is configured: evalsi-api keeps policies in its metadata store (--metadata-url)"


class MonitorHandlers:
    """Watch: online policies applied, listed, read, deleted, and the statistics of the scores they stored.

    Policies live in the metadata store; their scores live with the traces, so GetPolicyStats needs the trace
    store (``--traces-url``) and answers FAILED_PRECONDITION without one.
    """

    def __init__(
        self,
        policies: PolicyStore | None,
        scores: ScoreStore | None,
        *,
        registry: Registry,
        limits: HandlerLimits | None = None,
        clock: Callable[[], float] = time.time,
        connections: Connections | None = None,
    ) -> None:
        """``connections``: the judges the server offers to judge stages (evalsi.yaml judges:)."""
        self._connections = connections or Connections()
        self._policies = policies
        self._scores = scores
        self._registry = registry
        self._limits = limits or HandlerLimits()
        self._clock = clock

    def _store(self) -> PolicyStore:
        if self._policies is None:
            raise ApiError(grpc.StatusCode.FAILED_PRECONDITION, NO_POLICY_STORE)
        return self._policies

    async def apply_policy(self, request: ApplyPolicyRequest, ctx: CallContext) -> Policy:
        store = self._store()
        if not request.HasField("policy"):
            raise BadInputError("policy: the OnlineEvalPolicy document (apiVersion, kind, metadata, spec) is required")
        document = OnlineEvalPolicy()
        document.CopyFrom(request.policy)
        for field, expected in (("api_version", API_VERSION), ("kind", POLICY_KIND)):
            value = getattr(document, field)
            if value and value != expected:
                raise BadInputError(f"policy.{field}: must be {expected}, got {value!r}")
            setattr(document, field, expected)
        document.metadata.project = _policy_project(document, request.project, ctx)
        # CEL compilation is CPU work: off the event loop.
        refuse_file_params((f"spec.cascade[{i}]", stage.params) for i, stage in enumerate(document.spec.cascade))
        compiled = await asyncio.to_thread(compile_policy, document, registry=self._registry)
        # Alerts are never sent unsigned: the signing secret must be set here (evalsi-policy gets the same
        # environment from evalsi serve), so the caller learns now, not when an alert would go out.
        unset = unset_alert_secrets(document, os.environ)
        if unset:
            raise BadInputError("\n".join(unset))
        refuse(policy_problems(self._connections, compiled, document.metadata.project))
        if request.dry_run:
            current = await store.get_policy(document.metadata.project, document.metadata.name)
            digest = policy_hash(document)
            changed = current is None or current.spec_hash != digest
            generation = (current.generation if current is not None else 0) + (1 if changed else 0)
            return Policy(
                project=document.metadata.project, name=document.metadata.name, policy=document,
                generation=generation, spec_hash=digest, changed=changed,
            )
        stored, changed = await store.put_policy(document.metadata.project, document)
        return policy_message(stored, changed=changed)

    async def list_policies(self, request: ListPoliciesRequest, ctx: CallContext) -> ListPoliciesResponse:
        stored = await self._store().list_policies(ctx.project)
        limits = self._limits
        size = _page_size(request.page_size, limits.default_runs_page_size, limits.max_page_size)
        after = _policy_cursor(request.page_token)
        # A project holds few policies: page by name over the full list rather than in SQL.
        remaining = [p for p in stored if after is None or p.name > after]
        page = remaining[:size]
        token = _policy_token(page[-1].name) if len(remaining) > size else ""
        return ListPoliciesResponse(policies=[policy_message(p) for p in page], next_page_token=token)

    async def get_policy(self, request: GetPolicyRequest, ctx: CallContext) -> Policy:
        return policy_message(await self._get(ctx.project, request.name))

    async def delete_policy(self, request: DeletePolicyRequest, ctx: CallContext) -> Policy:
        stored = await self._get(ctx.project, request.name)
        if not await self._store().delete_policy(ctx.project, stored.name):
            raise NotFoundError(f"name: policy {stored.name!r} not found in project {ctx.project!r}")
        return policy_message(stored)

    async def get_policy_stats(self, request: GetPolicyStatsRequest, ctx: CallContext) -> PolicyStats:
        stored = await self._get(ctx.project, request.name)
        if self._scores is None:
            raise ApiError(grpc.StatusCode.FAILED_PRECONDITION, NO_TRACE_STORE)
        spec = stored.policy.spec
        window_s = spec.window.ToNanoseconds() / 1e9 if spec.HasField("window") else DEFAULT_WINDOW_S
        since, until = self._range(request, window_s)
        scores = await self._scores.list_scores(ctx.project, policy=stored.name, since=since, until=until)
        stats = PolicyStats(project=ctx.project, name=stored.name, generation=stored.generation)
        stats.window.FromNanoseconds(round(window_s * 1e9))
        if since is not None:
            stats.start_time.FromNanoseconds(round(since * 1e9))
        if until is not None:
            stats.end_time.FromNanoseconds(round(until * 1e9))
        # Intervals over possibly many scores: numeric work off the event loop.
        metrics, windows = await asyncio.to_thread(_score_stats, scores, window_s, request.per_window)
        stats.traces_evaluated = len({s.trace_id for s in scores})
        stats.metrics.extend(metrics)
        stats.windows.extend(windows)
        return stats

    def _range(self, request: GetPolicyStatsRequest, window_s: float) -> tuple[float | None, float | None]:
        """(since, until) in unix seconds; ``since`` on a window boundary so the first window is whole."""
        if request.last_windows < 0:
            raise BadInputError(f"last_windows: {request.last_windows} must be zero (no limit) or positive")
        if request.last_windows and request.HasField("start_time"):
            raise BadInputError("last_windows: give last_windows or start_time, not both")
        until = _timestamp_ns(request.end_time) / 1e9 if request.HasField("end_time") else None
        since = None
        if request.HasField("start_time"):
            since = window_start(_timestamp_ns(request.start_time) / 1e9, window_s)
        elif request.last_windows:
            since = window_start(until if until is not None else self._clock(), window_s)
            since -= (request.last_windows - 1) * window_s
        if since is not None and until is not None and until <= since:
            raise BadInputError("end_time: must be after start_time (and after the first window's start)")
        return since, until

    async def _get(self, project: str, name: str) -> StoredPolicy:
        _required(name, "name", "a policy name")
        stored = await self._store().get_policy(project, name)
        if stored is None:
            raise NotFoundError(f"name: policy {name!r} not found in project {project!r}")
        return stored


def _policy_project(document: OnlineEvalPolicy, request_project: str, ctx: CallContext) -> str:
    """The header, the request's project, else the document's metadata.project or label, else ``default``.

    The document naming another project than the header or request is refused: applying a policy meant for
    one project to another is almost always a mistake. ``default`` in metadata.project does not count, since
    ``evalsi.policy.parse_policy`` fills it in when a file names no project.
    """
    named = document.metadata.project
    label = document.metadata.labels.get(PROJECT_LABEL, "")
    for value, where in ((named, "policy.metadata.project"), (label, f"policy.metadata.labels[{PROJECT_LABEL}]")):
        if value:
            check_project(value, where)
    project = ctx.resolve_project(request_project, named, label)
    if named and named not in (project, DEFAULT_PROJECT):
        raise BadInputError(f"policy.metadata.project: {named!r} differs from the project {project!r} of the call")
    if label and label != project:
        raise BadInputError(
            f"policy.metadata.labels: {PROJECT_LABEL}={label!r} differs from the project {project!r} of the call"
        )
    return project


def _policy_token(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).decode().rstrip("=")


def _policy_cursor(token: str) -> str | None:
    if not token:
        return None
    try:  # ValueError: not base64 (binascii.Error), not ASCII, or not UTF-8 inside
        name = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except ValueError:
        raise BadInputError(f"page_token: {token!r} is not a token ListPolicies returned") from None
    if text_problem(name):  # a forged token carrying what the store cannot take
        raise BadInputError(f"page_token: {token!r} is not a token ListPolicies returned")
    return name


def policy_message(stored: StoredPolicy, *, changed: bool = False) -> Policy:
    message = Policy(
        project=stored.project, name=stored.name, policy=stored.policy, generation=stored.generation,
        spec_hash=stored.spec_hash, changed=changed,
    )
    message.update_time.FromNanoseconds(round(stored.updated_at * 1e9))
    return message


def _score_stats(
    scores: Sequence[Any], window_s: float, per_window: bool
) -> tuple[list[MetricStats], list[WindowStats]]:
    metrics = _metric_stats(scores)
    windows: list[WindowStats] = []
    if per_window:
        by_window: dict[float, list[Any]] = {}
        for score in scores:
            by_window.setdefault(window_start(score.scored_at, window_s), []).append(score)
        for start in sorted(by_window):
            rows = by_window[start]
            window = WindowStats(traces_evaluated=len({s.trace_id for s in rows}), metrics=_metric_stats(rows))
            window.start_time.FromNanoseconds(round(start * 1e9))
            window.end_time.FromNanoseconds(round((start + window_s) * 1e9))
            windows.append(window)
    return metrics, windows


def _metric_stats(scores: Sequence[Any]) -> list[MetricStats]:
    """Per metric, by name: the scored values summarized (Wilson for pass/fail, Student-t for numbers), with
    skipped (of which no content) and errors counted apart, as every aggregate in the product is."""
    by_metric: dict[str, list[Any]] = {}
    for score in scores:
        by_metric.setdefault(score.metric, []).append(score)
    out: list[MetricStats] = []
    for metric in sorted(by_metric):
        rows = by_metric[metric]
        scored = [s for s in rows if s.outcome == SCORED and s.value is not None]
        pass_fail = bool(scored) and all(s.passed is not None for s in scored)
        skipped = [s for s in rows if s.outcome == SKIPPED]
        last = rows[-1]
        stats = MetricStats(
            metric=metric, stage=last.stage, evaluator=last.evaluator, pass_fail=pass_fail,
            skipped=len(skipped), no_content=sum(1 for s in skipped if s.reason.startswith(NO_CONTENT)),
            errors=sum(1 for s in rows if s.outcome == ERROR),
        )
        aggregate = summarize([float(s.value) for s in scored], binary=pass_fail)
        stats.n, stats.level, stats.method = aggregate.n, aggregate.level, aggregate.method or ""
        for figure in ("mean", "std", "ci_low", "ci_high"):
            value = getattr(aggregate, figure)
            if value is not None:
                setattr(stats, figure, value)
        out.append(stats)
    return out
