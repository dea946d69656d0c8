"""Requests and replies over the bus's 1 MiB payload limit travel through the object store by reference."""

from __future__ import annotations

from typing import Any

import pytest

from evalsi.bus import BusConnection, Delivery, request, serve_requests
from evalsi.bus.codec import PAYLOAD_REF_HEADER
from evalsi.bus.errors import PayloadTooLargeError
from evalsi.bus.v1alpha1 import bus_pb2
from evalsi.errors import InfraError
from evalsi.v1alpha1 import record_pb2

BIG = 3 * 1024 * 1024  # three times the server's default max_payload


def _task(text: str) -> bus_pb2.Task:
    return bus_pb2.Task(key="k", run_id="r", records=[record_pb2.Record(id="a", input=record_pb2.Content(text=text))])


async def test_a_large_request_and_its_large_reply_travel_by_reference(
    shared_bus: BusConnection, unique: str, object_store: Any
) -> None:
    seen_refs: list[str] = []

    async def echo(task: bus_pb2.Task, delivery: Delivery) -> bus_pb2.Task:
        seen_refs.append(delivery.headers.get(PAYLOAD_REF_HEADER, ""))
        return task

    subject = f"evaluate.cpu-{unique}"
    server = await serve_requests(shared_bus.nc, subject, "q", echo, request_type=bus_pb2.Task, store=object_store)
    try:
        sent = _task("x" * BIG)
        reply = await request(shared_bus.nc, subject, sent, bus_pb2.Task, timeout=10, store=object_store)
    finally:
        await server.stop()
    assert reply == sent
    assert len(seen_refs) == 1 and seen_refs[0].startswith("sha256/")  # the request came by reference
    # The request and the reply are the same bytes: one content-addressed object, fetched once each way.
    assert len(object_store.objects) == 1 and object_store.gets == 2
    assert next(iter(object_store.objects.values())) == sent.SerializeToString()


async def test_a_small_request_stays_inline(
    shared_bus: BusConnection, unique: str, object_store: Any
) -> None:
    store = object_store

    async def echo(task: bus_pb2.Task, delivery: Delivery) -> bus_pb2.Task:
        return task

    subject = f"evaluate.cpu-{unique}"
    server = await serve_requests(shared_bus.nc, subject, "q", echo, request_type=bus_pb2.Task, store=store)
    try:
        reply = await request(shared_bus.nc, subject, _task("small"), bus_pb2.Task, timeout=5, store=store)
    finally:
        await server.stop()
    assert reply.records[0].input.text == "small"
    assert store.objects == {} and store.gets == 0


async def test_without_a_store_a_large_request_is_refused_naming_the_limit(
    shared_bus: BusConnection, unique: str
) -> None:
    with pytest.raises(PayloadTooLargeError, match=r"over the bus limit of \d+ bytes"):
        await request(shared_bus.nc, f"evaluate.cpu-{unique}", _task("x" * BIG), bus_pb2.Task, timeout=5)


async def test_a_responder_without_a_store_answers_infra_error(
    shared_bus: BusConnection, unique: str, object_store: Any
) -> None:
    async def echo(task: bus_pb2.Task, delivery: Delivery) -> bus_pb2.Task:
        raise AssertionError("the handler must not run without its request")

    subject = f"evaluate.cpu-{unique}"
    server = await serve_requests(shared_bus.nc, subject, "q", echo, request_type=bus_pb2.Task)
    try:
        with pytest.raises(InfraError, match="no object store is configured"):
            await request(shared_bus.nc, subject, _task("x" * BIG), bus_pb2.Task, timeout=5, store=object_store)
    finally:
        await server.stop()
