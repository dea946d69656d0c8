"""Outages on a real server: a handler whose store is down holds its message (no delivery spent, no more
pulled), a dead letter that fails again stays where it is, and a publish rides through a NATS restart."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from google.protobuf.message import Message

from evalsi.bus import (
    BusBroker,
    BusConnection,
    Delivery,
    Permanent,
    StreamLimits,
    Subscription,
    Unavailable,
    connect,
    ensure_consumer,
    ensure_streams,
    publish,
    subjects,
)
from evalsi.bus.codec import encode
from evalsi.bus.natsserver import NatsServer
from evalsi.bus.v1alpha1 import bus_pb2

MakeTask = Callable[..., bus_pb2.Task]
Eventually = Callable[..., Awaitable[None]]


async def stream_messages(bus: BusConnection, stream: str) -> int:
    return int((await bus.js.stream_info(stream)).state.messages)


async def test_an_unavailable_store_holds_the_message_and_pauses_pulling(
    bus: BusConnection, make_task: MakeTask, eventually: Eventually
) -> None:
    for key in ("t1", "t2", "t3"):
        await publish(bus.js, subjects.work("cpu"), make_task(key), key=key)
    store_up = False
    calls: list[tuple[str, int]] = []

    async def handler(task: bus_pb2.Task, delivery: Delivery) -> None:
        calls.append((task.key, delivery.num_delivered))
        if not store_up:
            raise Unavailable("the store is down")

    async def probe() -> bool:
        return store_up

    broker = BusBroker(bus)
    consumer = broker.subscribe(
        Subscription("WORK", "work-cpu", "work.cpu", bus_pb2.Task, "tasks", concurrency=1, max_deliver=2,
                     ack_wait_s=2.0, fetch_timeout_s=0.2),
        handler, probe=probe, probe_every_s=0.05,
    )  # fmt: skip
    async with broker:
        await eventually(lambda: consumer.stats.held == 1, what="the handler to meet the outage")
        # Held past ack_wait: in-progress acks keep the delivery, and nothing more is pulled meanwhile.
        await asyncio.sleep(2.5)
        assert consumer.stats.received == 1 and consumer.stats.naked == 0 and consumer.stats.in_progress_sent >= 2
        assert calls == [("t1", 1)]  # the probe, not the handler, is asked while the store is down
        store_up = True
        await eventually(lambda: consumer.stats.acked == 3, what="all three to be handled once the store is up")
    assert consumer.stats.dead_lettered == 0 and consumer.stats.naked == 0
    assert all(n == 1 for _, n in calls)  # no delivery was spent on the outage
    assert [key for key, _ in calls[-3:]] == ["t1", "t2", "t3"]


async def test_a_dead_letter_that_fails_again_is_kept_and_counted_once_never_republished(
    bus: BusConnection, make_task: MakeTask, eventually: Eventually
) -> None:
    result = bus_pb2.TaskResult(key="k1", run_id="run1", project="default", status=bus_pb2.TASK_STATUS_DONE)
    data, headers = encode(result, key="dead-result")
    await bus.js.publish("deadletter.results", data, headers=headers)
    data, headers = encode(make_task("t1"), key="dead-task")
    await bus.js.publish("deadletter.cpu", data, headers=headers)
    await bus.js.publish("deadletter.test", b"hello")  # no type, no protobuf
    await bus.js.publish("deadletter.deadletter", b"\xff\xfe", headers={"Evalsi-Type": "evalsi.Nope"})
    before = await stream_messages(bus, subjects.DEADLETTER_STREAM)
    handled: list[str] = []
    kept: list[tuple[str, str]] = []

    async def handler(message: Message, delivery: Delivery) -> None:
        if isinstance(message, bus_pb2.Task):
            raise Permanent("this reader takes no tasks")
        handled.append(type(message).DESCRIPTOR.name)

    async def on_kept(message: Message | None, delivery: Delivery, reason: str) -> None:
        kept.append((delivery.subject, reason))

    await ensure_consumer(bus.js, subjects.DEADLETTER_STREAM, "dead-reader", "deadletter.>")
    broker = BusBroker(bus)
    consumer = broker.subscribe(
        Subscription(subjects.DEADLETTER_STREAM, "dead-reader", "deadletter.>", None, "dead letters", max_deliver=2,
                     retry_base_s=0.05, fetch_timeout_s=0.2, ensure=False),
        handler, on_dead_letter=on_kept,
    )  # fmt: skip
    async with broker:
        await eventually(lambda: consumer.stats.acked + consumer.stats.kept == 4, what="every dead letter read")
        await asyncio.sleep(0.5)  # room for a loop to show itself
    assert handled == ["TaskResult"]
    assert sorted(subject for subject, _ in kept) == ["deadletter.cpu", "deadletter.deadletter", "deadletter.test"]
    assert consumer.stats.kept == 3 and consumer.stats.dead_lettered == 0 and consumer.stats.received == 4
    assert await stream_messages(bus, subjects.DEADLETTER_STREAM) == before == 4


async def test_a_publish_rides_through_a_nats_restart(tmp_path: Any, limits: StreamLimits) -> None:
    with NatsServer(store_dir=str(tmp_path / "js")) as server:
        conn = await connect(server.url, name="test-restart", give_up_after_s=10, reconnect_wait_s=0.1)
        try:
            await ensure_streams(conn.js, limits)
            server.kill()
            task = bus_pb2.Task(key="t-restart", run_id="run1", project="default")
            publishing = asyncio.create_task(publish(conn.js, subjects.work("cpu"), task, key=task.key, timeout=0.5))
            await asyncio.sleep(1.5)  # several attempts fail while the server is gone
            assert not publishing.done()
            server.restart()
            await asyncio.wait_for(publishing, timeout=30)
            # Attempts buffered during the outage reach the server too: the message id keeps one of them.
            assert int((await conn.js.stream_info(subjects.WORK_STREAM)).state.messages) == 1
        finally:
            await conn.close()
