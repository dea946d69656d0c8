"""The bus within one process: a run driver's tasks go to in-process workers, their results come straight back.

It implements ``evalsi.runs.ports.BusPort`` and plays the worker service's part around the same ``Executor``:
a task of a run flagged cancelled is answered cancelled without running, a running one is abandoned when its run
is cancelled, a task no retry can fix (``BadInputError``) is a dead letter. Every task runs once, as its last
attempt (``final_attempt``): there is no redelivery in one process, so infrastructure errors are reported, not
retried. A message id published twice is delivered once, as JetStream's deduplication does.

A cancel asked for by a person (Ctrl-C, ``evaluate(cancel=...)``) first ``drain``s the run: nothing new starts,
the tasks running finish their calls in flight and stop there, and their reports wait until the run's cancelled
flag is set (``runs.local``), so the driver folds them into a run it already sees cancelled.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from evalsi.bus.v1alpha1.bus_pb2 import STAGE_GENERATE, TASK_STATUS_CANCELLED, Task, TaskResult
from evalsi.errors import BadInputError
from evalsi.runs.execute import Executor, result_for
from evalsi.v1alpha1.run_service_pb2 import RunEvent

log = logging.getLogger("evalsi.bus.memory")

OnResult = Callable[[TaskResult], Awaitable[None]]
OnDeadLetter = Callable[[Task, str, str], Awaitable[None]]
OnEvent = Callable[[RunEvent], Awaitable[None]]
Report = Callable[[], Awaitable[None]]
WORKER = "in-process"


@dataclass
class _RunControl:
    """What the workers know of one run: its state, and the signals its running tasks watch."""

    state: Literal["running", "draining", "cancelled", "done"] = "running"
    abandon: asyncio.Event = field(default_factory=asyncio.Event)  # running tasks stop now, their work dropped
    stop_calls: asyncio.Event = field(default_factory=asyncio.Event)  # running tasks start no new call
    running: int = 0
    quiet: asyncio.Event = field(default_factory=asyncio.Event)  # set while no task of the run is running
    held: list[Report] = field(default_factory=list)  # reports of drained tasks, delivered with the cancel

    def __post_init__(self) -> None:
        self.quiet.set()


@dataclass
class MemoryBus:
    """Pools of in-process workers around one ``Executor``; ``workers`` tasks of each pool run at once."""

    executor: Executor
    on_result: OnResult
    on_dead_letter: OnDeadLetter
    on_event: OnEvent | None = None
    workers: int = 4
    _queues: dict[str, asyncio.Queue[tuple[Task, str]]] = field(default_factory=dict)
    _workers: list[asyncio.Task[None]] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)
    _runs: dict[str, _RunControl] = field(default_factory=dict)

    # --- BusPort ----------------------------------------------------------------------------------------

    async def publish_task(self, pool: str, task: Task, msg_id: str) -> None:
        if msg_id in self._seen:
            return
        self._seen.add(msg_id)
        await self._queue(pool).put((task, msg_id))

    async def publish_event(self, event: RunEvent) -> None:
        if self.on_event is not None:
            await self.on_event(event)

    async def set_run_flag(self, run_id: str, flag: str) -> None:
        """Set the run's flag; a drained run's held reports are delivered now, after the flag and before this
        returns, so the driver cancelling the run folds them before it marks the rest of the run cancelled."""
        control = self._control(run_id)
        held, control.held = control.held, []
        self.flag(run_id, flag)
        for report in held:
            await report()

    def flag(self, run_id: str, flag: str) -> None:
        """Set the run's flag now (a caller outside the event loop's turns: a budget meter hearing a call).

        ``cancelled`` abandons the run's running tasks (a budget stops at the call that exceeds it)."""
        control = self._control(run_id)
        if flag == "cancelled":
            control.state = "cancelled"
            control.abandon.set()
        else:
            control.state = "done" if flag == "done" else "running"
            control.abandon.clear()
            control.stop_calls.clear()

    async def drain(self, run_id: str) -> None:
        """Stop the run gently: tasks not started stay unstarted, running ones finish their calls in flight and
        start no more; returns once none runs. Their reports are held for ``set_run_flag(run_id, "cancelled")``."""
        control = self._control(run_id)
        if control.state != "running":
            return
        control.state = "draining"
        control.stop_calls.set()
        await control.quiet.wait()

    # --- workers ----------------------------------------------------------------------------------------

    def _control(self, run_id: str) -> _RunControl:
        control = self._runs.get(run_id)
        if control is None:
            control = self._runs[run_id] = _RunControl()
        return control

    def _queue(self, pool: str) -> asyncio.Queue[tuple[Task, str]]:
        queue = self._queues.get(pool)
        if queue is None:
            queue = self._queues[pool] = asyncio.Queue()
            self._workers.extend(asyncio.create_task(self._work(queue)) for _ in range(self.workers))
        return queue

    async def _work(self, queue: asyncio.Queue[tuple[Task, str]]) -> None:
        while True:
            task, msg_id = await queue.get()
            try:
                await self._handle(task, msg_id)
            except Exception:  # a bug in a handler must not stop the pool: the driver's failure path reports it
                log.exception("task %s: handling failed", task.key)
            finally:
                queue.task_done()

    async def _handle(self, task: Task, msg_id: str) -> None:
        control = self._control(task.run_id)
        if control.state == "draining":
            return  # never started: the cancel that follows the drain marks it cancelled
        if control.state == "cancelled":
            await self.on_result(result_for(task, TASK_STATUS_CANCELLED, WORKER))
            return
        control.running += 1
        control.quiet.clear()
        try:
            report = await self._run(task, msg_id, control)
        finally:
            control.running -= 1
            if not control.running:
                control.quiet.set()
        if control.state == "draining":
            control.held.append(report)
        else:
            await report()

    async def _run(self, task: Task, msg_id: str, control: _RunControl) -> Report:
        """Execute ``task``; returns how to report it."""
        work = asyncio.create_task(self.executor.execute(task, final_attempt=True, stop=control.stop_calls))
        watch = asyncio.create_task(control.abandon.wait())
        try:
            await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
        if not work.done():  # the run was cancelled mid-task: its partial work is dropped, as a worker drops it
            work.cancel()
            await asyncio.wait({work})  # not `await work`: that would swallow this worker's own cancellation
            return lambda: self.on_result(result_for(task, TASK_STATUS_CANCELLED, WORKER))
        try:
            result = work.result()
        except BadInputError as exc:
            reason = str(exc)
            return lambda: self.on_dead_letter(task, reason, msg_id)
        if control.state == "draining" and task.stage != STAGE_GENERATE:
            # Stopped part way: what it evaluated is reported, the task itself did not complete. (A generation
            # stopped part way completes: its outputs are kept, the records it did not call for end cancelled.)
            result.status = TASK_STATUS_CANCELLED
        return lambda: self.on_result(result)

    async def idle(self) -> None:
        """Return once every published task has been handled."""
        for queue in list(self._queues.values()):
            await queue.join()

    async def aclose(self) -> None:
        for worker in self._workers:
            worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers.clear()
