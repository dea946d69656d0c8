"""The bus within one process: a run driver's tasks go to in-process workers, their results come straight back.

It implements ``evalsi.runs.ports.BusPort`` and plays the worker service's part around the same ``Executor``:
a task of a run flagged cancelled is answered cancelled without running, a running one is abandoned when its run
is cancelled, a task no retry can fix (``BadInputError``) is a dead letter. Every task runs once, as its last
attempt (``final_attempt``): there is no redelivery in one process, so infrastructure errors are reported, not
retried. A message id published twice is delivered once, as JetStream's deduplication does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from evalsi.bus.v1alpha1.bus_pb2 import TASK_STATUS_CANCELLED, Task, TaskResult
from evalsi.errors import BadInputError
from evalsi.runs.execute import Executor, result_for
from evalsi.v1alpha1.run_service_pb2 import RunEvent

log = logging.getLogger("evalsi.bus.memory")

OnResult = Callable[[TaskResult], Awaitable[None]]
OnDeadLetter = Callable[[Task, str, str], Awaitable[None]]
OnEvent = Callable[[RunEvent], Awaitable[None]]
WORKER = "in-process"


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
    _flags: dict[str, str] = field(default_factory=dict)
    _cancelled: dict[str, asyncio.Event] = field(default_factory=dict)

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
        self.flag(run_id, flag)

    def flag(self, run_id: str, flag: str) -> None:
        """Set the run's flag now (a caller outside the event loop's turns: a budget meter hearing a call)."""
        self._flags[run_id] = flag
        stop = self._cancelled.setdefault(run_id, asyncio.Event())
        if flag == "cancelled":
            stop.set()
        else:
            stop.clear()

    # --- workers ----------------------------------------------------------------------------------------

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
        stop = self._cancelled.setdefault(task.run_id, asyncio.Event())
        if stop.is_set():
            await self.on_result(result_for(task, TASK_STATUS_CANCELLED, WORKER))
            return
        work = asyncio.create_task(self.executor.execute(task, final_attempt=True))
        watch = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
        if not work.done():  # the run was cancelled mid-task: its partial work is dropped, as a worker drops it
            work.cancel()
            await asyncio.wait({work})  # not `await work`: that would swallow this worker's own cancellation
            await self.on_result(result_for(task, TASK_STATUS_CANCELLED, WORKER))
            return
        try:
            result = work.result()
        except BadInputError as exc:
            await self.on_dead_letter(task, str(exc), msg_id)
            return
        await self.on_result(result)

    async def idle(self) -> None:
        """Return once every published task has been handled."""
        for queue in list(self._queues.values()):
            await queue.join()

    async def aclose(self) -> None:
        for worker in self._workers:
            worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers.clear()
