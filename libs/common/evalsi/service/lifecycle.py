"""One lifecycle for every service: named parts started in order, stopped in reverse, readiness in between.

A service's ``assemble(life)`` starts its parts one after the other, each a start/stop pair (``life.enter``),
an object with ``start()`` and ``stop()`` (``life.enter_part``, the generic interface a FastStream broker or any
other component plugs into), an async context manager (``life.enter_context``) or a background task
(``life.spawn``). Whatever ``assemble`` started is stopped, in reverse, however the run ends:

- a start that fails stops what started before it (no NATS or database connection left open) and re-raises;
- SIGTERM or SIGINT (or ``request_stop``) drains: readiness drops first, then the parts stop in reverse order,
  so the consumers that started last stop taking work before the connections they use close;
- a spawned task that fails while running is fatal: the service stops as on SIGTERM, then the error is
  re-raised, so the process exits non-zero rather than running on half-broken;
- with ``stop_deadline_s`` (a service process, never a test's in-process run), a stop that has not ended the
  process that many seconds after it began (a part's stop, or a thread the interpreter waits for at exit, that
  hangs) prints every thread's stack and exits 1: a stuck shutdown is diagnosed, never waited out.

``ready()`` answers /readyz: not ready while starting or stopping, then ready when every part that reports its
own readiness (a bus connection that may drop) says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

log = logging.getLogger("evalsi.service")
T = TypeVar("T")
ReadyCheck = Callable[[], tuple[bool, str]]


class Part(Protocol):
    """What a component gives the lifecycle: an async start and stop (a FastStream broker is one)."""

    async def start(self) -> Any: ...

    async def stop(self) -> Any: ...


@dataclass
class _Started:
    name: str
    stop: Callable[[], Awaitable[Any]]
    ready: ReadyCheck | None


class Lifecycle:
    """The parts of one service process, in the order they started."""

    def __init__(self, service: str, *, stop_deadline_s: float | None = None) -> None:
        self.service = service
        self._stop_deadline_s = stop_deadline_s
        self.stopping = asyncio.Event()  # set by a signal, request_stop or a fatal error
        self._parts: list[_Started] = []
        self._phase = "starting"
        self._starting = ""
        self._fatal: BaseException | None = None

    # --- starting parts (called by a service's assemble) ---

    async def enter(self, name: str, start: Awaitable[T], stop: Callable[[T], Awaitable[Any]] | None = None, *,
                    ready: ReadyCheck | None = None) -> T:
        """Await ``start``; from then on ``stop(result)`` runs at shutdown. Returns the result."""
        self._starting = name
        value = await start
        self._parts.append(_Started(name, (lambda: stop(value)) if stop is not None else _nothing, ready))
        return value

    def on_stop(self, name: str, stop: Callable[[], Awaitable[Any]], *, ready: ReadyCheck | None = None) -> None:
        """A part that needed no start (built in place) but must be stopped at its turn."""
        self._parts.append(_Started(name, stop, ready))

    async def enter_part(self, name: str, part: Part, *, ready: ReadyCheck | None = None) -> None:
        """A component with ``start()`` and ``stop()``."""
        await self.enter(name, part.start(), lambda _: part.stop(), ready=ready)

    async def enter_context(self, name: str, manager: AbstractAsyncContextManager[T], *,
                            ready: ReadyCheck | None = None) -> T:
        """An async context manager, entered now and exited at shutdown."""
        return await self.enter(name, manager.__aenter__(), lambda _: manager.__aexit__(None, None, None),
                                ready=ready)

    async def spawn(self, name: str, work: Coroutine[Any, Any, Any], *,
                    stop: Callable[[asyncio.Task[Any]], Awaitable[Any]] | None = None) -> asyncio.Task[Any]:
        """Run ``work`` in the background. It is cancelled at shutdown (or, with ``stop``, handed to it: a loop
        that ends by itself once ``stopping`` is set is awaited instead). If it fails while the service runs, the
        failure is fatal: the service stops and ``run`` re-raises it."""
        task = asyncio.create_task(work, name=f"{self.service}:{name}")
        task.add_done_callback(lambda done: self._on_task_done(name, done))
        await self.enter(name, _noop(), lambda _: (stop or _cancel)(task))
        return task

    def fail(self, error: BaseException) -> None:
        """A running part cannot go on: stop the service and re-raise ``error`` once stopped."""
        if self._fatal is None:
            self._fatal = error
        self.stopping.set()

    def request_stop(self) -> None:
        self.stopping.set()

    # --- readiness ---

    def ready(self) -> tuple[bool, str]:
        if self._phase == "starting":
            return False, f"starting ({self._starting or 'nothing'} next)"
        if self._phase != "running":
            return False, "shutting down"
        for part in self._parts:
            if part.ready is not None:
                ok, reason = part.ready()
                if not ok:
                    return False, f"{part.name}: {reason}"
        return True, ""

    @property
    def phase(self) -> str:
        """"starting", "running" or "stopping"."""
        return self._phase

    @property
    def started(self) -> list[str]:
        """The names of the parts started so far, in order."""
        return [part.name for part in self._parts]

    # --- the run ---

    async def run(self, assemble: Callable[[Lifecycle], Awaitable[None]], *,
                  stop: asyncio.Event | None = None) -> None:
        """Start every part (``assemble``), serve until asked to stop, stop every part; re-raise a failure.

        Without ``stop``, SIGTERM and SIGINT ask it to stop; with it (a test, a parent process), that event does.
        """
        forward = None
        if stop is None:
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(signum, self.stopping.set)
        else:
            forward = asyncio.create_task(_forward(stop, self.stopping))
        try:
            await assemble(self)
            self._phase = "running"
            log.info("%s ready", self.service, extra={"parts": self.started})
            await self.stopping.wait()
            log.info("%s stopping", self.service)
        finally:
            self._phase = "stopping"
            if self.stopping.is_set() and self._stop_deadline_s is not None:
                # Left armed past run(): it also covers the interpreter's exit. Exits 1 after the stacks.
                faulthandler.dump_traceback_later(self._stop_deadline_s, exit=True)
            await self._stop_all()
            if forward is not None:
                forward.cancel()
        if self._fatal is not None:
            raise self._fatal

    async def _stop_all(self) -> None:
        while self._parts:
            part = self._parts.pop()
            try:
                await part.stop()
            except Exception as exc:  # the others must still close: a failed stop is logged, not a reason to leak
                log.error("stopping %s failed", part.name, exc_info=exc, extra={"part": part.name})

    def _on_task_done(self, name: str, task: asyncio.Task[Any]) -> None:
        if task.cancelled() or self._phase == "stopping":
            return
        error = task.exception()
        if error is not None:
            log.error("%s failed", name, exc_info=error, extra={"part": name})
            self.fail(error)


@contextlib.asynccontextmanager
async def running(service: str, assemble: Callable[[Lifecycle], Awaitable[None]]) -> AsyncIterator[Lifecycle]:
    """Run a service in the background of a test: yields its lifecycle once started, stops it on exit."""
    life = Lifecycle(service)
    task = asyncio.create_task(life.run(assemble, stop=asyncio.Event()))
    while life.phase == "starting" and not task.done():
        await asyncio.sleep(0.01)
    try:
        yield life
    finally:
        life.request_stop()
        await task


async def _forward(outside: asyncio.Event, stopping: asyncio.Event) -> None:
    await outside.wait()
    stopping.set()


async def _noop() -> None:
    return None


async def _nothing() -> None:
    return None


async def _cancel(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
