"""A run in this process on the served engine: the same driver (``runs.driver``) and the same ``Executor`` as the
scheduler and worker services, over the in-process bus and an in-memory store instead of NATS and SQL. It is what
``evalsi run`` runs (``runs.embedded``).

What it returns is the document a server would store, with its results: same plan, task keys, final-state rule,
summaries, gates and manifest. What a process can do that a service cannot: target calls report their usage as
they answer (``stores.memory``'s meter), so a token or cost budget stops the run at the call that exceeds it; judges
configured in code (``evaluate(judge=JudgeConfig(...))``) are used as given, credentials included, where a task
names them; evaluator objects that no installed pack holds run too (``runs.binding.registry_for``); and
comparative evaluators find the other result set (``compare_with``) in the run's records.

A cancel (``cancel``, Ctrl-C) drains the run first: calls in flight finish, nothing new starts, finished work is
kept (``bus.memory``); then the driver cancels it as CancelRun would.

Beyond a memory budget (``runs.memory_budget``), ``run_locally`` gives the run a local store instead of the memory
ones: its records go as content-addressed shards into an object directory and are read back a shard at a time, as
the served scheduler's are (``datasets.shards``, ``datasets.run_records``), and its results go to a SQLite metadata
store (``stores.spilled``), from which the returned ``EvaluationResults`` reads them in pages.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalsi.bus.memory import MemoryBus
from evalsi.bus.v1alpha1.bus_pb2 import STAGE_GENERATE, Task, TaskResult
from evalsi.datasets.held import HeldRecords
from evalsi.datasets.run_records import DATASET_LABEL, StoredRunRecords
from evalsi.datasets.shards import DatasetManifest, put_manifest, write_dataset
from evalsi.datasets.wire import entries
from evalsi.evaluators import Registry
from evalsi.evaluators.runner import ColumnLists
from evalsi.judges import JudgeClient, JudgeConfig, RetryPolicy
from evalsi.judges.panel import JudgeSet
from evalsi.runs.driver import RunDriver
from evalsi.runs.execute import Executor
from evalsi.runs.intake import OBJECTS_DIR, TakenRecords
from evalsi.runs.manifest import timestamp_of
from evalsi.runs.memory_budget import exceeds_memory_budget, memory_budget_mb
from evalsi.runs.news import RunNews
from evalsi.runs.outcome import TARGET_FAILURE_KEY
from evalsi.runs.plan import DEFAULT_SHARD_SIZE, budget_exceeded, generates_outputs, planned_task_count
from evalsi.runs.ports import RunRecords
from evalsi.runs.record_isolation import EVALUATED_LABEL, evaluated_records
from evalsi.runs.results import EvaluationResults
from evalsi.runs.stored_results import RESULTS_DB, StoredResults
from evalsi.runs.summary import SummaryBuilder
from evalsi.stores.memory import MemoryRecords, MemoryRunStore
from evalsi.stores.objects import LocalObjectStore
from evalsi.stores.spilled import SpilledRunStore
from evalsi.stores.sql import SqlMetadataStore
from evalsi.v1alpha1.record_pb2 import Record, Usage
from evalsi.v1alpha1.run_pb2 import RUN_STATE_PENDING, EvalRun, Run
from evalsi.v1alpha1.run_service_pb2 import RunEvent

OWNER = "in-process"
DEFAULT_CONCURRENCY = 16
DEFAULT_TASK_WORKERS = 4  # tasks of each pool at once, as four workers of a pool would take them
RUN_RESULTS = b"\x7a"  # Run.results (field 15, length-delimited)


def new_run_id() -> str:
    return f"local-{uuid.uuid4().hex[:12]}"


def pending_run(
    document: EvalRun,
    records: Sequence[Record],
    *,
    source: str,
    version: str,
    registry: Registry,
    run_id: str = "",
    shard_size: int = DEFAULT_SHARD_SIZE,
    record_count: int | None = None,
) -> Run:
    """The run as the api stores it before a scheduler takes it (over ``record_count`` records when given: they are
    stored already, ``records`` is empty)."""
    run = Run(
        id=run_id or new_run_id(),
        project=document.metadata.project,
        name=document.metadata.name,
        spec=document.spec,
        state=RUN_STATE_PENDING,
        create_time=timestamp_of(time.time()),
    )
    run.labels.update(document.metadata.labels)
    count = len(records) if record_count is None else record_count
    run.progress.total_tasks = planned_task_count(document, count, registry=registry, shard_size=shard_size)
    run.manifest.dataset, run.manifest.dataset_version = source, version
    return run


@dataclass
class LocalStore:
    """Where a run beyond its memory budget keeps its results (a SQLite metadata store) and records (shards in a
    local object directory)."""

    results: SqlMetadataStore
    objects: LocalObjectStore
    manifest: DatasetManifest | None = None  # the run's records, stored there already (runs.intake)


async def run_locally(
    document: EvalRun,
    records: Sequence[Record] | TakenRecords,
    *,
    memory_budget: float | None = None,
    store_dir: str | Path | None = None,
    **options: Any,
) -> EvaluationResults:
    """``run_in_process`` (``options`` are its own), in memory while the run's estimated size is within
    ``memory_budget`` MiB (``runs.memory_budget``: the argument, ``$EVALSI_EMBEDDED_MEMORY_MB`` or the default),
    otherwise over a local store in a temporary directory removed when the results are closed or collected.
    ``store_dir`` asks for the local store whatever the budget, in that directory, which is kept.

    Records taken in by ``runs.intake`` were held or stored as they were read: the budget and ``store_dir`` were
    applied there, and a run over stored records uses the directory they are in."""
    manifest: DatasetManifest | None = None
    if isinstance(records, TakenRecords):
        if records.manifest is None or records.directory is None:
            return EvaluationResults(await run_in_process(document, records.records or [], **options))
        keep, directory, manifest, records = records.keep, records.directory, records.manifest, []
    else:
        budget = memory_budget_mb(memory_budget)
        if store_dir is None and not exceeds_memory_budget(document, records, budget):
            return EvaluationResults(await run_in_process(document, records, **options))
        keep = store_dir is not None
        directory = Path(store_dir) if store_dir is not None else Path(tempfile.mkdtemp(prefix="evalsi-run-"))
    objects = directory / OBJECTS_DIR
    try:
        results = await SqlMetadataStore.open_sqlite(directory / RESULTS_DB)
        try:
            run = await run_in_process(
                document, records, local_store=LocalStore(results, LocalObjectStore(objects), manifest), **options
            )
            count = sum((await results.count_results(run.project, run.id)).values())
        finally:
            await results.close()
    except BaseException:
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)
        raise
    if not keep:  # the results are read from SQLite alone; the records' shards served the run
        shutil.rmtree(objects, ignore_errors=True)
    return EvaluationResults(run, stored=StoredResults(directory, run.project, run.id, count, keep=keep))


async def run_in_process(
    document: EvalRun,
    records: Sequence[Record],
    *,
    registry: Registry,
    source: str = "",
    version: str = "",
    run_id: str = "",
    cache: bool = True,
    cache_dir: str | Path | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    shard_size: int = DEFAULT_SHARD_SIZE,
    task_workers: int = DEFAULT_TASK_WORKERS,
    retry: RetryPolicy | None = None,
    cancel: asyncio.Event | None = None,
    events: list[RunEvent] | None = None,
    progress: Callable[[int], None] | None = None,
    evaluated: list[Record] | None = None,
    judges: Mapping[str, JudgeConfig] | None = None,
    compare_with: Sequence[Record] | None = None,
    local_store: LocalStore | None = None,
) -> Run:
    """Drive ``document`` over ``records`` to its end; setting ``cancel`` cancels it as CancelRun would.

    Targets and judges are called with the spec's own endpoints and keys (no server connections). ``concurrency``
    bounds the calls and evaluations of each task, ``task_workers`` how many tasks of each pool run at once;
    ``retry`` overrides a target's waits between retries (tests). A cancel drains the run first (calls in flight
    finish, nothing new starts, finished work is kept), then stops it.
    ``events``, when given, collects the run's events (state, progress, partial and final summaries); ``progress``
    hears how many evaluations each finished task produced; ``evaluated`` collects the records as evaluated
    (generated outputs of the generation tasks that finished, trial-major then dataset order; the dataset's records
    when outputs are given). ``judges`` are judge configs by name that the spec's judges of the same names stand
    for (the spec carries their wire form, without inline credentials); ``compare_with`` is the second result set
    of comparative evaluators, paired with the records by (id, trial). With ``local_store`` the records and
    results go there (``run_locally``) and the returned run holds no results: they are in ``local_store.results``.
    """
    stored = local_store.manifest if local_store is not None else None
    run = pending_run(
        document, records, source=source, version=version, registry=registry, run_id=run_id, shard_size=shard_size,
        record_count=stored.records if stored is not None else None,
    )
    in_memory = MemoryRecords()  # every record when in memory; else only the second result set's
    run_records: RunRecords = in_memory
    store: MemoryRunStore
    fetch: Callable[[str], Awaitable[bytes]]
    if local_store is None:
        store = MemoryRunStore()
        in_memory.add_run(run.id, records, compare_with=compare_with)
        fetch = in_memory.fetch
    else:
        store = SpilledRunStore(local_store.results)
        in_memory.add_run(run.id, (), compare_with=compare_with)
        # Shards cut as the plan cuts them, so each task carries a stored shard's key as it is.
        manifest = stored or await write_dataset(
            local_store.objects, records, source=source, format="records", shard_size=shard_size
        )
        run.labels[DATASET_LABEL] = await put_manifest(local_store.objects, manifest)
        run_records, fetch = StoredRunRecords(local_store.objects), local_store.objects.get
    await store.create_run(run)
    scheduler: RunDriver | None = None
    bus: MemoryBus | None = None
    over_budget = False

    def meter(task: Task, usage: Usage) -> None:
        # Each answered target call: once the run's tokens or cost are over its budget, the run is stopped now (what
        # is running ends cancelled, nothing more starts) and the driver, woken, ends it BUDGET_EXCEEDED.
        nonlocal over_budget
        store.meter(task.run_id, task.key, (usage.input_tokens, usage.output_tokens, usage.cost_usd))
        budget = document.spec.budget
        if over_budget or not (budget.tokens or budget.usd) or bus is None or scheduler is None:
            return
        tokens_in, tokens_out, usd = store.usage_now(task.run_id)
        used = Usage(input_tokens=tokens_in, output_tokens=tokens_out, total_tokens=tokens_in + tokens_out,
                     cost_usd=usd)
        if budget_exceeded(budget, used):
            over_budget = True
            bus.flag(task.run_id, "cancelled")
            scheduler.news.wake(task.run_id)

    async def collect(event: RunEvent) -> None:
        if events is not None:
            events.append(event)

    async with GivenJudges(judges or {}, cache=cache, cache_dir=cache_dir) as judge_set:
        executor = InProcessExecutor(registry, judge_set, concurrency=concurrency, call_timeout_s=None,
                                     fetch=fetch, retry=retry, on_usage=meter, counterparts=in_memory.counterparts,
                                     run_records=in_memory if local_store is None else None)

        async def on_result(result: TaskResult) -> None:
            assert scheduler is not None
            columns = executor.columns_of(result)
            await scheduler.on_task_result(result, columns=columns)
            done = len(result.results) or (len(columns.data) if columns is not None else 0)
            if progress is not None and done:
                progress(done)

        async def on_dead(task: Task, reason: str, msg_id: str) -> None:
            assert scheduler is not None
            await scheduler.on_dead_letter(task, reason, msg_id)

        bus = MemoryBus(executor, on_result, on_dead, on_event=collect, workers=task_workers)
        # Results come straight back and wake the driver; the tick only bounds how late it sees a wall clock run out.
        # Partial summaries are folded only for someone who hears the run's events.
        news = RunNews() if events is not None else NewsWithoutPartials()
        scheduler = RunDriver(store, run_records, bus, registry, owner=OWNER, tick_s=0.25, shard_size=shard_size,
                              news=news)
        watcher = None
        if cancel is not None:
            driver, in_process = scheduler, bus

            async def cancel_when_asked() -> None:
                await cancel.wait()
                # A cancel heard before the driver started the run waits until it has: a run cancelled while
                # PENDING ends without its unrun evaluations as results, and whether it is heard that early
                # depends on the store (a local store's first read gives the loop a turn, memory's does not).
                # One turn of the loop at a time: the driver publishes no task before its next read, so the
                # cancel drains a run that started nothing, as in memory.
                while (now := await store.get_run(run.project, run.id)) and now.state == RUN_STATE_PENDING:
                    await asyncio.sleep(0)
                await in_process.drain(run.id)
                await driver.on_control_cancel(run.project, run.id)

            watcher = asyncio.create_task(cancel_when_asked())
        try:
            await scheduler.drive(run.project, run.id)
        finally:
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            await bus.aclose()
    finished = await store.get_run(run.project, run.id)
    assert finished is not None
    if local_store is None:
        # Parsed straight into the document from the stored rows, a batch at a time (one parse for many results;
        # extending the document with result messages would copy each one).
        for rows in store.take_result_rows(run.id):
            finished.MergeFromString(entries(RUN_RESULTS, rows))
    tokens_in, tokens_out, usd = store.usage_now(run.id)
    usage = finished.progress.usage
    usage.input_tokens, usage.output_tokens, usage.total_tokens = tokens_in, tokens_out, tokens_in + tokens_out
    usage.cost_usd = usd
    if evaluated is not None:
        evaluated.extend(await _evaluated_records(store, run_records, finished))
    if EVALUATED_LABEL in finished.labels:
        del finished.labels[EVALUATED_LABEL]  # a key in this process's store, not part of the run
    in_memory.forget(run.id)
    if local_store is not None:
        del finished.labels[DATASET_LABEL]  # how this process found the records, not part of the run
    return finished


@dataclass
class InProcessExecutor(Executor):
    """The worker's executor, reading a task's dataset records straight from the run's records in this process
    rather than serializing and parsing them on the way (the served path's object store round trip)."""

    run_records: MemoryRecords | None = None
    caller_roots: bool = True  # the caller's own machine: its sandboxes may use its image directories

    # Each evaluation task's result columns as the runner wrote them, until its result is heard (``columns_of``):
    # in one process they need not be copied into the result message and out again.
    _columns: dict[str, ColumnLists] = field(default_factory=dict, init=False, repr=False)

    def hand_over(self, out: TaskResult, columns: ColumnLists) -> None:
        self._columns[out.key] = columns

    def columns_of(self, result: TaskResult) -> ColumnLists | None:
        """The columns of ``result`` handed over by ``execute`` (None: it has none, or they are in the message)."""
        return self._columns.pop(result.key, None)

    async def records_of(self, task: Task) -> Sequence[Record]:
        shard = self.run_records.shard(task.records_ref) if self.run_records and task.records_ref else None
        if isinstance(shard, HeldRecords):
            return shard  # parsed only where read (datasets.held); no evaluator changes a record
        return list(shard) if shard is not None else await super().records_of(task)


class NewsWithoutPartials(RunNews):
    """A run's news without partial summaries: no one listens to its events, so none is computed. Results are still
    folded as they arrive (a task's columns a column at a time, runs.result_columns), so the final summaries come
    from that fold without reading the stored results again."""

    def partials(self, run_id: str) -> SummaryBuilder | None:
        return None


class GivenJudges(JudgeSet):
    """The judges of an in-process run: a task names a judge by name with its wire form (``JudgeSpec``), which
    cannot hold a credential given inline nor a param set to None (not sent); a judge configured by the caller
    under that name answers instead, exactly as configured."""

    def client_for(self, config: JudgeConfig) -> JudgeClient:
        given = self.get(config.name)
        return given if given is not None else super().client_for(config)


async def _evaluated_records(store: MemoryRunStore, run_records: RunRecords, run: Run) -> list[Record]:
    """The records as evaluated: each finished generation task's outputs in (trial, shard) order, without the marker
    that carried a target's failure to its evaluation; the dataset's records when outputs are given. Stamped with
    the isolation their sandboxed evaluators ran under when any did (runs.record_isolation)."""
    if EVALUATED_LABEL in run.labels:
        return [record async for chunk in evaluated_records(run_records, run) for record in chunk]
    if not generates_outputs(run):
        return await run_records.shard_records(run, 0, await run_records.record_count(run))
    generated = await store.list_tasks(run.id, states=("done",), stage=STAGE_GENERATE)
    records: list[Record] = []
    for row in sorted(generated, key=lambda r: (r.trial, r.shard)):
        records.extend(await run_records.outputs(row.output_ref))
    for record in records:
        if TARGET_FAILURE_KEY in record.metadata:
            del record.metadata[TARGET_FAILURE_KEY]
    return records
