"""Liveness and readiness: named conditions the wiring sets, and the gRPC health service following them.

``/healthz`` says the process is up; ``/readyz`` and ``grpc.health.v1`` say whether its dependencies
are (NATS connected, stores open). Readiness starts false for every condition named at construction,
and shutting down makes it false for good.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from grpc_health.v1 import health, health_pb2

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class Readiness:
    """Ready when every named condition is met; each unmet one carries the reason."""

    def __init__(self, conditions: Iterable[str] = ()) -> None:
        self._problems: dict[str, str] = {name: "not ready yet" for name in conditions}
        self._listeners: list[Callable[[bool], None]] = []
        self._stopping = False

    @property
    def ready(self) -> bool:
        return not self._problems

    @property
    def reasons(self) -> list[str]:
        return [f"{name}: {reason}" for name, reason in self._problems.items()]

    def set_ready(self, name: str) -> None:
        if self._stopping or name not in self._problems:
            return
        del self._problems[name]
        self._changed()

    def set_not_ready(self, name: str, reason: str) -> None:
        if self._stopping and name != "server":
            return
        before = self.ready
        self._problems[name] = reason
        if before:
            self._changed()

    def stopping(self) -> None:
        """Shutting down: not ready from now on, whatever else reports."""
        self.set_not_ready("server", "shutting down")
        self._stopping = True

    def subscribe(self, listener: Callable[[bool], None]) -> Callable[[], None]:
        """Call ``listener(ready)`` on every change; returns the function that unsubscribes."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _changed(self) -> None:
        ready = self.ready
        for listener in list(self._listeners):
            listener(ready)


class GrpcHealth:
    """grpc.health.v1 for the server ("") and each service, SERVING exactly while ready."""

    def __init__(self, readiness: Readiness, services: Iterable[str]) -> None:
        self.servicer = health.aio.HealthServicer()
        self._readiness = readiness
        self._services = ["", *services]
        self._tasks: set[asyncio.Task[None]] = set()
        self._unsubscribe: Callable[[], None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self._apply()
        self._unsubscribe = self._readiness.subscribe(self._on_change)

    async def shutdown(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        await self.servicer.enter_graceful_shutdown()
        for task in list(self._tasks):
            task.cancel()

    def _on_change(self, ready: bool) -> None:
        # Listeners are synchronous and may run on another thread (a client library's callback); the
        # servicer's setter is a coroutine. Each task reads the state when it runs, so quick flips
        # still end on the latest one.
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._schedule)

    def _schedule(self) -> None:
        task = asyncio.get_running_loop().create_task(self._apply())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _apply(self) -> None:
        status = SERVING if self._readiness.ready else NOT_SERVING
        for service in self._services:
            await self.servicer.set(service, status)
