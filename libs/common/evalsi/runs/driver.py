"""The run driver: turn a stored run into tasks on the bus, fold task results into the store as they arrive, and
finish the run (summaries, gates, manifest, final state) — with leases so scheduler replicas share runs and adopt a
dead replica's.

Transport and storage stay outside, behind ports (``runs.ports``): NATS, SQL and the object store in the scheduler
service, in-process ones for a run in one process (``runs.local``). Results are processed by whichever replica
receives them (every write is an idempotent upsert or compare-and-set), so only driving a run needs its lease.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import timestamp_pb2

from evalsi.bus.errors import Unavailable
from evalsi.bus.v1alpha1.bus_pb2 import (
    STAGE_GENERATE,
    TASK_STATUS_CANCELLED,
    TASK_STATUS_DONE,
    Task,
    TaskResult,
)
from evalsi.errors import InfraError
from evalsi.evaluators import BoundEvaluator, Registry
from evalsi.runs.binding import resolve_evaluators
from evalsi.runs.gates import evaluate_gates
from evalsi.runs.isolation import SandboxUse, with_records
from evalsi.runs.news import RunNews
from evalsi.runs.outcome import (
    fill_outcome_counts,
    final_state,
    infra_error_results,
    stored_run_manifest,
    target_calls_of_records,
)
from evalsi.runs.plan import (
    DEFAULT_SHARD_SIZE,
    bound_of,
    budget_exceeded,
    generates_outputs,
    plan_of,
    task_key,
    wall_clock_exceeded,
)
from evalsi.runs.plan import Task as PlannedTask
from evalsi.runs.ports import BusPort, RunRecords
from evalsi.runs.record_isolation import EVALUATED_LABEL, SandboxFold, fold_each, store_evaluated
from evalsi.runs.result_columns import Columns, result_rows
from evalsi.runs.summary import SummaryBuilder
from evalsi.runs.tasks import ATTEMPT_LABEL, STAGES, index_of, message_id, task_message
from evalsi.runs.unrun import record_unrun
from evalsi.runs.writes import ResultWrites
from evalsi.stores import TaskEnd, TaskRow
from evalsi.v1alpha1.record_pb2 import Record, Usage
from evalsi.v1alpha1.run_pb2 import (
    RUN_STATE_BUDGET_EXCEEDED,
    RUN_STATE_CANCELLED,
    RUN_STATE_FAILED,
    RUN_STATE_PENDING,
    RUN_STATE_RUNNING,
    RUN_STATE_SUCCEEDED,
    Run,
)
from evalsi.v1alpha1.run_service_pb2 import (
    RUN_EVENT_TYPE_PROGRESS,
    RUN_EVENT_TYPE_STATE,
    RUN_EVENT_TYPE_SUMMARY,
    RunEvent,
    RunEventType,
)

log = logging.getLogger("evalsi.scheduler")

TERMINAL = (RUN_STATE_SUCCEEDED, RUN_STATE_FAILED, RUN_STATE_CANCELLED, RUN_STATE_BUDGET_EXCEEDED)
PARTIAL_SUMMARY_EVERY_S = 2.0
# Failures that say nothing about a run: a store or the bus did not answer in time. Work waits for them.
_OUTAGES = (InfraError, TimeoutError, OSError)
PROBE_EVERY_S = 1.0
RESUME_WAIT_S = 60.0  # how long a resume waits for the driver of the cancelled attempt to finish
REDRIVE_MAX_PAUSE_S = 30.0


def _now() -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.GetCurrentTime()
    return ts


@dataclass
class RunDriver:
    """Drives the runs it leases and folds whatever results it receives: one scheduler replica over NATS and SQL
    (its records: datasets.run_records.StoredRunRecords), or a run in one process over memory (runs.local)."""

    store: Any  # evalsi.stores.RunStore
    records: RunRecords
    bus: BusPort
    registry: Registry
    owner: str
    lease_ttl_s: float = 15.0
    # The longest a driver waits between looks at its run: results folded here wake it at once; this bounds how
    # late it sees results folded by another replica, a cancel, a budget's clock, and it renews the lease.
    tick_s: float = 0.5
    # The shortest time between two looks at a run while results keep waking its driver. Each look is some ten
    # store and bus round trips (lease, run, task counts, progress, event); a woken look per result message cost
    # the scheduler and Postgres more than the progress it shows is worth. 0: a look per wake (in-process runs).
    pass_every_s: float = 0.0
    shard_size: int = DEFAULT_SHARD_SIZE  # records per shard; an in-process run may choose its own
    news: RunNews = field(default_factory=RunNews)
    _drivers: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    _runs: dict[str, Run] = field(default_factory=dict)
    # Runs a cancel is being applied to here: between the flag (which delivers a drained run's held reports, and
    # so may complete its last task) and the cancelled state in the store, the driver must not end it SUCCEEDED.
    _cancelling: set[str] = field(default_factory=set)
    _writes: ResultWrites = field(init=False)

    def __post_init__(self) -> None:
        self._writes = ResultWrites(self.store)

    # --- control --------------------------------------------------------------------------------------

    async def on_control_created(self, project: str, run_id: str) -> None:
        await self.adopt(project, run_id)

    async def on_control_resume(self, project: str, run_id: str) -> None:
        # A resume right after a cancel can arrive while this replica's driver is still finishing the cancelled
        # run; let it finish first, so its final write cannot land on top of the resumed run.
        driver = self._drivers.get(run_id)
        if driver is not None and not driver.done():
            await asyncio.wait([driver], timeout=RESUME_WAIT_S)
        run = await self.store.get_run(project, run_id)
        resumable = (RUN_STATE_CANCELLED, RUN_STATE_FAILED, RUN_STATE_BUDGET_EXCEEDED)
        if run is None or run.state not in resumable:
            return
        attempt = int(run.labels.get(ATTEMPT_LABEL, "0")) + 1
        run.labels[ATTEMPT_LABEL] = str(attempt)
        state = run.state
        run.state, run.message = RUN_STATE_PENDING, f"resumed (attempt {attempt})"
        run.ClearField("end_time")
        if not await self.store.update_run(run, only_from=(state,)):
            return  # resumed (or changed) by someone else meanwhile
        for row in await self.store.list_tasks(run_id, states=("failed", "cancelled")):
            await self.store.set_task_state(run_id, row.key, "pending", only_from=("failed", "cancelled"))
        await self.bus.set_run_flag(run_id, "running")
        await self.adopt(project, run_id)

    async def on_control_cancel(self, project: str, run_id: str) -> None:
        run = await self.store.get_run(project, run_id)
        if run is None or run.state in TERMINAL:
            return
        self._cancelling.add(run_id)
        try:
            await self.bus.set_run_flag(run_id, "cancelled")
            for row in await self.store.list_tasks(run_id, states=("pending",)):
                await self.store.set_task_state(run_id, row.key, "cancelled")
            state = run.state
            run.state, run.message = RUN_STATE_CANCELLED, "cancelled on request"
            # The driver notices and finishes the run as cancelled; a run that finished meanwhile stays finished.
            await self.store.update_run(run, only_from=(state,))
        finally:
            self._cancelling.discard(run_id)
        self.news.wake(run_id)

    # --- leases and adoption --------------------------------------------------------------------------

    async def adopt(self, project: str, run_id: str) -> bool:
        """Drive the run if its lease is free (or expired, or ours)."""
        if run_id in self._drivers and not self._drivers[run_id].done():
            return True
        if not await self.store.acquire_lease(f"run:{run_id}", self.owner, self.lease_ttl_s):
            return False
        log.info("driving run (lease held by %s)", self.owner, extra={"run_id": run_id, "project": project})
        self._drivers[run_id] = asyncio.create_task(self._drive_safely(project, run_id))
        return True

    async def adopt_orphans(self) -> None:
        """Runs left pending or running by a scheduler that stopped renewing its lease."""
        for project, run_id in await self.store.runs_in_states((RUN_STATE_PENDING, RUN_STATE_RUNNING)):
            await self.adopt(project, run_id)

    async def stop(self) -> None:
        for task in self._drivers.values():
            task.cancel()
        await asyncio.gather(*self._drivers.values(), return_exceptions=True)
        for run_id in list(self._drivers):
            await self.store.release_lease(f"run:{run_id}", self.owner)
        self._drivers.clear()

    # --- driving one run ------------------------------------------------------------------------------

    async def available(self) -> bool:
        """Whether the metadata store answers now."""
        return bool(await self.store.ping())

    async def until_available(self) -> None:
        """Return once the metadata store answers again."""
        while not await self.available():
            await asyncio.sleep(PROBE_EVERY_S)

    async def _drive_safely(self, project: str, run_id: str) -> None:
        pause = 1.0
        try:
            while True:
                try:
                    await self.drive(project, run_id)
                    return
                except asyncio.CancelledError:
                    raise
                except _OUTAGES as exc:
                    # An outage is not a fact about the run: its state stays, and driving starts over (every
                    # step is idempotent) once the store answers; growing pauses keep a lasting fault quiet.
                    log.warning("run paused (%s: %s); driving again when the store answers", type(exc).__name__, exc,
                                extra={"run_id": run_id})  # fmt: skip
                    await self.until_available()
                    await asyncio.sleep(pause)
                    pause = min(REDRIVE_MAX_PAUSE_S, pause * 2)
                    if not await self.store.acquire_lease(f"run:{run_id}", self.owner, self.lease_ttl_s):
                        return  # another replica drives it now
                except Exception as exc:  # a bug of ours: fail the run loudly rather than hang it
                    log.exception("driving run failed", extra={"run_id": run_id})
                    await self._fail(project, run_id, exc)
                    return
        finally:
            self.news.forget(run_id)
            try:
                await self.store.release_lease(f"run:{run_id}", self.owner)
            except _OUTAGES as exc:  # it expires by itself
                log.warning("lease not released (%s)", exc, extra={"run_id": run_id})

    async def _fail(self, project: str, run_id: str, exc: Exception) -> None:
        try:
            run = await self.store.get_run(project, run_id)
            if run is not None and run.state not in TERMINAL:
                state = run.state
                run.state, run.message = RUN_STATE_FAILED, f"scheduler error: {type(exc).__name__}: {exc}"
                run.end_time.CopyFrom(_now())
                if await self.store.update_run(run, only_from=(state,)):
                    await self._event(run, RUN_EVENT_TYPE_STATE)
        except _OUTAGES as outage:
            log.error("could not record the run's failure (%s); it stays as it is", outage, extra={"run_id": run_id})

    async def drive(self, project: str, run_id: str) -> None:
        run = await self.store.get_run(project, run_id)
        if run is None or run.state in TERMINAL:
            return
        bound = bound_of(run, self.registry)
        attempt = run.labels.get(ATTEMPT_LABEL, "0")
        planned = list(plan_of(run, await self.records.record_count(run), bound, self.shard_size).tasks())

        await self.store.add_tasks(
            project,
            [
                TaskRow(
                    run_id=run_id,
                    key=p.key,
                    stage=STAGES[p.stage],
                    shard=index_of(p.shard),
                    trial=index_of(p.trial),
                    state="pending",
                )
                for p in planned
            ],
        )
        if run.state == RUN_STATE_PENDING:
            run.state = RUN_STATE_RUNNING
            run.start_time.CopyFrom(_now())
            run.progress.total_tasks = len(planned)
            # The flag first: if it fails, the stored state still says what is left to do when driving again.
            await self.bus.set_run_flag(run_id, "running")
            if not await self.store.update_run(run, only_from=(RUN_STATE_PENDING,)):
                return  # cancelled before it started: driving again sees the stored state
            await self._event(run, RUN_EVENT_TYPE_STATE)
        # Summaries fold results as they arrive (on_task_result) from what is stored (an adopted or resumed run's
        # results): the partial summaries and, when the fold is whole (runs.news), the final ones.
        partials = SummaryBuilder(bound)
        self.news.follow(run_id, partials)
        async for batch in self.store.iter_results(run.project, run.id):
            partials.add(batch)
        self.news.read_done(run_id)
        await self._publish_ready(run, bound, planned)
        reduce_published = False
        last_progress = None
        last_partial, partial_cpu_due = time.monotonic(), 0.0
        last_pass = time.monotonic()
        look_first = True  # a run of reducers alone has published nothing yet: no news would come for a tick
        while True:
            if not look_first:
                await self.news.wait(run_id, self.tick_s)
            look_first = False
            if self.pass_every_s:  # what arrives meanwhile is seen by this look
                await asyncio.sleep(max(0.0, last_pass + self.pass_every_s - time.monotonic()))
            last_pass = time.monotonic()
            try:
                if not await self.store.acquire_lease(f"run:{run_id}", self.owner, self.lease_ttl_s):
                    log.warning("lost the run's lease; another scheduler drives it now", extra={"run_id": run_id})
                    return
                run = await self.store.get_run(project, run_id)
                if run is None:
                    return
                if run.labels.get(ATTEMPT_LABEL, "0") != attempt:
                    # Resumed meanwhile (by another replica's control handler): a fresh driver plans the new
                    # attempt and publishes its reset tasks; this one would wait for them forever.
                    log.info("attempt %s superseded; handing the run to a fresh driver", attempt,
                             extra={"run_id": run_id})
                    return
                counts = await self.store.task_counts(run_id)
                progress = (counts.get("done", 0), counts.get("failed", 0), counts.get("cancelled", 0))
                if progress != last_progress:
                    last_progress = progress
                    # Cancelled tasks did not complete: a cancelled run shows how far it got.
                    run.progress.completed = progress[0] + progress[1]
                    run.progress.total_tasks = len(planned)
                    if not await self.store.update_run(run, only_from=(run.state,)):
                        last_progress = None  # the state changed since it was read: read it again next tick
                        continue
                    await self._event(run, RUN_EVENT_TYPE_PROGRESS)
                if run.state == RUN_STATE_CANCELLED:
                    await self._finish(run, bound, cancelled=True)
                    return
                over = await self._over_budget(run)
                if over:
                    await self.bus.set_run_flag(run_id, "cancelled")
                    for row in await self.store.list_tasks(run_id, states=("pending",)):
                        await self.store.set_task_state(run_id, row.key, "cancelled")
                    await self._finish(run, bound, budget=over)
                    return
                if (time.monotonic() - last_partial > PARTIAL_SUMMARY_EVERY_S and run.progress.completed
                        and time.process_time() >= partial_cpu_due):
                    started = time.process_time()
                    await self._partial_summaries(run, bound)
                    # Spaced by this process's CPU, not the clock, so that they cost at most a twentieth of it
                    # however little of a core a loaded machine leaves it.
                    last_partial, partial_cpu_due = time.monotonic(), started + 20 * (time.process_time() - started)
                open_tasks = counts.get("pending", 0)
                reducers = [p for p in planned if p.stage == "reduce"]
                if reducers and not reduce_published and open_tasks == len(reducers):
                    await self._publish_reducers(run, bound, reducers)
                    reduce_published = True
                    continue
                if open_tasks == 0 and run_id not in self._cancelling:  # a cancel being applied ends it cancelled
                    await self._finish(run, bound, failed_tasks=counts.get("failed", 0))
                    return
            except _OUTAGES as exc:
                # A store or the bus did not answer: no fact about the run, so its state stays as it is.
                log.warning("run paused (%s: %s); resumes when the store answers", type(exc).__name__, exc,
                            extra={"run_id": run_id})
                await self.until_available()

    async def _over_budget(self, run: Run) -> str:
        """Why the run is over its token, cost or wall-clock budget (counted from its start), or "" while within
        them."""

        budget = run.spec.budget
        if run.HasField("start_time"):
            elapsed = time.time() - run.start_time.ToNanoseconds() / 1e9
            over = wall_clock_exceeded(budget, elapsed)
            if over:
                return over
        if not (budget.tokens or budget.usd):
            return ""
        tokens_in, tokens_out, usd = await self.store.task_usage(run.id)
        run.progress.usage.input_tokens, run.progress.usage.output_tokens = tokens_in, tokens_out
        run.progress.usage.total_tokens, run.progress.usage.cost_usd = tokens_in + tokens_out, usd
        usage = Usage(
            input_tokens=tokens_in, output_tokens=tokens_out, total_tokens=tokens_in + tokens_out, cost_usd=usd
        )
        return budget_exceeded(budget, usage) or ""

    async def _partial_summaries(self, run: Run, bound: Sequence[BoundEvaluator]) -> None:
        """Summaries of what is scored so far, for WatchRun, from the results folded as they came (no re-read);
        with several replicas, those this one folded (the final summaries read every stored result)."""
        builder = self.news.partials(run.id)
        if builder is None:
            return
        event = RunEvent(
            run_id=run.id,
            type=RUN_EVENT_TYPE_SUMMARY,
            state=run.state,
            progress=run.progress,
            message="partial",
            time=_now(),
        )
        event.summaries.extend(builder.summaries(options=run.spec.summary))
        await self._announce(event)

    async def _publish_ready(self, run: Run, bound: Sequence[BoundEvaluator], planned: Sequence[PlannedTask]) -> None:
        """Publish every pending task that can start now: generation, or evaluation of ready outputs.

        Every task of a shard carries only the key of the dataset's stored shard (the api stored it once), so
        neither the bus nor the scheduler carries or rewrites records.
        """
        pending = {row.key for row in await self.store.list_tasks(run.id, states=("pending",))}
        generated = await self.store.list_tasks(run.id, states=("done",), stage=STAGE_GENERATE)
        outputs = {row.key: row.output_ref for row in generated}
        for p in planned:
            if p.key not in pending or p.stage == "reduce":
                continue
            if p.depends_on:
                if p.depends_on[0] not in outputs:
                    continue  # published when its generation finishes
                ref = outputs[p.depends_on[0]]
            else:
                ref = await self.records.shard_ref(run, p.start, p.stop)
            await self.bus.publish_task(p.pool, task_message(run, bound, p, ref), message_id(run, p))

    async def _publish_reducers(
        self, run: Run, bound: Sequence[BoundEvaluator], reducers: Sequence[PlannedTask]
    ) -> None:
        # The dataset itself by reference, as a shard is (in process: read as held, no serialized copy made).
        ref = (await self.records.shard_ref(run, 0, await self.records.record_count(run)) if not generates_outputs(run)
               else await self.records.put_outputs(run, await self._final_records(run)))
        for p in reducers:
            await self.bus.publish_task(p.pool, task_message(run, bound, p, ref), message_id(run, p))

    async def _final_records(self, run: Run) -> list[Record]:
        """The records as evaluated: generated outputs for a generating target, the dataset otherwise."""
        if not generates_outputs(run):
            return await self.records.shard_records(run, 0, await self.records.record_count(run))
        records: list[Record] = []
        for row in sorted(
            await self.store.list_tasks(run.id, states=("done",), stage=STAGE_GENERATE),
            key=lambda r: (r.trial, r.shard),
        ):
            records.extend(await self.records.outputs(row.output_ref))
        return records

    async def _finish(
        self, run: Run, bound: Sequence[BoundEvaluator], *, cancelled: bool = False, budget: str = "",
        failed_tasks: int = 0,
    ) -> None:
        """Unrun work as results (a stopped run), summaries (streamed), gates, the manifest, the final state
        (runs.outcome's rule); then the final event."""
        if cancelled or budget:
            plan = plan_of(run, await self.records.record_count(run), bound, self.shard_size)
            await record_unrun(self.store, self.records, run, bound, plan)
        counts = await self.store.count_results(run.project, run.id)
        folded = self.news.whole_fold(run.id, counts)
        builder = SummaryBuilder(bound) if folded is None else folded
        # Code evaluators' rungs, refusals and each record's weakest rung: one read of the results serves every fold.
        sandbox = SandboxFold() if any(b.evaluator.pool == "sandbox" for b in bound) else None
        folds = ([builder.add] if folded is None else []) + ([sandbox.add] if sandbox is not None else [])
        await fold_each(self.store.iter_results(run.project, run.id), folds)
        records = await self._final_records(run) if run.spec.summary.cluster_by else ()
        run.ClearField("summaries")
        run.summaries.extend(builder.summaries(records=records, options=run.spec.summary))
        self.news.drop_partials(run.id)
        if run.spec.gates:
            run.ClearField("gates")
            run.gates.extend(evaluate_gates(list(run.spec.gates), run.summaries))
        fill_outcome_counts(run.progress, counts)
        generates = generates_outputs(run)
        # Read only when the rule can get to it: a cancelled or over-budget run ends so whatever its target did.
        calls, generated = None, records
        if generates and not (cancelled or budget):
            generated = records or await self._final_records(run)
            calls = target_calls_of_records(generated)
        use = sandbox.use.result() if sandbox is not None else SandboxUse()
        state, message = final_state(budget_exceeded=budget, cancelled=cancelled, generates=generates,
                                     target_calls=calls, cancelled_evaluations=run.progress.cancelled,
                                     failed_tasks=failed_tasks, sandbox_refusal=use.refusal)
        run.manifest.CopyFrom(stored_run_manifest(run, bound))
        run.manifest.isolation.extend(with_records(use.reports, generated))  # and where generated outputs came from
        run.labels.pop(EVALUATED_LABEL, None)  # the driver's alone: a label the spec gave names nothing stored
        if sandbox is not None and use.reports:  # each scored record carries its weakest rung (runs.record_isolation)
            run.labels[EVALUATED_LABEL] = await store_evaluated(self.store, self.records, run, sandbox.found)
        read_state = run.state
        run.state, run.message = state, message
        run.end_time.CopyFrom(_now())
        # The flag before the state: a run stored as finished is never driven again, so nothing would retry it.
        await self.bus.set_run_flag(run.id, "done" if state == RUN_STATE_SUCCEEDED else "cancelled")
        if not await self.store.update_run(run, only_from=(read_state,)):
            log.info("the run's state changed while it was finishing; the newer state stands", extra={"run_id": run.id})
            current = await self.store.get_run(run.project, run.id)
            if current is not None and current.state in (RUN_STATE_PENDING, RUN_STATE_RUNNING):
                await self.bus.set_run_flag(run.id, "running")  # resumed meanwhile: undo the flag set above
            return
        await self._event(run, RUN_EVENT_TYPE_SUMMARY)

    async def _event(self, run: Run, kind: RunEventType) -> None:
        event = RunEvent(
            run_id=run.id, type=kind, state=run.state, progress=run.progress, message=run.message, time=_now()
        )
        event.summaries.extend(run.summaries)
        event.gates.extend(run.gates)
        await self._announce(event)

    async def _announce(self, event: RunEvent) -> None:
        """Publish a run event. Events tell watchers what the store already holds: one the bus could not take
        (after the publisher's retries) is logged and dropped, never a reason to change the run."""
        try:
            await self.bus.publish_event(event)
        except _OUTAGES as exc:
            log.warning("run event not published (%s)", exc, extra={"run_id": event.run_id})

    # --- results (any replica) ------------------------------------------------------------------------

    async def held_while_down(self, work: Awaitable[None]) -> None:
        """Run ``work``; when it fails while the store does not answer, raise ``Unavailable`` so the consumer
        holds the message until the store is back, rather than spend a delivery on an outage."""
        try:
            await work
        except _OUTAGES as exc:
            if not await self.available():
                raise Unavailable(f"the metadata store does not answer ({type(exc).__name__}: {exc})") from exc
            raise

    async def on_task_result(self, result: TaskResult, *, columns: Columns | None = None) -> None:
        """Fold one task's outcome (and ``columns``, its results kept out of the message) into the store; idempotent."""
        run = await self._run(result.project, result.run_id)
        if run is None:
            log.warning("result for an unknown run dropped", extra={"run_id": result.run_id, "task_key": result.key})
            return
        if result.stage == STAGE_GENERATE and result.status == TASK_STATUS_DONE:
            ref = await self.records.put_outputs(run, result.records)
            # Evaluation tasks go out before the generation is marked done, so a crash in between re-sends them
            # (deduplicated by key) instead of losing them.
            await self._publish_evaluations_of(run, result, ref)
            # Work that finished after a cancel still counts: a resume then skips it.
            await self.store.set_task_state(
                run.id, result.key, "done", output_ref=ref, only_from=("pending", "cancelled"), usage=_usage(result)
            )
            self.news.wake(run.id)
            return
        # A worker's results come as columns (runs.result_columns), stored and folded without reading each one.
        # Stored, and the task ended, with other tasks' that arrive meanwhile.
        columns = result.columns if columns is None and result.HasField("columns") else columns
        state = {TASK_STATUS_DONE: "done", TASK_STATUS_CANCELLED: "cancelled"}.get(result.status, "failed")
        end = TaskEnd(result.key, state, result.error, _usage(result))
        rows = result_rows(columns) if columns is not None else ()
        # Only the delivery that ends the task folds its results into the partial summaries: a redelivered result
        # is counted once.
        if await self._writes.end_task(run.project, run.id, end, results=result.results, rows=rows):
            if columns is not None:
                self.news.fold_columns(run.id, columns)
            else:
                self.news.fold(run.id, result.results)
        elif result.results or (columns is not None and columns.data):
            self.news.written_unfolded(run.id)  # a later copy may have replaced what was folded
        self.news.wake(run.id)

    async def _publish_evaluations_of(self, run: Run, result: TaskResult, ref: str) -> None:
        bound = bound_of(run, self.registry)
        for ev in plan_of(run, 0, bound).shard_evaluators:
            key = task_key(run.id, result.shard, "evaluate", result.trial, ev.key_name)
            planned = PlannedTask(key, "evaluate", ev.pool, result.shard, result.trial, evaluator=ev.alias, ref=ev.ref,
                                  depends_on=(result.key,))
            await self.bus.publish_task(planned.pool, task_message(run, bound, planned, ref), message_id(run, planned))

    async def on_dead_letter(self, task: Task, reason: str, msg_id: str = "") -> None:
        """A task no worker could finish: each of its evaluations is an infrastructure error, never a score.

        ``msg_id`` (``<key>#<attempt>``, the task's message id) tells a dead letter of an earlier attempt of a
        resumed run, and a task no longer pending was finished by another delivery: neither is touched.
        """
        run = await self.store.get_run(task.project, task.run_id)  # fresh: a resume changes its attempt
        if run is None:
            log.warning("dead task of an unknown run dropped", extra={"run_id": task.run_id, "task_key": task.key})
            return
        attempt = msg_id.rpartition("#")[2] if "#" in msg_id else None
        if attempt is not None and attempt != run.labels.get(ATTEMPT_LABEL, "0"):
            log.info("dead task of attempt %s ignored: the run is on another attempt", attempt,
                     extra={"run_id": run.id, "task_key": task.key})
            return
        if task.key not in {row.key for row in await self.store.list_tasks(task.run_id, states=("pending",))}:
            log.info("dead task ignored: it is no longer pending", extra={"run_id": task.run_id, "task_key": task.key})
            return
        bound = resolve_evaluators(list(task.evaluators), self.registry) if task.evaluators else []
        records = list(task.records)
        if not records and task.records_ref:
            records = await self.records.outputs(task.records_ref)
        results = infra_error_results(records, bound, f"task failed: {reason}")
        if results:
            await self.store.upsert_results(task.project, task.run_id, results)
        if await self.store.set_task_state(task.run_id, task.key, "failed", error=reason, only_from=("pending",)):
            self.news.fold(task.run_id, results)
        elif results:
            self.news.written_unfolded(task.run_id)
        self.news.wake(task.run_id)

    async def _run(self, project: str, run_id: str) -> Run | None:
        run = self._runs.get(run_id)
        if run is None:
            run = await self.store.get_run(project, run_id)
            if run is not None:
                self._runs[run_id] = run  # only its spec is read here, and the spec never changes
        return run


def _usage(result: TaskResult) -> tuple[int, int, float]:
    return result.usage.input_tokens, result.usage.output_tokens, result.usage.cost_usd

