"""Ingest on the bus, against a real nats-server: completed traces published for the policies (late spans as a
new revision, a republish dropped), and two replicas sharing traces by partition (each trace completed once,
by its owner, whichever replica its spans reached)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from ingest_helpers import make_span

from evalsi.bus import BusConnection, StreamLimits, connect, ensure_streams, subjects
from evalsi.bus.natsserver import NatsServer
from evalsi.bus.v1alpha1.bus_pb2 import TraceCompleted
from evalsi.ingest import (
    AssemblingSink,
    Completer,
    CompletionConfig,
    Partitioning,
    TraceAssembler,
    map_span,
    partition_of,
)
from evalsi.ingest.publishing import BusCompletionPublisher, BusNoticeSender, notice_consumer
from evalsi.stores.traces import SqliteTraceStore

LIMITS = StreamLimits(work_max_bytes=8 << 20, results_max_bytes=8 << 20, events_max_bytes=8 << 20,
                      control_max_bytes=8 << 20, deadletter_max_bytes=8 << 20, traces_max_bytes=8 << 20,
                      assembly_max_bytes=8 << 20)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def nats() -> Iterator[NatsServer]:
    with NatsServer() as server:
        yield server


@pytest.fixture
async def bus(nats: NatsServer) -> AsyncIterator[BusConnection]:
    conn = await connect(nats.url, name="test-ingest-bus", give_up_after_s=10)
    await ensure_streams(conn.js, LIMITS)
    yield conn
    await conn.close()


def _trace(byte: int, *, root: bool = True, child: int = 2) -> list:
    trace_id = bytes([byte]) * 16
    spans = [make_span({"gen_ai.operation.name": "chat"}, span_id=child, parent=1, trace_id=trace_id)]
    if root:
        spans.append(make_span({"gen_ai.operation.name": "invoke_agent"}, span_id=1, trace_id=trace_id))
    return [map_span(span, {"service.name": "svc"}) for span in spans]


async def _completed(bus: BusConnection) -> list[TraceCompleted]:
    sub = await bus.js.subscribe("traces.completed.>", ordered_consumer=True)
    out: list[TraceCompleted] = []
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=0.5)
            except TimeoutError:
                return out
            out.append(TraceCompleted.FromString(msg.data))
    finally:
        await sub.unsubscribe()


async def test_completed_traces_are_published_and_late_spans_republish_as_a_new_revision(
        bus: BusConnection, tmp_path: Path) -> None:
    clock = Clock()
    store = await SqliteTraceStore.open(tmp_path / "t.db")
    try:
        assembler = TraceAssembler(CompletionConfig(grace_s=2, max_wait_s=60), clock=clock)
        sink = AssemblingSink(store, assembler)
        completer = Completer(assembler, store, BusCompletionPublisher(bus.js), clock=lambda: 123.0)
        await sink.consume("team-a", _trace(1))
        assert await completer.tick() == []  # within the grace period
        clock.now = 3
        (done,) = await completer.tick()
        assert done.trace_id == "01" * 16
        # A late span (a third one), then the same completion published again by a restarted replica.
        await sink.consume("team-a", [map_span(make_span({}, span_id=3, parent=1, trace_id=bytes([1]) * 16), {})])
        clock.now = 6
        assert len(await completer.tick()) == 1
        await BusCompletionPublisher(bus.js).publish(
            TraceCompleted(project="team-a", trace_id="01" * 16, revision=3, root_seen=True, reason="spans"))
        published = await _completed(bus)
        assert [(m.project, m.trace_id, m.revision, m.root_seen, m.completed_at) for m in published] == [
            ("team-a", "01" * 16, 2, True, 123.0), ("team-a", "01" * 16, 3, True, 123.0)]
        info = await bus.js.stream_info(subjects.TRACES_STREAM)
        assert info.state.messages == 2
        assert subjects.traces_completed("team-a") == "traces.completed.team-a"
        summary = await store.get_summary("team-a", "01" * 16)
        assert summary is not None and summary.completions == 2
    finally:
        await store.close()


async def test_two_replicas_complete_each_trace_once_by_its_owner(bus: BusConnection, tmp_path: Path) -> None:
    clock = Clock()
    stores = [await SqliteTraceStore.open(tmp_path / "shared.db") for _ in range(2)]
    assemblers = [TraceAssembler(CompletionConfig(grace_s=1, max_wait_s=60), clock=clock) for _ in range(2)]
    sinks = [AssemblingSink(stores[i], assemblers[i], partitioning=Partitioning(i, 2),
                            notices=BusNoticeSender(bus.js)) for i in range(2)]
    consumers = [await notice_consumer(bus, assemblers[i], i).start() for i in range(2)]
    completers = [Completer(assemblers[i], stores[i], BusCompletionPublisher(bus.js)) for i in range(2)]
    try:
        owners = {byte: partition_of(f"{byte:02x}" * 16, 2) for byte in range(1, 9)}
        assert set(owners.values()) == {0, 1}  # the traces below land on both partitions
        for byte in owners:
            # The child span reaches one replica and the root the other: spans are split across replicas.
            await sinks[byte % 2].consume("p", _trace(byte, root=False))
            await sinks[(byte + 1) % 2].consume("p", [s for s in _trace(byte) if not s.parent_span_id])
        for _ in range(400):  # the notices travel over the bus (up to 20 s on a loaded machine; 2 s once missed one)
            if sum(len(a) for a in assemblers) == len(owners):
                break
            await asyncio.sleep(0.05)
        clock.now = 5
        done = [{t.trace_id for t in await completers[i].tick()} for i in range(2)]
        for byte, owner in owners.items():
            trace_id = f"{byte:02x}" * 16
            assert trace_id in done[owner] and trace_id not in done[1 - owner]
        published = await _completed(bus)
        assert sorted(m.trace_id for m in published) == sorted(f"{b:02x}" * 16 for b in owners)
        assert {m.revision for m in published} == {2}  # both spans were stored before completion
    finally:
        for consumer in consumers:
            await consumer.stop()
        for store in stores:
            await store.close()
