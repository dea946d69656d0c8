"""FastStream subscribers on a real server: errors decide the ack, long tasks stay leased, dead letters keep why."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import nats

from evalsi.bus import (
    AckTable,
    BusBroker,
    BusConnection,
    ConsumerSettings,
    Delivery,
    Retryable,
    Subscription,
    ensure_consumer,
    publish,
    subjects,
    watch_max_deliveries,
)
from evalsi.bus.codec import DEAD_REASON_HEADER, TYPE_HEADER, decode
from evalsi.bus.natsserver import NatsServer
from evalsi.bus.v1alpha1 import bus_pb2
from evalsi.errors import InfraError

MakeTask = Callable[..., bus_pb2.Task]
Eventually = Callable[..., Awaitable[None]]


class WorkConsumer:
    """A broker with one subscriber on ``work.cpu``, and that subscriber's ack table."""

    def __init__(self, bus: BusConnection, handler: Any, on_dead_letter: Any = None, **options: Any) -> None:
        options.setdefault("retry_base_s", 0.05)
        options.setdefault("fetch_timeout_s", 0.5)
        if "ack_wait" in options:
            options["ack_wait_s"] = options.pop("ack_wait")
        self.broker = BusBroker(bus)
        subscription = Subscription("WORK", "work-cpu", "work.cpu", bus_pb2.Task, "tasks", **options)
        self.table: AckTable = self.broker.subscribe(subscription, handler, on_dead_letter=on_dead_letter)
        self.stats = self.table.stats

    async def start(self) -> WorkConsumer:
        await self.broker.start()
        return self

    async def stop(self, timeout: float | None = None) -> None:
        await self.broker.stop(timeout)

    async def __aenter__(self) -> WorkConsumer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def work_consumer(bus: BusConnection, handler: Any, **options: Any) -> WorkConsumer:
    return WorkConsumer(bus, handler, **options)


async def stream_messages(bus: BusConnection, stream: str) -> int:
    return int((await bus.js.stream_info(stream)).state.messages)


async def is_empty(bus: BusConnection, stream: str) -> bool:
    return await stream_messages(bus, stream) == 0


async def test_retryable_is_redelivered_then_acked(
    bus: BusConnection, make_task: MakeTask, eventually: Eventually
) -> None:
    await publish(bus.js, subjects.work("cpu"), make_task("t1"), key="t1")
    deliveries: list[int] = []

    async def handler(task: bus_pb2.Task, delivery: Delivery) -> None:
        deliveries.append(delivery.num_delivered)
        if delivery.num_delivered == 1:
            raise Retryable("provider said 503", delay_s=0.1)
        if delivery.num_delivered == 2:
            raise InfraError("sandbox unavailable")  # an InfraError retries too

    async with work_consumer(bus, handler, max_deliver=5) as consumer:
        await eventually(lambda: consumer.stats.acked == 1, what="the third delivery to be acked")
        assert consumer.stats.naked == 2 and consumer.stats.dead_lettered == 0
    assert deliveries == [1, 2, 3]
    await eventually(lambda: is_empty(bus, "WORK"), what="the acked task to leave the work queue")


async def test_always_failing_is_dead_lettered_after_max_deliver(
    bus: BusConnection, make_task: MakeTask, eventually: Eventually
) -> None:
    task = make_task("t-fail")
    traceparent = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    await publish(bus.js, subjects.work("cpu"), task, key=task.key, traceparent=traceparent)
    dead: list[tuple[bus_pb2.Task | None, Delivery, str]] = []

    async def handler(task: bus_pb2.Task, delivery: Delivery) -> None:
        raise RuntimeError("evaluator crashed")

    async def on_dead_letter(message: Any, delivery: Delivery, reason: str) -> None:
        dead.append((message, delivery, reason))

    async with work_consumer(bus, handler, max_deliver=3, on_dead_letter=on_dead_letter) as consumer:
        await eventually(lambda: consumer.stats.dead_lettered == 1, what="the dead letter")
        assert consumer.stats.naked == 2 and consumer.stats.acked == 0

    message, delivery, reason = dead[0]
    assert message == task
    assert delivery.num_delivered == 3 and delivery.msg_id == "t-fail" and delivery.stream == "WORK"
    assert reason == "failed on delivery 3/3: RuntimeError: evaluator crashed"

    raw = await bus.js.get_last_msg("DEADLETTER", "deadletter.cpu")
    assert raw.headers is not None
    assert raw.headers[DEAD_REASON_HEADER] == reason
    assert raw.headers["Evalsi-Dead-Subject"] == "work.cpu"
    assert raw.headers["Evalsi-Dead-Deliveries"] == "3"
    assert raw.headers["Evalsi-Dead-Msg-Id"] == "t-fail"
    assert raw.headers["traceparent"].startswith("00-aaaa")
    assert decode(raw.data or b"", raw.headers, bus_pb2.Task) == task  # the original payload, intact
    await eventually(lambda: is_empty(bus, "WORK"), what="the terminated task to leave the work queue")


async def test_wrong_type_is_terminated_as_permanent(bus: BusConnection, eventually: Eventually) -> None:
    await publish(bus.js, subjects.work("cpu"), bus_pb2.RunControl(run_id="r1"), key="not-a-task")
    called = asyncio.Event()
    dead: list[tuple[Any, Delivery, str]] = []

    async def handler(task: bus_pb2.Task, delivery: Delivery) -> None:
        called.set()

    async def on_dead_letter(message: Any, delivery: Delivery, reason: str) -> None:
        dead.append((message, delivery, reason))

    async with work_consumer(bus, handler, on_dead_letter=on_dead_letter) as consumer:
        await eventually(lambda: consumer.stats.dead_lettered == 1)
        assert consumer.stats.naked == 0
    assert not called.is_set()
    message, delivery, reason = dead[0]
    assert message is None and delivery.num_delivered == 1  # no retry for what cannot succeed
    assert reason == "permanent: message is evalsi.bus.v1alpha1.RunControl, expected evalsi.bus.v1alpha1.Task"
    raw = await bus.js.get_last_msg("DEADLETTER", "deadletter.cpu")
    assert raw.headers is not None and raw.headers[TYPE_HEADER] == "evalsi.bus.v1alpha1.RunControl"


async def test_a_killed_consumer_task_is_redelivered_to_another_after_ack_wait(
    bus: BusConnection, fresh_server: NatsServer, make_task: MakeTask, eventually: Eventually
) -> None:
    await ensure_consumer(bus.js, "WORK", "work-cpu", "work.cpu", ConsumerSettings(ack_wait_s=1.0))
    await publish(bus.js, subjects.work("cpu"), make_task("t-crash"), key="t-crash")

    # A worker takes the task and dies without acking.
    doomed = await nats.connect(fresh_server.url)
    psub = await doomed.jetstream().pull_subscribe_bind("work-cpu", stream="WORK")
    [taken] = await psub.fetch(1, timeout=2)
    assert taken.metadata.num_delivered == 1
    died_at = time.monotonic()
    await doomed.close()

    got: list[tuple[str, int, float]] = []

    async def handler(task: bus_pb2.Task, delivery: Delivery) -> None:
        got.append((task.key, delivery.num_delivered, time.monotonic() - died_at))

    async with work_consumer(bus, handler, ack_wait=1.0) as consumer:
        await eventually(lambda: consumer.stats.acked == 1, timeout=8, what="redelivery to the second worker")
    [(key, num_delivered, after)] = got
    assert key == "t-crash" and num_delivered == 2
    assert 0.9 < after < 6.0  # after ack_wait (1 s), not the default 30 s


async def test_in_progress_heartbeats_keep_a_long_task_from_redelivery(
    bus: BusConnection, make_task: MakeTask, eventually: Eventually
) -> None:
    await publish(bus.js, subjects.work("cpu"), make_task("t-long"), key="t-long")
    calls: list[int] = []

    async def handler(task: bus_pb2.Task, delivery: Delivery) -> None:
        calls.append(delivery.num_delivered)
        await asyncio.sleep(3.0)  # three times ack_wait

    # Two workers share the consumer: a lost lease would show up as a second call.
    other = work_consumer(bus, handler, ack_wait=1.0, heartbeat_s=0.3)
    async with work_consumer(bus, handler, ack_wait=1.0, heartbeat_s=0.3) as consumer, other:
        await eventually(lambda: consumer.stats.acked + other.stats.acked == 1, timeout=6)
        await asyncio.sleep(1.2)  # past another ack_wait: nothing comes back
    assert calls == [1]
    assert consumer.stats.in_progress_sent + other.stats.in_progress_sent >= 6


async def test_stop_naks_unfinished_work_for_prompt_redelivery(
    bus: BusConnection, make_task: MakeTask, eventually: Eventually
) -> None:
    await publish(bus.js, subjects.work("cpu"), make_task("t-drain"), key="t-drain")
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def stuck(task: bus_pb2.Task, delivery: Delivery) -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    first = await work_consumer(bus, stuck, ack_wait=30.0).start()
    await asyncio.wait_for(started.wait(), 5)
    await first.stop(timeout=0.2)
    assert cancelled.is_set() and first.stats.naked == 1

    got: list[int] = []

    async def handler(task: bus_pb2.Task, delivery: Delivery) -> None:
        got.append(delivery.num_delivered)

    t0 = time.monotonic()
    async with work_consumer(bus, handler, ack_wait=30.0) as second:
        await eventually(lambda: second.stats.acked == 1, timeout=5, what="prompt redelivery after shutdown")
    assert got == [2] and time.monotonic() - t0 < 5  # well inside ack_wait (30 s)


async def test_finished_work_is_acked_during_a_graceful_stop(
    bus: BusConnection, make_task: MakeTask, eventually: Eventually
) -> None:
    await publish(bus.js, subjects.work("cpu"), make_task("t-finish"), key="t-finish")
    started = asyncio.Event()

    async def slowish(task: bus_pb2.Task, delivery: Delivery) -> None:
        started.set()
        await asyncio.sleep(0.3)

    consumer = await work_consumer(bus, slowish).start()
    await asyncio.wait_for(started.wait(), 5)
    await consumer.stop(timeout=5)
    assert consumer.stats.acked == 1 and consumer.stats.naked == 0
    await eventually(lambda: is_empty(bus, "WORK"), what="the acked task to leave the work queue")


async def test_bounded_concurrency(bus: BusConnection, make_task: MakeTask, eventually: Eventually) -> None:
    for i in range(12):
        await publish(bus.js, subjects.work("cpu"), make_task(f"c{i}"), key=f"c{i}")
    running = 0
    peak = 0

    async def handler(task: bus_pb2.Task, delivery: Delivery) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.05)
        running -= 1

    async with work_consumer(bus, handler, concurrency=3) as consumer:
        await eventually(lambda: consumer.stats.acked == 12, timeout=10)
    assert 1 < peak <= 3


async def test_max_deliveries_advisory_dead_letters_a_task_whose_worker_died_on_its_last_delivery(
    bus: BusConnection, fresh_server: NatsServer, make_task: MakeTask, eventually: Eventually
) -> None:
    await ensure_consumer(bus.js, "WORK", "work-cpu", "work.cpu", ConsumerSettings(ack_wait_s=1.0, max_deliver=2))
    task = make_task("t-died")
    await publish(bus.js, subjects.work("cpu"), task, key=task.key)
    dead: list[tuple[Any, Delivery, str]] = []

    async def on_dead_letter(message: Any, delivery: Delivery, reason: str) -> None:
        dead.append((message, delivery, reason))

    watcher = await watch_max_deliveries(bus.nc, bus.js, "WORK", "work-cpu", on_dead_letter)
    try:
        # Two workers in turn take the task and die holding it; the second holds the last delivery.
        for expected in (1, 2):
            doomed = await nats.connect(fresh_server.url)
            psub = await doomed.jetstream().pull_subscribe_bind("work-cpu", stream="WORK")
            [taken] = await psub.fetch(1, timeout=3)
            assert taken.metadata.num_delivered == expected
            await doomed.close()

        # A healthy worker keeps pulling; it never sees the task again.
        seen: list[str] = []

        async def handler(t: bus_pb2.Task, delivery: Delivery) -> None:
            seen.append(t.key)

        async with work_consumer(bus, handler, ack_wait=1.0, max_deliver=2, ensure=False):
            await eventually(lambda: watcher.dead_lettered == 1, timeout=5, what="the max-deliveries advisory")
        assert seen == []
    finally:
        await watcher.stop()

    message, delivery, reason = dead[0]
    assert message == task
    assert delivery.num_delivered == 2 and delivery.stream_seq == 1 and delivery.msg_id == "t-died"
    assert "max deliveries (2)" in reason
    raw = await bus.js.get_last_msg("DEADLETTER", "deadletter.cpu")
    assert raw.headers is not None and raw.headers[DEAD_REASON_HEADER] == reason
    assert decode(raw.data or b"", raw.headers, bus_pb2.Task) == task
    assert await is_empty(bus, "WORK")  # deleted from the work queue
