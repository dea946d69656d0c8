"""The ack table on FastStream's in-memory test broker: every row of the table, without a server.

The real-server behaviour (redelivery timing, dead letters in their stream, drain at stop) is in
test_bus_consumer.py and test_bus_outages.py; here each handler outcome is checked against what the table says.
A JetStream reply subject (``$JS.ACK.<stream>.<consumer>.<delivered>...``) gives a message its delivery count.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from faststream.nats import TestNatsBroker
from google.protobuf.message import Message

from evalsi.bus import (
    AckTable,
    BusBroker,
    Delivery,
    Permanent,
    Retryable,
    Subscription,
    Unavailable,
    encode,
    retry_delay,
)
from evalsi.bus.v1alpha1 import bus_pb2
from evalsi.errors import InfraError

MakeTask = Callable[..., bus_pb2.Task]
Handler = Callable[[Any, Delivery], Awaitable[None]]


def js_reply(delivered: int, stream: str = "WORK", consumer: str = "work-cpu", seq: int = 7) -> str:
    """The reply subject JetStream gives a delivery: it carries the delivery count and the stream sequence."""
    return f"$JS.ACK.{stream}.{consumer}.{delivered}.{seq}.{seq}.1700000000000000000.0"


class InMemoryBus:
    """One subscriber on the test broker, the dead letters it would publish, and what its callbacks saw."""

    def __init__(self, handler: Handler, *, subject: str = "work.cpu",
                 message_type: type[Message] | None = bus_pb2.Task,
                 probe: Callable[[], Awaitable[bool]] | None = None, **options: Any) -> None:
        self.dead_letters: list[tuple[bytes, Delivery, str, str | None]] = []
        self.notified: list[tuple[Message | None, Delivery, str]] = []
        self.broker = BusBroker(None)
        options.setdefault("retry_base_s", 0.5)
        self.table: AckTable = self.broker.subscribe(
            Subscription("WORK", "work-cpu", subject, message_type, "tasks", **options), handler,
            on_dead_letter=self._notified, probe=probe, probe_every_s=0.01, dead_letters=self._dead_letter,
        )  # fmt: skip

    async def _dead_letter(self, data: bytes, delivery: Delivery, reason: str, subject: str | None) -> str:
        self.dead_letters.append((data, delivery, reason, subject))
        return subject or "deadletter.cpu"

    async def _notified(self, message: Message | None, delivery: Delivery, reason: str) -> None:
        self.notified.append((message, delivery, reason))

    async def deliver(self, message: Message, *, delivered: int = 1, subject: str = "work.cpu",
                      key: str = "k1") -> None:
        data, headers = encode(message, key=key)
        async with TestNatsBroker(self.broker.nats) as broker:
            await broker.publish(data, subject, headers=headers, reply_to=js_reply(delivered))


async def test_a_handler_that_returns_acks_and_sees_the_message_and_its_delivery(make_task: MakeTask) -> None:
    seen: list[tuple[bus_pb2.Task, Delivery]] = []

    async def handler(task: bus_pb2.Task, delivery: Delivery) -> None:
        seen.append((task, delivery))

    bus = InMemoryBus(handler)
    await bus.deliver(make_task("t1"), delivered=2, key="t1")
    [(task, delivery)] = seen
    assert task == make_task("t1")
    assert delivery.msg_id == "t1" and delivery.num_delivered == 2 and delivery.stream == "WORK"
    assert delivery.stream_seq == 7 and delivery.consumer == "work-cpu"
    assert bus.table.stats.acked == 1 and bus.table.stats.naked == 0 and bus.table.stats.received == 1


@pytest.mark.parametrize("error", [Retryable("provider said 503"), InfraError("sandbox unavailable"),
                                   RuntimeError("evaluator crashed")])
async def test_a_failure_before_the_last_delivery_is_naked_not_dead_lettered(
    make_task: MakeTask, error: Exception
) -> None:
    async def handler(task: bus_pb2.Task, delivery: Delivery) -> None:
        raise error

    bus = InMemoryBus(handler, max_deliver=3)
    await bus.deliver(make_task("t1"), delivered=2)
    assert bus.table.stats.naked == 1 and bus.table.stats.acked == 0
    assert bus.dead_letters == [] and bus.notified == []


async def test_a_failure_on_the_last_delivery_is_dead_lettered_with_why(make_task: MakeTask) -> None:
    async def handler(task: bus_pb2.Task, delivery: Delivery) -> None:
        raise RuntimeError("evaluator crashed")

    bus = InMemoryBus(handler, max_deliver=3)
    await bus.deliver(make_task("t1"), delivered=3, key="t1")
    assert bus.table.stats.dead_lettered == 1 and bus.table.stats.naked == 0
    [(data, delivery, reason, subject)] = bus.dead_letters
    assert reason == "failed on delivery 3/3: RuntimeError: evaluator crashed"
    assert data == make_task("t1").SerializeToString() and delivery.msg_id == "t1" and subject is None
    [(message, _, notified_reason)] = bus.notified
    assert message == make_task("t1") and notified_reason == reason


async def test_permanent_is_dead_lettered_on_the_first_delivery(make_task: MakeTask) -> None:
    async def handler(task: bus_pb2.Task, delivery: Delivery) -> None:
        raise Permanent("a task with no records")

    bus = InMemoryBus(handler, max_deliver=5, dead_letter_subject="deadletter.custom")
    await bus.deliver(make_task("t1"))
    assert bus.table.stats.dead_lettered == 1 and bus.table.stats.naked == 0
    [(_, _, reason, subject)] = bus.dead_letters
    assert reason == "permanent: a task with no records" and subject == "deadletter.custom"


async def test_a_payload_of_another_type_is_dead_lettered_undecoded_and_never_handled() -> None:
    called = asyncio.Event()

    async def handler(task: bus_pb2.Task, delivery: Delivery) -> None:
        called.set()

    bus = InMemoryBus(handler)
    await bus.deliver(bus_pb2.RunControl(run_id="r1"))
    assert not called.is_set()
    [(message, _, reason)] = bus.notified
    assert message is None
    assert reason == "permanent: message is evalsi.bus.v1alpha1.RunControl, expected evalsi.bus.v1alpha1.Task"


async def test_any_type_reader_decodes_by_the_type_header() -> None:
    seen: list[Message] = []

    async def handler(message: Message, delivery: Delivery) -> None:
        seen.append(message)

    bus = InMemoryBus(handler, subject="deadletter.>", message_type=None)
    control = bus_pb2.RunControl(run_id="r1", action=bus_pb2.CONTROL_ACTION_CANCEL)
    await bus.deliver(control, subject="deadletter.control")
    assert seen == [control] and bus.table.stats.acked == 1


async def test_a_dead_letter_that_fails_again_is_kept_not_republished(make_task: MakeTask) -> None:
    async def handler(message: Message, delivery: Delivery) -> None:
        raise Permanent("this reader takes no tasks")

    bus = InMemoryBus(handler, subject="deadletter.>", message_type=None)
    await bus.deliver(make_task("t1"), subject="deadletter.cpu")
    assert bus.table.stats.kept == 1 and bus.table.stats.dead_lettered == 0
    assert bus.dead_letters == []  # re-publishing would feed it back to its own reader
    [(message, delivery, reason)] = bus.notified
    assert message == make_task("t1") and delivery.subject == "deadletter.cpu"
    assert reason == "permanent: this reader takes no tasks"


async def test_unavailable_holds_the_message_until_the_probe_answers_then_handles_it_again(
    make_task: MakeTask,
) -> None:
    up = asyncio.Event()
    calls: list[int] = []
    probes = 0

    async def handler(task: bus_pb2.Task, delivery: Delivery) -> None:
        calls.append(delivery.num_delivered)
        if not up.is_set():
            raise Unavailable("the store is down")

    async def probe() -> bool:
        nonlocal probes
        probes += 1
        if probes == 3:
            up.set()
        return up.is_set()

    bus = InMemoryBus(handler, probe=probe, max_deliver=1)  # a spent delivery would dead-letter it
    await bus.deliver(make_task("t1"))
    assert calls == [1, 1] and probes == 3
    assert bus.table.stats.held == 1 and bus.table.stats.acked == 1
    assert bus.table.stats.naked == 0 and bus.dead_letters == []


async def test_a_long_handler_sends_in_progress_heartbeats(make_task: MakeTask) -> None:
    async def handler(task: bus_pb2.Task, delivery: Delivery) -> None:
        await asyncio.sleep(0.35)

    bus = InMemoryBus(handler, ack_wait_s=1.0, heartbeat_s=0.1)
    await bus.deliver(make_task("t1"))
    assert bus.table.stats.in_progress_sent >= 2 and bus.table.stats.acked == 1


def test_backoff_doubles_per_delivery_up_to_the_cap() -> None:
    assert [retry_delay(n, 0.5, 3.0) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_a_heartbeat_must_fall_inside_ack_wait() -> None:
    with pytest.raises(ValueError, match="heartbeat_s"):
        Subscription("WORK", "work-cpu", "work.cpu", bus_pb2.Task, "tasks", ack_wait_s=1.0, heartbeat_s=1.0)
