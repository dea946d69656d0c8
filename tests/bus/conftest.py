"""Bus tests run against a real nats-server with JetStream, started from the bundled binary.

A server that cannot start fails the tests (NatsServer raises); nothing here skips. Tests that need the bus's
own stream names get a fresh server each (it starts in ~30 ms), so no two tests share a stream; tests of core
request/reply share one server per session on unique subjects.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest

from evalsi.bus import BusConnection, StreamLimits, connect, ensure_streams
from evalsi.bus.natsserver import NatsServer
from evalsi.bus.v1alpha1 import bus_pb2
from evalsi.v1alpha1 import record_pb2

# Small budgets: JetStream checks every stream's max_bytes against the disk it may use.
TEST_LIMITS = StreamLimits(
    work_max_bytes=64 * 1024 * 1024,
    results_max_bytes=64 * 1024 * 1024,
    events_max_bytes=16 * 1024 * 1024,
    control_max_bytes=8 * 1024 * 1024,
    deadletter_max_bytes=64 * 1024 * 1024,
    traces_max_bytes=16 * 1024 * 1024,
    assembly_max_bytes=16 * 1024 * 1024,
)


class MemoryObjectStore:
    """A dict-backed, content-addressed object store with the interface the bus expects."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.gets = 0

    async def put(self, data: bytes) -> str:
        key = "sha256/" + hashlib.sha256(data).hexdigest()
        self.objects[key] = data
        return key

    async def get(self, key: str) -> bytes:
        self.gets += 1
        return self.objects[key]


@pytest.fixture
def limits() -> StreamLimits:
    return TEST_LIMITS


@pytest.fixture(scope="session")
def nats_server() -> Iterator[NatsServer]:
    with NatsServer() as server:
        yield server


@pytest.fixture
def fresh_server() -> Iterator[NatsServer]:
    with NatsServer() as server:
        yield server


@pytest.fixture
async def bus(fresh_server: NatsServer) -> AsyncIterator[BusConnection]:
    """A connection to a fresh server whose streams are ensured."""
    conn = await connect(fresh_server.url, name="test-bus", give_up_after_s=10)
    await ensure_streams(conn.js, TEST_LIMITS)
    yield conn
    await conn.close()


@pytest.fixture
async def shared_bus(nats_server: NatsServer) -> AsyncIterator[BusConnection]:
    """A connection to the session's server (no streams): for core request/reply."""
    conn = await connect(nats_server.url, name="test-shared", give_up_after_s=10)
    yield conn
    await conn.close()


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:10]


@pytest.fixture
def object_store() -> MemoryObjectStore:
    return MemoryObjectStore()


MakeTask = Callable[..., bus_pb2.Task]
Eventually = Callable[..., Awaitable[None]]


def _make_task(key: str, run_id: str = "run1", text: str = "hello") -> bus_pb2.Task:
    record = record_pb2.Record(id=f"r-{key}")
    record.input.text = text
    return bus_pb2.Task(key=key, run_id=run_id, project="default", shard=0, stage=bus_pb2.STAGE_EVALUATE,
                        records=[record])  # fmt: skip


@pytest.fixture
def make_task() -> MakeTask:
    """``make_task(key, run_id="run1", text="hello")``: a Task with one record."""
    return _make_task


async def _eventually(
    check: Callable[[], object], timeout: float = 5.0, what: str = "condition"
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


@pytest.fixture
def eventually() -> Eventually:
    """``await eventually(check, timeout=5.0, what=...)``: poll until ``check()`` (sync or async) is true."""
    return _eventually
