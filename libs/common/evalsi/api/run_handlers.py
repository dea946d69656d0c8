"""RunService: runs created, read, listed, watched, cancelled, resumed, their results and comparisons; datasets
uploaded and listed (delegated to :class:`evalsi.api.datasets_handlers.DatasetHandlers`)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import grpc

from evalsi.api.config import HandlerLimits
from evalsi.api.context import CallContext
from evalsi.api.datasets_handlers import DatasetHandlers
from evalsi.api.dependencies import (
    Control,
    CountTasks,
    DescribePlan,
    LoadRecords,
    ValidateRun,
    Watch,
)
from evalsi.api.errors import ApiError, NotFoundError
from evalsi.api.file_params import refuse_file_params
from evalsi.api.handlers_common import (
    RESERVED_LABEL_PREFIX,
    RESUMABLE_STATES,
    TERMINAL_STATES,
    bus_call,
    now_timestamp,
    page_size,
    required,
    state_name,
)
from evalsi.api.live_packs import LivePacks
from evalsi.api.pack_checks import refuse_unallowed
from evalsi.api.run_dataset import (
    count_run_dataset,
    describe_run_dataset,
    refuse_unknown_cluster_key,
    store_run_dataset,
)
from evalsi.api.run_records import chunks_of, find, page_of
from evalsi.auth.principal import ANY_PROJECT
from evalsi.authz.attributes import stored_run
from evalsi.bus.v1alpha1.bus_pb2 import (
    CONTROL_ACTION_CANCEL,
    CONTROL_ACTION_CREATED,
    CONTROL_ACTION_RESUME,
    ControlAction,
    RunControl,
)
from evalsi.connection_rules import pin_models, run_problems
from evalsi.connections import Connections
from evalsi.datasets.run_records import DATASET_LABEL, StoredRunRecords
from evalsi.documents import SpecProblems, merge_problems, problems_of
from evalsi.errors import BadInputError, InfraError
from evalsi.evaluators import Registry
from evalsi.hosts import is_loopback
from evalsi.labels import parse_label_filters
from evalsi.projects import DEFAULT_PROJECT, PROJECT_LABEL
from evalsi.runs.compare import compare_runs
from evalsi.stats.defaults import ADJUSTMENTS, DEFAULT_ADJUSTMENT, DEFAULT_CONFIDENCE
from evalsi.stores import MetadataStore, ObjectStore
from evalsi.v1alpha1.run_pb2 import (
    RUN_STATE_FAILED,
    RUN_STATE_PENDING,
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
    ListRunRecordsRequest,
    ListRunRecordsResponse,
    ListRunResultsRequest,
    ListRunResultsResponse,
    ListRunsRequest,
    ListRunsResponse,
    ResumeRunRequest,
    RunEvent,
    UploadDatasetRequest,
    WatchRunRequest,
)


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
        listen_host: str = "",
        registry: Registry | None = None,
        packs: LivePacks | None = None,
    ) -> None:
        """``connections``: the judges and agents the server offers (evalsi.yaml); none when not given.
        ``registry``: which pack each evaluator a spec names is in, for the project's allowlist (none: unchecked);
        ``packs``: the allowlists (none: ``connections``' evaluators: section alone).
        ``count_tasks``: the size of a run's plan, so a PENDING run counts tasks as a running one does (without
        it a pending run shows 0 tasks until the scheduler plans it). ``listen_host``: where the listeners are;
        on loopback alone every caller is on this machine, so ListRuns may cross projects and a run looked up in
        the wrong project is said to be in its own (elsewhere projects are the boundary between callers)."""
        self._listen_host = listen_host
        self._registry = registry
        self._loopback_only = bool(listen_host) and is_loopback(listen_host)
        self._connections = connections or Connections()
        self._packs = packs or LivePacks(self._connections.packs)
        self._count_tasks = count_tasks
        self._describe_plan = describe_plan
        self._store = store
        self._objects = objects
        self._control = control
        self._watch = watch
        self._validate_run = validate_run
        self._load_records = load_records
        self._limits = limits or HandlerLimits()
        self._records = StoredRunRecords(objects)
        self._datasets = DatasetHandlers(objects, max_upload_bytes=self._limits.max_dataset_upload_bytes)

    async def create_run(self, request: CreateRunRequest, ctx: CallContext) -> Run:
        if not request.HasField("run"):
            raise BadInputError("run: the EvalRun document (metadata and spec) is required")
        document = request.run
        metadata = document.metadata
        project = ctx.resolve_project(request.project, metadata.project, metadata.labels.get(PROJECT_LABEL, ""))
        if self._registry is not None:  # evaluators only of packs the project is allowed (naming is the opt-in)
            refuse_unallowed(self._packs.current(), self._registry, project,
                             ((f"spec.evaluators[{i}].ref", r.ref) for i, r in enumerate(document.spec.evaluators)))
        reserved = sorted(
            key for key in metadata.labels if key.startswith(RESERVED_LABEL_PREFIX) and key != PROJECT_LABEL
        )
        problems = [
            f"run.metadata.labels: {key!r} is set by the server ({RESERVED_LABEL_PREFIX}* labels other than "
            f"{PROJECT_LABEL} are reserved); remove it"
            for key in reserved
        ]
        # Endpoints only by the names of the server's connections granted to the project; the models they
        # default to are written into the spec, so its manifest and hash say what runs.
        connection_problems = run_problems(self._connections, document, project)
        problems += connection_problems
        if not connection_problems:
            pin_models(self._connections, document)
        try:
            refuse_file_params((f"spec.evaluators[{i}]", r.params) for i, r in enumerate(document.spec.evaluators))
        except BadInputError as exc:
            problems.append(str(exc))
        # Every problem in one answer (400 / INVALID_ARGUMENT); validation's own about a judge or target whose
        # connection is refused above would only repeat it. Validation reads files: off the event loop.
        try:
            await asyncio.to_thread(self._validate_run, document)
        except BadInputError as exc:
            problems = merge_problems(problems, problems_of(exc))
        if problems:
            raise SpecProblems(problems, what="the run spec")
        warning = await bus_call("reading the dataset", refuse_unknown_cluster_key(
            document, project=project, objects=self._objects, open_records=self._load_records))
        if request.dry_run:
            plan: dict[str, Any] | None = None
            if self._describe_plan is None:
                text = "dry run: nothing was called or stored"
                counted = await bus_call("reading the dataset", count_run_dataset(
                    document, project=project, objects=self._objects, open_records=self._load_records))
            else:
                # The same text as an embedded `evalsi run --dry-run` of the spec, from the records read once.
                describe = partial(self._describe_plan, document, project=project,
                                   dataset=_dataset_name(document.spec.dataset))
                (text, plan), counted = await bus_call("reading the dataset", describe_run_dataset(
                    document, project=project, objects=self._objects, open_records=self._load_records,
                    describe=describe))
            run = self._pending_run(document, project, counted.records, counted.version, _created_by(ctx))
            run.message = f"{text}\nwarning: {warning}" if warning else text
            if plan is not None:
                run.dry_run_plan.update(plan)
            return run
        # The records go once, a shard at a time, into the object store; the run keeps their manifest's key.
        stored = await bus_call("storing the run's records", store_run_dataset(
            document, project=project, objects=self._objects, open_records=self._load_records))
        run = self._pending_run(document, project, stored.manifest.records, stored.manifest.version,
                               _created_by(ctx))
        run.message = warning  # a pending run's message: what the server warned of (a cluster key some lack)
        if document.spec.dataset.WhichOneof("kind") == "ref":
            run.manifest.dataset = f"{stored.manifest.source}@{stored.manifest.version}"
        run.id = "run-" + uuid.uuid4().hex[:16]
        run.labels[DATASET_LABEL] = stored.key
        await self._store.create_run(run)
        try:
            await bus_call("announcing the run", self._control(_control(run, CONTROL_ACTION_CREATED)))
        except InfraError as exc:
            # Stored but unannounced: make it resumable rather than forever pending.
            run.state = RUN_STATE_FAILED
            run.message = f"the schedulers could not be told about the run ({exc}); resume it with ResumeRun"
            run.end_time.CopyFrom(now_timestamp())
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

    def _pending_run(self, document: EvalRun, project: str, records: int, version: str, created_by: str) -> Run:
        spec = document.spec
        run = Run(project=project, name=document.metadata.name, spec=spec, state=RUN_STATE_PENDING,
                  created_by=created_by)
        run.labels.update(document.metadata.labels)
        now = now_timestamp()
        run.create_time.CopyFrom(now)
        if self._count_tasks is not None:
            run.progress.total_tasks = self._count_tasks(document, records)
        run.manifest.dataset = _dataset_name(spec.dataset)
        run.manifest.dataset_version = version
        run.manifest.seed = spec.seed
        run.manifest.created.CopyFrom(now)
        run.manifest.created_by = created_by
        return run

    async def get_run(self, request: GetRunRequest, ctx: CallContext) -> Run:
        return await self._get(ctx, request.id)

    async def list_runs(self, request: ListRunsRequest, ctx: CallContext) -> ListRunsResponse:
        if request.state not in RunState.values():
            raise BadInputError(f"state: {request.state} is not a run state; accepted: {', '.join(RunState.keys())}")
        labels = parse_label_filters(request.labels, "labels")
        after = request.created_after.ToMicroseconds() if request.HasField("created_after") else None
        before = request.created_before.ToMicroseconds() if request.HasField("created_before") else None
        if after is not None and before is not None and before <= after:
            raise BadInputError(
                f"created_before ({request.created_before.ToJsonString()}): must be later than created_after "
                f"({request.created_after.ToJsonString()}); created_after is inclusive, created_before exclusive"
            )
        if request.all_projects:
            await self._check_all_projects(ctx)
        limits = self._limits
        runs, token = await self._store.list_runs(
            ctx.project,
            state=request.state,
            name_contains=request.name_contains,
            labels=labels,
            page_size=page_size(request.page_size, limits.default_runs_page_size, limits.max_page_size),
            page_token=request.page_token,
            all_projects=request.all_projects,
            created_after_us=after,
            created_before_us=before,
        )
        # Per run, as GetRun decides: a role conditioned on labels or created_by lists only what it may read (a
        # page may so hold fewer runs than page_size; the token still continues after the last one stored).
        visible = [run for run in runs if await ctx.may_see(stored_run({}, run))]
        return ListRunsResponse(runs=visible, next_page_token=token)

    async def watch_run(self, request: WatchRunRequest, ctx: CallContext) -> AsyncIterator[RunEvent]:
        """The stored state first, then the bus's events until the run ends.

        The subscription starts before the stored run is read, so nothing between the two is lost;
        the stored run is re-read whenever the bus is quiet for ``watch_poll_s``, so a missed terminal
        event still ends the watch.
        """
        run_id = required(request.id, "id", "a run id")
        queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=256)
        pump = asyncio.create_task(_pump(self._watch(run_id), queue))
        try:
            await asyncio.sleep(0)  # let the subscription begin
            run = await self._get(ctx, run_id)
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
                    run = await self._get(ctx, run_id)
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
        run = await self._get(ctx, request.id)
        if run.state in TERMINAL_STATES:
            return run
        await bus_call("requesting the cancel", self._control(_control(run, CONTROL_ACTION_CANCEL)))
        return run

    async def resume_run(self, request: ResumeRunRequest, ctx: CallContext) -> Run:
        run = await self._get(ctx, request.id)
        if run.state not in RESUMABLE_STATES:
            raise BadInputError(
                f"id: run {run.id} is {state_name(run.state)}; only cancelled, failed or budget-exceeded runs "
                "can be resumed"
            )
        await bus_call("requesting the resume", self._control(_control(run, CONTROL_ACTION_RESUME)))
        # What the scheduler makes of it at once: pending again, its cancelled and failed tasks to be redone.
        run.state, run.message = RUN_STATE_PENDING, "resume requested"
        run.ClearField("end_time")
        return run

    async def list_run_results(self, request: ListRunResultsRequest, ctx: CallContext) -> ListRunResultsResponse:
        run = await self._get(ctx, request.id)
        limits = self._limits
        results, token = await self._store.list_results(
            ctx.project,
            run.id,
            evaluator=request.evaluator,
            page_size=page_size(request.page_size, limits.default_results_page_size, limits.max_page_size),
            page_token=request.page_token,
        )
        return ListRunResultsResponse(results=results, next_page_token=token)

    async def list_run_records(self, request: ListRunRecordsRequest, ctx: CallContext) -> ListRunRecordsResponse:
        run = await self._get(ctx, request.id)
        chunks = await bus_call("listing the run's records", chunks_of(run, request.trial, self._store, self._records))
        if request.record_ids:
            found = await bus_call("reading the run's records", find(chunks, list(request.record_ids)))
            return ListRunRecordsResponse(records=found)
        limits = self._limits
        size = page_size(request.page_size, limits.default_results_page_size, limits.max_page_size)
        records, token = await bus_call("reading the run's records", page_of(chunks, size, request.page_token))
        return ListRunRecordsResponse(records=records, next_page_token=token)

    async def compare_runs(self, request: CompareRunsRequest, ctx: CallContext) -> Comparison:
        confidence = request.confidence or DEFAULT_CONFIDENCE
        if not 0 < confidence < 1:
            raise BadInputError(f"confidence: {request.confidence} must be between 0 and 1, such as 0.95")
        adjust = request.adjust or DEFAULT_ADJUSTMENT
        if adjust not in ADJUSTMENTS:
            raise BadInputError(f"adjust: {request.adjust!r} is not one of {', '.join(ADJUSTMENTS)}")
        fields = ("run_a", "run_b")
        runs = [await self._get(ctx, getattr(request, field), field=field) for field in fields]
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
        return await asyncio.to_thread(compare_runs, runs[0], runs[1], confidence=confidence, adjust=adjust)

    async def _check_all_projects(self, ctx: CallContext) -> None:
        if ctx.access is not None:  # authenticated: for who may read runs in every project (an owner)
            await ctx.check_access({}, project=ANY_PROJECT)
            return
        if not self._loopback_only:
            where = f"on {self._listen_host}" if self._listen_host else "beyond loopback"
            raise ApiError(grpc.StatusCode.PERMISSION_DENIED,
                           f"all_projects: this server listens {where}, so callers may be on other machines and "
                           "a call sees only its own project's runs; all_projects is granted only by a server that "
                           "listens on loopback alone (127.0.0.1, ::1 or localhost)")
        if ctx.project != DEFAULT_PROJECT or ctx.header_project:
            raise BadInputError(f"all_projects: lists every project's runs, but the call names project "
                                f"{ctx.project!r}; give one or the other")

    async def _get(self, ctx: CallContext, run_id: str, *, field: str = "id") -> Run:
        """The run in the call's project, decided again with its stored attributes (created_by, labels) when
        authentication is on: a role condition or rule on ``resource.run`` sees the run itself."""
        required(run_id, field, "a run id")
        project = ctx.project
        run = await self._store.get_run(project, run_id)
        if run is None:
            message = f"{field}: run {run_id!r} not found in project {project!r}"
            # Only where every caller is on this machine and nobody is authenticated: elsewhere this would tell a
            # caller another project's ids.
            elsewhere = await self._store.run_project(run_id) if self._loopback_only and ctx.access is None else None
            if elsewhere:
                message += f"; it is in project {elsewhere!r}"
            raise NotFoundError(message)
        await ctx.check_access(stored_run({}, run))
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


def _created_by(ctx: CallContext) -> str:
    """Who starts a run: the principal's provider/subject (never its credential); empty without authentication."""
    return ctx.principal.id if ctx.principal.authenticated else ""


def _control(run: Run, action: ControlAction) -> RunControl:
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
    event.time.CopyFrom(now_timestamp())
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
    event.time.CopyFrom(run.end_time if run.HasField("end_time") else now_timestamp())
    return event


def _dataset_name(source: DatasetSource) -> str:
    kind = source.WhichOneof("kind")
    return getattr(source, kind) if kind else ""
