"""Which runs a worker's tasks belong to have been cancelled: one poll of a run's flag per second while any of its
tasks is in flight here, however many that is.

A watcher per task (2 + one read a second of the run flag) cost a KV read per task per second, and its poll loop
ended only by being cancelled; on Python 3.11 ``asyncio.wait_for`` (inside nats-py's request) swallows a
cancellation that arrives as its reply does, so some watchers outlived their tasks and polled forever: after 1,500
tasks a worker sent ~500 reads a second, and the workers' and nats-server's CPU per task grew with the run
(docs/benchmarks.md, "What grew at ten million"). Here a run's poller ends by itself when no task of the run is in
flight, and a task only waits on an event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

log = logging.getLogger("evalsi.worker")

ReadFlag = Callable[[str], Awaitable[str]]  # run id -> "running" | "cancelled" | "done" | ""
CANCELLED = "cancelled"


@dataclass
class _Run:
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: int = 0  # tasks of the run in flight here
    read_at: float = float("-inf")  # monotonic time of the last read of the flag
    poller: asyncio.Task[None] | None = None
    reading: asyncio.Task[None] | None = None  # a read on entry that tasks entering meanwhile share


@dataclass
class CancelWatch:
    """Run flags as read by one worker: ``async with watch.watching(run_id) as cancelled`` around a task."""

    read_flag: ReadFlag
    every_s: float = 1.0
    _runs: dict[str, _Run] = field(default_factory=dict)
    _closed: bool = False

    @contextlib.asynccontextmanager
    async def watching(self, run_id: str) -> AsyncIterator[asyncio.Event]:
        """The run's cancel event, set once its flag says cancelled; read now unless a poll of it is under a
        period old, then polled while any task of the run is in flight."""
        run = self._runs.setdefault(run_id, _Run())
        run.tasks += 1
        try:
            if not run.cancelled.is_set() and time.monotonic() - run.read_at > self.every_s:
                if run.reading is None or run.reading.done():
                    run.reading = asyncio.create_task(self._read(run_id, run))
                await asyncio.shield(run.reading)
            if not run.cancelled.is_set() and (run.poller is None or run.poller.done()):
                run.poller = asyncio.create_task(self._poll(run_id, run), name=f"cancel-watch {run_id}")
            yield run.cancelled
        finally:
            run.tasks -= 1
            if run.tasks == 0 and (run.poller is None or run.poller.done()):
                self._runs.pop(run_id, None)

    async def _read(self, run_id: str, run: _Run) -> None:
        flag = await self.read_flag(run_id)
        run.read_at = time.monotonic()
        if flag == CANCELLED:
            run.cancelled.set()

    async def _poll(self, run_id: str, run: _Run) -> None:
        # Ends on its own once no task of the run is in flight: it must not depend on being cancelled (see above).
        while not self._closed and run.tasks > 0 and not run.cancelled.is_set():
            await asyncio.sleep(max(0.0, run.read_at + self.every_s - time.monotonic()))
            if self._closed or run.tasks == 0:
                break
            try:
                await self._read(run_id, run)
            except Exception as exc:  # the bus is restarting: the next poll tries again
                log.debug("run flag of %s not read: %s", run_id, exc)
                run.read_at = time.monotonic()
        if run.tasks == 0 and self._runs.get(run_id) is run:
            self._runs.pop(run_id, None)

    @property
    def pollers(self) -> int:
        """Runs polled now (for tests: it falls to zero when no task is in flight)."""
        return sum(1 for run in self._runs.values() if run.poller is not None and not run.poller.done())

    async def close(self) -> None:
        self._closed = True
        pollers = [run.poller for run in self._runs.values() if run.poller is not None]
        for poller in pollers:
            poller.cancel()
        await asyncio.gather(*pollers, return_exceptions=True)
        self._runs.clear()
