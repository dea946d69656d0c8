"""Synchronous Evaluate over core request/reply: queue groups, error headers mapped to exceptions, timeouts."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from evalsi.bus import BusConnection, Delivery, Permanent, RemoteError, request, serve_requests
from evalsi.bus.v1alpha1 import bus_pb2
from evalsi.errors import BadInputError, InfraError


async def test_two_responders_in_a_queue_group_answer_each_request_once(shared_bus: BusConnection, unique: str) -> None:
    subject, queue = f"evaluate.cpu-{unique}", f"evaluate-cpu-{unique}"
    answered: Counter[str] = Counter()

    def responder(name: str):
        async def handle(control: bus_pb2.RunControl, delivery: Delivery) -> bus_pb2.TaskResult:
            answered[name] += 1
            return bus_pb2.TaskResult(run_id=control.run_id, worker=name, status=bus_pb2.TASK_STATUS_DONE)

        return handle

    a = await serve_requests(shared_bus.nc, subject, queue, responder("a"), request_type=bus_pb2.RunControl)
    b = await serve_requests(shared_bus.nc, subject, queue, responder("b"), request_type=bus_pb2.RunControl)
    try:
        replies = await asyncio.gather(
            *(request(shared_bus.nc, subject, bus_pb2.RunControl(run_id=f"r{i}"), bus_pb2.TaskResult, timeout=2)
              for i in range(40))
        )  # fmt: skip
    finally:
        await a.stop()
        await b.stop()
    assert [r.run_id for r in replies] == [f"r{i}" for i in range(40)]
    assert sum(answered.values()) == 40  # each request answered exactly once
    assert set(answered) == {"a", "b"}  # and spread over the group
    assert Counter(r.worker for r in replies) == answered


@pytest.mark.parametrize(
    ("raised", "expected", "text"),
    [
        (BadInputError("records[0].input: expected text"), BadInputError, "records[0].input: expected text"),
        (Permanent("no such evaluator"), BadInputError, "no such evaluator"),
        (InfraError("judge provider 503 after retries"), InfraError, "judge provider 503 after retries"),
        (ZeroDivisionError("division by zero"), RemoteError, "internal error in the responder: division by zero"),
    ],
)
async def test_errors_travel_as_headers_and_come_back_as_exceptions(
    shared_bus: BusConnection, unique: str, raised: Exception, expected: type[Exception], text: str
) -> None:
    subject = f"evaluate.judge-{unique}"

    async def handle(control: bus_pb2.RunControl, delivery: Delivery) -> bus_pb2.TaskResult:
        raise raised

    server = await serve_requests(shared_bus.nc, subject, "q", handle, request_type=bus_pb2.RunControl)
    try:
        with pytest.raises(expected) as info:
            await request(shared_bus.nc, subject, bus_pb2.RunControl(run_id="r"), bus_pb2.TaskResult, timeout=2)
    finally:
        await server.stop()
    assert text in str(info.value)
    if expected is RemoteError:
        assert isinstance(info.value, InfraError)  # a crash in our code is an infrastructure error


async def test_a_request_of_the_wrong_type_is_bad_input(shared_bus: BusConnection, unique: str) -> None:
    subject = f"evaluate.gpu-{unique}"

    async def handle(control: bus_pb2.RunControl, delivery: Delivery) -> bus_pb2.TaskResult:
        raise AssertionError("never called")

    server = await serve_requests(shared_bus.nc, subject, "q", handle, request_type=bus_pb2.RunControl)
    try:
        with pytest.raises(BadInputError, match=r"message is evalsi\.bus\.v1alpha1\.Task, expected"):
            await request(shared_bus.nc, subject, bus_pb2.Task(key="k"), bus_pb2.TaskResult, timeout=2)
    finally:
        await server.stop()


async def test_timeout_and_no_responders_are_infra_errors(shared_bus: BusConnection, unique: str) -> None:
    subject = f"evaluate.sandbox-{unique}"
    with pytest.raises(InfraError, match="no responder"):
        await request(shared_bus.nc, subject, bus_pb2.RunControl(run_id="r"), bus_pb2.TaskResult, timeout=1)

    # A responder that never answers (no deadline handling: a raw subscription).
    silent = await shared_bus.nc.subscribe(subject, queue="q")
    try:
        with pytest.raises(InfraError, match=r"no answer on .* within 0\.2s"):
            await request(shared_bus.nc, subject, bus_pb2.RunControl(run_id="r"), bus_pb2.TaskResult, timeout=0.2)
    finally:
        await silent.unsubscribe()


async def test_the_trace_context_reaches_the_handler(shared_bus: BusConnection, unique: str) -> None:
    subject = f"evaluate.harness-{unique}"
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    seen: list[str | None] = []

    async def handle(control: bus_pb2.RunControl, delivery: Delivery) -> bus_pb2.TaskResult:
        seen.append(delivery.traceparent)
        return bus_pb2.TaskResult(run_id=control.run_id)

    server = await serve_requests(shared_bus.nc, subject, "q", handle, request_type=bus_pb2.RunControl)
    try:
        reply = await request(shared_bus.nc, subject, bus_pb2.RunControl(run_id="r"), bus_pb2.TaskResult,
                              traceparent=traceparent)  # fmt: skip
    finally:
        await server.stop()
    assert reply.run_id == "r" and seen == [traceparent]
