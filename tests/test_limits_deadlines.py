"""Deadlines where the work happens: per-call deadlines in the runner (sync calls abandoned, async calls
cancelled, an overdue call's late answer never recorded) and request deadlines on the bus (a real nats-server:
the handler is cancelled, the caller gets DeadlineExceeded, the responder's slot is free again)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator

import pytest

from evalsi.bus import connect, request, serve_requests
from evalsi.bus.natsserver import NatsServer
from evalsi.bus.v1alpha1 import bus_pb2
from evalsi.errors import DeadlineExceeded, InfraError
from evalsi.evaluators import EvalContext, Output, evaluator
from evalsi.evaluators.runner import RunnerOptions, run_evaluators
from evalsi.records import make_record
from evalsi.v1alpha1.score_pb2 import ERROR_KIND_EVALUATOR, OUTCOME_ERROR, OUTCOME_SCORED

HANG_S = 3.0
released = threading.Event()  # lets the hung sync calls of a test end once it is over


@evaluator("test/hang-on", version="1.0.0", requires=["output"])
def hang_on(record, *, word: str = "hang") -> bool:  # type: ignore[no-untyped-def]
    """Blocks (uninterruptibly, as CPU-bound code would) on outputs equal to ``word``."""
    if record.output.text == word:
        released.wait(HANG_S)
    return True


@evaluator("test/hang-on-async", version="1.0.0", requires=["output"])
async def hang_on_async(record, *, word: str = "hang") -> bool:  # type: ignore[no-untyped-def]
    if record.output.text == word:
        await asyncio.sleep(HANG_S)
    return True


@evaluator("test/hang-in-session", version="1.0.0", scope="session", outputs=[Output("passed")])
def hang_in_session(records) -> bool:  # type: ignore[no-untyped-def]
    if any(r.output.text == "hang" for r in records):
        released.wait(HANG_S)
    return True


@pytest.fixture(autouse=True)
async def release_hung_calls() -> AsyncIterator[None]:
    # Async, so it runs before the test's event loop closes (closing waits for the executor's threads).
    released.clear()
    yield
    released.set()


RECORDS = [make_record(id=f"r{i}", output=text) for i, text in enumerate(["ok", "hang", "ok", "hang", "ok"])]


async def evaluate(ev, records=RECORDS, timeout_s: float | None = 0.3):  # type: ignore[no-untyped-def]
    options = RunnerOptions(call_timeout_s=timeout_s, chunk_size=16)
    return await run_evaluators(records, [ev.bind()], lambda _: EvalContext(), options=options)


def outcomes(results) -> list[tuple[str, int, int]]:  # type: ignore[no-untyped-def]
    return [(r.record_id, r.outcome, r.error_kind) for r in results]


EXPECTED = [
    ("r0", OUTCOME_SCORED, 0),
    ("r1", OUTCOME_ERROR, ERROR_KIND_EVALUATOR),
    ("r2", OUTCOME_SCORED, 0),
    ("r3", OUTCOME_ERROR, ERROR_KIND_EVALUATOR),
    ("r4", OUTCOME_SCORED, 0),
]


@pytest.mark.parametrize("ev", [hang_on, hang_on_async], ids=["sync", "async"])
async def test_an_overdue_call_is_an_evaluator_error_and_the_rest_of_the_chunk_is_evaluated(ev) -> None:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    results = await evaluate(ev)
    assert time.monotonic() - started < 2 * 0.3 + 1.0  # two overdue calls of 0.3 s, never the full 3 s hang
    assert outcomes(results) == EXPECTED
    for result in results:
        if result.outcome == OUTCOME_ERROR:
            assert result.reason == "deadline: the evaluator call did not finish within 0.3s and was abandoned"
            assert not result.scores


async def test_an_abandoned_call_that_returns_late_changes_no_result() -> None:
    results = await evaluate(hang_on)
    snapshot = [r.SerializeToString() for r in results]
    released.set()  # the abandoned threads return now and must not write into what was reported
    await asyncio.sleep(0.2)
    assert [r.SerializeToString() for r in results] == snapshot


async def test_session_scope_calls_have_the_deadline_too() -> None:
    records = [make_record(id="a", output="hang"), make_record(id="b", output="ok")]
    records[0].provenance.session_id = "s1"
    records[1].provenance.session_id = "s2"
    results = await evaluate(hang_in_session, records)
    assert outcomes(results) == [("s1", OUTCOME_ERROR, ERROR_KIND_EVALUATOR), ("s2", OUTCOME_SCORED, 0)]


async def test_without_a_deadline_calls_run_to_the_end() -> None:
    released.set()
    results = await evaluate(hang_on, timeout_s=None)
    assert [r.outcome for r in results] == [OUTCOME_SCORED] * 5


async def test_cancelling_the_evaluation_stops_its_thread_after_the_call_in_progress() -> None:
    calls: list[str] = []

    @evaluator("test/count", version="1.0.0", requires=["output"])
    def count(record) -> bool:  # type: ignore[no-untyped-def]
        calls.append(record.id)
        released.wait(HANG_S)
        return True

    records = [make_record(id=f"r{i}", output="x") for i in range(5)]
    task = asyncio.create_task(evaluate(count, records, timeout_s=None))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    released.set()
    await asyncio.sleep(0.2)
    assert calls == ["r0"]  # the call in progress ended; no further call started


# --- the bus ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nats_url() -> Iterator[str]:
    with NatsServer() as server:
        yield server.url


@pytest.fixture
async def nc(nats_url: str) -> AsyncIterator:  # type: ignore[type-arg]
    connection = await connect(nats_url, name="deadlines")
    yield connection.nc
    await connection.close()


async def test_a_request_past_its_deadline_is_cancelled_in_the_responder_and_frees_its_slot(nc) -> None:  # type: ignore[no-untyped-def]
    cancelled = asyncio.Event()

    async def handle(control: bus_pb2.RunControl, _delivery) -> bus_pb2.TaskResult:  # type: ignore[no-untyped-def]
        if control.run_id == "slow":
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                raise
        return bus_pb2.TaskResult(run_id=control.run_id)

    # One slot: had the slow call kept it, the next request could not be answered at all.
    server = await serve_requests(nc, "deadline.test", "q", handle, request_type=bus_pb2.RunControl, concurrency=1)
    try:
        started = time.monotonic()
        with pytest.raises(DeadlineExceeded, match=r"deadline\.test: stopped at the request's deadline of 0\.3s"):
            await request(nc, "deadline.test", bus_pb2.RunControl(run_id="slow"), bus_pb2.TaskResult, timeout=0.3)
        assert time.monotonic() - started < 1.0
        assert cancelled.is_set()
        started = time.monotonic()
        answer = await request(nc, "deadline.test", bus_pb2.RunControl(run_id="next"), bus_pb2.TaskResult, timeout=2)
        assert answer.run_id == "next"
        assert time.monotonic() - started < 0.5
    finally:
        await server.stop()


async def test_a_deadline_that_already_passed_sends_nothing(nc) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(DeadlineExceeded, match="the deadline passed before the request was sent"):
        await request(nc, "deadline.none", bus_pb2.RunControl(run_id="r"), bus_pb2.TaskResult, timeout=0)


async def test_a_deadline_header_that_is_not_seconds_is_refused(nc) -> None:  # type: ignore[no-untyped-def]
    async def handle(control: bus_pb2.RunControl, _delivery) -> bus_pb2.TaskResult:  # type: ignore[no-untyped-def]
        return bus_pb2.TaskResult()

    server = await serve_requests(nc, "deadline.bad", "q", handle, request_type=bus_pb2.RunControl)
    try:
        reply = await nc.request("deadline.bad", b"", headers={"Evalsi-Deadline": "soon"}, timeout=2)
        assert reply.headers["Evalsi-Error-Kind"] == "bad_input"
        assert reply.headers["Evalsi-Error"] == "Evalsi-Deadline header: expected seconds, got 'soon'"
    finally:
        await server.stop()
    assert not issubclass(DeadlineExceeded, InfraError)  # a passed deadline is a 504, not a 503
