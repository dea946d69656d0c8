"""Publishing: the key is the message id (duplicates dropped), big payloads go by reference."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from evalsi.bus import (
    PAYLOAD_REF_HEADER,
    TYPE_HEADER,
    BusBroker,
    BusConnection,
    Delivery,
    PayloadTooLargeError,
    Publisher,
    Subscription,
    publish,
    subjects,
)
from evalsi.bus.v1alpha1 import bus_pb2
from evalsi.errors import InfraError

WORK_CPU = Subscription("WORK", "work-cpu", "work.cpu", bus_pb2.Task, "tasks", fetch_timeout_s=0.5)


async def test_the_same_key_twice_is_one_message(bus: BusConnection, make_task: Callable[..., bus_pb2.Task]) -> None:
    task = make_task("run1/0/evaluate/0/exact-match@1.0.0")
    assert await publish(bus.js, subjects.work("cpu"), task, key=task.key) is False
    assert await publish(bus.js, subjects.work("cpu"), task, key=task.key) is True
    other = make_task("run1/1/evaluate/0/exact-match@1.0.0")
    assert await publish(bus.js, subjects.work("cpu"), other, key=other.key) is False
    assert (await bus.js.stream_info("WORK")).state.messages == 2


async def test_a_subject_without_a_stream_is_an_infra_error(bus: BusConnection) -> None:
    with pytest.raises(InfraError, match="no stream takes this subject"):
        await publish(bus.js, "nowhere.x", bus_pb2.RunControl(run_id="r"), key="k")


async def test_a_payload_over_the_limit_needs_a_store(
    bus: BusConnection, make_task: Callable[..., bus_pb2.Task]
) -> None:
    big = make_task("big", text="x" * 5000)
    with pytest.raises(PayloadTooLargeError, match="over the bus limit of 1000 bytes"):
        await publish(bus.js, subjects.work("cpu"), big, key="big", max_payload=1000)


@pytest.mark.parametrize(
    ("size", "configured"), [(2 * 1024 * 1024, None), (5000, 1000)], ids=["server-limit", "configured"]
)
async def test_offloaded_payload_round_trips(
    bus: BusConnection,
    make_task: Callable[..., bus_pb2.Task],
    object_store: Any,
    eventually: Callable[..., Awaitable[None]],
    size: int,
    configured: int | None,
) -> None:
    big = make_task("big", text="x" * size)
    publisher = Publisher(bus.js, store=object_store, max_payload=configured)
    assert await publisher.publish(subjects.work("cpu"), big, key=big.key) is False
    assert len(object_store.objects) == 1

    raw = await bus.js.get_msg("WORK", 1)
    assert not raw.data  # only the reference travels
    assert raw.headers is not None
    assert raw.headers[PAYLOAD_REF_HEADER] in object_store.objects
    assert raw.headers[TYPE_HEADER] == "evalsi.bus.v1alpha1.Task"

    received: list[tuple[bus_pb2.Task, Delivery]] = []

    async def handler(task: bus_pb2.Task, delivery: Delivery) -> None:
        received.append((task, delivery))

    broker = BusBroker(bus, store=object_store)
    consumer = broker.subscribe(WORK_CPU, handler)
    async with broker:
        await eventually(lambda: consumer.stats.acked == 1, what="the offloaded task to be handled")
    task, delivery = received[0]
    assert task == big
    assert delivery.msg_id == "big"
    assert object_store.gets == 1


async def test_consumer_without_store_dead_letters_an_offloaded_payload(
    bus: BusConnection, make_task: Callable[..., bus_pb2.Task], object_store: Any, eventually: Any
) -> None:
    big = make_task("big", text="x" * 5000)
    await publish(bus.js, subjects.work("cpu"), big, key=big.key, store=object_store, max_payload=1000)
    called = asyncio.Event()

    async def handler(task: bus_pb2.Task, delivery: Delivery) -> None:
        called.set()

    broker = BusBroker(bus)
    consumer = broker.subscribe(WORK_CPU, handler)
    async with broker:
        await eventually(lambda: consumer.stats.dead_lettered == 1)
    assert not called.is_set()
    dead = await bus.js.get_last_msg("DEADLETTER", "deadletter.cpu")
    assert dead.headers is not None
    assert "no object store" in dead.headers["Evalsi-Dead-Reason"]
    assert dead.headers[PAYLOAD_REF_HEADER] in object_store.objects  # the reference survives in the dead letter
