"""A run in this process on the served engine: the same driver (``runs.driver``) and the same ``Executor`` as the
scheduler and worker services, over the in-process bus and an in-memory store instead of NATS and SQL.

What it returns is the document a server would store, with its results: same plan, task keys, final-state rule,
summaries, gates and manifest.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from evalsi.bus.memory import MemoryBus
from evalsi.bus.v1alpha1.bus_pb2 import Task, TaskResult
from evalsi.evaluators import Registry
from evalsi.judges.panel import JudgeSet
from evalsi.runs.driver import RunDriver, planned_task_count
from evalsi.runs.execute import Executor
from evalsi.sdk import timestamp_of
from evalsi.stores.memory import MemoryRecords, MemoryRunStore
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import RUN_STATE_PENDING, EvalRun, Run
from evalsi.v1alpha1.run_service_pb2 import RunEvent

OWNER = "in-process"


def pending_run(document: EvalRun, records: Sequence[Record], *, source: str, version: str, registry: Registry) -> Run:
    """The run as the api stores it before a scheduler takes it."""
    run = Run(
        id=f"local-{uuid.uuid4().hex[:12]}",
        project=document.metadata.project,
        name=document.metadata.name,
        spec=document.spec,
        state=RUN_STATE_PENDING,
        create_time=timestamp_of(time.time()),
    )
    run.labels.update(document.metadata.labels)
    run.progress.total_tasks = planned_task_count(document, len(records), registry=registry)
    run.manifest.dataset, run.manifest.dataset_version = source, version
    return run


async def run_in_process(
    document: EvalRun,
    records: Sequence[Record],
    *,
    registry: Registry,
    source: str = "",
    version: str = "",
    cache: bool = True,
    cache_dir: str | Path | None = None,
    concurrency: int = 16,
    cancel: asyncio.Event | None = None,
    events: list[RunEvent] | None = None,
) -> Run:
    """Drive ``document`` over ``records`` to its end; setting ``cancel`` cancels it as CancelRun would.
    ``events``, when given, collects the run's events (state, progress, partial and final summaries)."""
    store, run_records = MemoryRunStore(), MemoryRecords()
    run = pending_run(document, records, source=source, version=version, registry=registry)
    await store.create_run(run)
    run_records.add_run(run.id, records)

    async def collect(event: RunEvent) -> None:
        if events is not None:
            events.append(event)

    async with JudgeSet({}, cache=cache, cache_dir=cache_dir) as judges:
        executor = Executor(registry, judges, concurrency=concurrency, call_timeout_s=None, fetch=run_records.fetch)
        scheduler: RunDriver | None = None

        async def on_result(result: TaskResult) -> None:
            assert scheduler is not None
            await scheduler.on_task_result(result)

        async def on_dead(task: Task, reason: str, msg_id: str) -> None:
            assert scheduler is not None
            await scheduler.on_dead_letter(task, reason, msg_id)

        bus = MemoryBus(executor, on_result, on_dead, on_event=collect)
        # Results come straight back and wake the driver; the tick only bounds how late it sees a wall clock run out.
        scheduler = RunDriver(store, run_records, bus, registry, owner=OWNER, tick_s=0.25)
        watcher = None
        if cancel is not None:

            async def cancel_when_asked() -> None:
                await cancel.wait()
                await scheduler.on_control_cancel(run.project, run.id)

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
    async for batch in store.iter_results(run.project, run.id):
        finished.results.extend(batch)
    return finished
