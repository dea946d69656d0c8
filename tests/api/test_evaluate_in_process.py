"""Evaluate answered in the api's process (cheap evaluators, small requests) agrees with a worker's answer field by
field, and everything else still goes to the workers. The worker side is a real NATS and the worker's own
responder (``Executor.evaluate_request`` under ``bus.serve_requests``), as ``evalsi-worker`` runs it."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from google.protobuf import json_format

from evalsi import bus
from evalsi.api import EvaluationHandlers, LocalEvaluation
from evalsi.api.context import CallContext
from evalsi.api.local_evaluation import DEFAULT_MAX_BYTES, DEFAULT_MAX_EVALUATIONS, runs_in_process
from evalsi.bus.natsserver import NatsServer
from evalsi.errors import BadInputError, DeadlineExceeded
from evalsi.evaluators import Pack, Registry, evaluator
from evalsi.judges.panel import JudgeSet
from evalsi.ports import free_port
from evalsi.runs.execute import Executor
from evalsi.v1alpha1 import evaluation_service_pb2_grpc
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest, EvaluateResponse
from evalsi.v1alpha1.record_pb2 import Record

try:
    from evalsi_api import main as api_main
except ImportError:  # until the package path is in the installed distribution
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "services" / "api"))
    from evalsi_api import main as api_main


@evaluator("test/slow-cheap", cheap=True, requires=["output"])
def slow_cheap(record: Record) -> bool:
    """Declared cheap, yet 30 ms a call: what the api's deadline must stop."""
    time.sleep(0.03)
    return True


def _registry() -> Registry:
    registry = Registry.from_entry_points()
    registry.add_pack(Pack("test-slow", (slow_cheap,)))
    return registry


@dataclass
class Worker:
    """Counts the requests the worker's responder answered."""

    answered: int = 0


@dataclass
class Paths:
    pooled: EvaluationHandlers  # every request to the worker, as before
    local: EvaluationHandlers  # the api as served: cheap requests answered in process
    worker: Worker


@pytest.fixture
async def paths() -> AsyncIterator[Paths]:
    registry = _registry()
    with NatsServer() as nats_server:
        connection = await bus.connect(nats_server.url, name="worker")
        worker = Worker()
        async with JudgeSet({}, cache=False) as judges:
            executor = Executor(registry, judges)

            async def answer(request: EvaluateRequest, _delivery: bus.Delivery) -> EvaluateResponse:
                worker.answered += 1
                return await executor.evaluate_request(request)

            responder = await bus.serve_requests(
                connection.nc, bus.subjects.evaluate("cpu"), bus.subjects.evaluate_queue("cpu"), answer,
                request_type=EvaluateRequest,
            )  # fmt: skip
            await connection.nc.flush()

            async def ask(request: EvaluateRequest, timeout_s: float | None) -> EvaluateResponse:
                return await bus.request(connection.nc, bus.subjects.evaluate("cpu"), request, EvaluateResponse,
                                         5.0 if timeout_s is None else timeout_s)

            try:
                yield Paths(
                    pooled=EvaluationHandlers(ask, registry=registry),
                    local=EvaluationHandlers(ask, registry=registry, local=LocalEvaluation(registry, timeout_s=5.0)),
                    worker=worker,
                )
            finally:
                await responder.stop()
                await connection.close()


def _ctx(deadline_s: float | None = None) -> CallContext:
    deadline = None if deadline_s is None else time.monotonic() + deadline_s
    return CallContext(method="Evaluate", request_id="req-1", deadline=deadline)


def _request(body: dict[str, Any]) -> EvaluateRequest:
    return json_format.ParseDict(body, EvaluateRequest())


def _without_durations(response: EvaluateResponse) -> EvaluateResponse:
    """Durations are each call's own time, the one field two answers of the same request never share."""
    for result in response.results:
        result.ClearField("duration")
    return response


SEED = [
    {"input": {"text": "Capital of France?"}, "output": {"text": "Paris"}, "reference": {"text": "Paris"}},
    {"input": {"text": "2+2?"}, "output": {"text": "5"}, "reference": {"text": "4"}},
]
EM = {"ref": "builtin/exact-match"}
# Requests that differ in what the engine does with them: samples, trials, skips, JSON-list references, params,
# aliases, several evaluators, a confidence level, clusters, a project, and message contents.
AGREEING: dict[str, dict[str, Any]] = {
    "records without ids": {"records": SEED, "evaluators": [EM]},
    "repeated ids are trials": {"records": [{**r, "id": "q"} for r in SEED], "evaluators": [EM]},
    "given trials": {
        "records": [{**r, "id": "q", "provenance": {"trial": t}} for t, r in enumerate(SEED)], "evaluators": [EM],
    },
    "a missing reference is skipped": {
        "records": [*SEED, {"id": "no-ref", "output": {"text": "x"}}], "evaluators": [EM],
    },
    "a JSON list reference": {
        "records": [{"id": "j", "output": {"text": "Lyon"}, "reference": {"json": ["Paris", "Lyon"]}}],
        "evaluators": [EM],
    },
    "params, aliases and two evaluators": {
        "records": [*SEED, {"id": "c", "output": {"text": " PARIS "}, "reference": {"text": "paris"}}],
        "evaluators": [
            {"ref": "builtin/exact-match", "alias": "strict", "params": {"normalize": False}},
            {"ref": "exact-match"},
            {"ref": "builtin/regex-match", "alias": "digits", "params": {"pattern": "[0-9]+", "mode": "fullmatch"}},
            {"ref": "regex-match", "alias": "no-paris", "params": {"pattern": "paris", "ignore_case": True,
                                                                   "negate": True}},
        ],
    },
    "a confidence level and clusters": {
        "records": [
            {"id": f"r{i}", "output": {"text": "a"}, "reference": {"text": "a" if i % 3 else "b"},
             "metadata": {"source": f"doc{i % 4}"}}
            for i in range(12)
        ],
        "evaluators": [EM],
        "summary": {"confidence": 0.9, "clusterBy": "source"},
        "project": "acme",
    },
    "message contents": {
        "records": [{"id": "m", "output": {"messages": {"messages": [{"role": "assistant", "content": "hi"}]}},
                     "reference": {"text": "hi"}}],
        "evaluators": [EM, {"ref": "regex-match", "params": {"pattern": "h."}}],
    },
}


@pytest.mark.parametrize("case", list(AGREEING))
async def test_the_api_answers_cheap_requests_itself_as_a_worker_would(paths: Paths, case: str) -> None:
    pooled = await paths.pooled.evaluate(_request(AGREEING[case]), _ctx())
    assert paths.worker.answered == 1
    local = await paths.local.evaluate(_request(AGREEING[case]), _ctx())
    assert paths.worker.answered == 1, "a cheap request reached the worker"
    assert local.results, "nothing was evaluated"
    assert _without_durations(local) == _without_durations(pooled)


async def test_the_same_bad_input_is_refused_the_same_way_on_both_paths(paths: Paths) -> None:
    twice = [{**SEED[0], "id": "q", "provenance": {"trial": 1}}] * 2
    messages = []
    for handlers in (paths.pooled, paths.local):
        with pytest.raises(BadInputError) as info:
            await handlers.evaluate(_request({"records": twice, "evaluators": [EM]}), _ctx())
        messages.append(str(info.value))
    assert "'q' with trial 1 appears twice" in messages[0] and messages[0] == messages[1]


@pytest.mark.parametrize(
    "why, body",
    [
        ("an evaluator not declared cheap", {"records": SEED, "evaluators": [EM, {"ref": "builtin/contains",
                                                                               "params": {"values": ["a"]}}]}),
        ("a bootstrap interval", {"records": SEED, "evaluators": [EM], "summary": {"interval": "bootstrap"}}),
        ("more evaluations than the bound", {"records": [{**SEED[0], "id": f"r{i}"}
                                                          for i in range(DEFAULT_MAX_EVALUATIONS + 1)],
                                              "evaluators": [EM]}),
        ("more bytes than the bound", {"records": [{"id": "big", "output": {"text": "x" * DEFAULT_MAX_BYTES},
                                                    "reference": {"text": "x"}}], "evaluators": [EM]}),
    ],
)
async def test_other_requests_go_to_the_workers(paths: Paths, why: str, body: dict[str, Any]) -> None:
    await paths.local.evaluate(_request(body), _ctx())
    assert paths.worker.answered == 1, why


def test_which_evaluators_run_in_the_api_is_their_own_declaration() -> None:
    registry = _registry()
    assert [ev.ref for ev in registry.evaluators() if runs_in_process(ev)] == [
        ev.ref for ev in registry.evaluators() if ev.cheap
    ]
    assert runs_in_process(registry.resolve("exact-match")) and runs_in_process(registry.resolve("test/slow-cheap"))
    assert not runs_in_process(registry.resolve("llm-judge")) and not runs_in_process(registry.resolve("contains"))

    @evaluator("test/cheap-judge", cheap=True, requires=["judge"])
    def cheap_judge(record: Record) -> bool:
        return True

    assert not runs_in_process(cheap_judge), "an evaluator that needs a judge reaches a provider: a worker's job"

    @evaluator("test/cheap-sandboxed", cheap=True, pool="sandbox")
    def cheap_sandboxed(record: Record) -> bool:
        return True

    assert not runs_in_process(cheap_sandboxed), "a pool is a placement: a sandbox's isolation stays on its workers"


async def test_the_callers_deadline_stops_an_answer_in_process(paths: Paths) -> None:
    records = [{"id": f"r{i}", "output": {"text": "x"}} for i in range(30)]  # 30 x 30 ms: 0.9 s unstopped
    request = _request({"records": records, "evaluators": [{"ref": "test/slow-cheap"}]})
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded, match=r"stopped at the request.s deadline of 0\.0[0-9]*s"):
        await paths.local.evaluate(request, _ctx(deadline_s=0.1))
    # Stopped at the runner's next slice after the deadline, long before the 40 calls would have ended.
    assert time.monotonic() - started < 0.6
    assert paths.worker.answered == 0
    with pytest.raises(DeadlineExceeded, match="before the evaluation started"):
        await paths.local.evaluate(request, _ctx(deadline_s=0.0))


async def test_the_event_loop_serves_others_while_a_request_is_answered_in_process(paths: Paths) -> None:
    """The runner yields between slices of cheap calls, so another caller's work is not held for the whole call."""
    records = [{"id": f"r{i}", "output": {"text": "x"}} for i in range(10)]
    request = _request({"records": records, "evaluators": [{"ref": "test/slow-cheap"}]})
    ticks: list[float] = []

    async def ticker() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0)

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    try:
        answer = await paths.local.evaluate(request, _ctx())
    finally:
        ticking.cancel()
    assert len(answer.results) == 10 and paths.worker.answered == 0
    assert len(ticks) > 3, "the loop ran nothing else while the request was answered"


async def test_a_stream_of_cheap_requests_is_answered_in_process_in_order(paths: Paths) -> None:
    passes = [False, True, False, True, False]
    requests = [
        _request({"records": [{"id": f"r{i}", "output": {"text": "a"}, "reference": {"text": "a" if ok else "b"}}],
                  "evaluators": [EM]})
        for i, ok in enumerate(passes)
    ]

    async def feed() -> AsyncIterator[EvaluateRequest]:
        for request in requests:
            yield request

    answers = [answer async for answer in paths.local.evaluate_stream(feed(), _ctx())]
    assert [a.results[0].record_id for a in answers] == [f"r{i}" for i in range(5)]
    assert [a.results[0].scores[0].passed for a in answers] == passes
    assert [a.request_id for a in answers] == [f"req-1-{i}" for i in range(5)]
    assert paths.worker.answered == 0


async def test_the_served_api_answers_cheap_evaluators_with_no_worker_running(tmp_path: Path) -> None:
    """evalsi-api as wired by its main, over a real NATS where no worker answers: exact-match still is answered
    (over gRPC and HTTP/JSON), an evaluator that is not cheap finds no responder."""
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    with NatsServer() as nats_server:
        settings = api_main.parse_settings(
            ["--http-port", str(free_port()), "--grpc-port", str(free_port()),
             "--metadata-url", f"sqlite:///{tmp_path / 'evalsi.db'}", "--objects-url", str(tmp_path / "objects"),
             "--datasets-dir", str(datasets), "--grace-period", "1", "--nats", nats_server.url],
            environ={},
        )  # fmt: skip
        stop = asyncio.Event()
        serving = asyncio.create_task(api_main.serve(settings, stop=stop))
        try:
            async with aiohttp.ClientSession(f"http://127.0.0.1:{settings.server.http_port}") as http:
                await _ready(http, serving)
                body = {"records": SEED, "evaluators": [EM]}
                async with http.post("/v1alpha1/evaluate", json=body) as response:
                    assert response.status == 200, await response.text()
                    answered = json_format.Parse(await response.text(), EvaluateResponse())
                assert sorted(r.scores[0].passed for r in answered.results) == [False, True]
                async with grpc.aio.insecure_channel(f"127.0.0.1:{settings.server.grpc_port}") as channel:
                    stub = evaluation_service_pb2_grpc.EvaluationServiceStub(channel)
                    answer = await stub.Evaluate(_request({"records": SEED, "evaluators": [EM]}), timeout=10)
                    assert [s.metric for s in answer.summaries] == ["exact-match"] and answer.summaries[0].n == 2
                    pooled = _request({"records": SEED,
                                       "evaluators": [{"ref": "contains", "params": {"values": ["a"]}}]})
                    with pytest.raises(grpc.aio.AioRpcError) as info:
                        await stub.Evaluate(pooled, timeout=10)
                    assert info.value.code() == grpc.StatusCode.UNAVAILABLE and "no responder" in info.value.details()
                async with http.get("/metrics") as response:
                    exposed = await response.text()
                assert 'evalsi_api_evaluate_routed_total{to="api"} 2.0' in exposed
                assert 'evalsi_api_evaluate_routed_total{to="worker"} 1.0' in exposed
        finally:
            stop.set()
            await asyncio.wait_for(serving, 10)


async def _ready(session: aiohttp.ClientSession, serving: asyncio.Task[Any]) -> None:
    for _ in range(400):
        if serving.done():
            serving.result()
        try:
            async with session.get("/readyz") as response:
                if response.status == 200:
                    return
        except aiohttp.ClientConnectionError:
            pass
        await asyncio.sleep(0.05)
    raise AssertionError("the api never became ready")
