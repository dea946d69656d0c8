"""POST /v1alpha1/evaluate counts records as samples the way datasets do: each record is its own sample unless
ids repeat or a trial is given. The wired api service, a real NATS and the worker's own Evaluate answer; exact-match
is declared cheap, so the api answers it with the worker's engine (test_evaluate_in_process.py holds both equal)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from google.protobuf import json_format

from evalsi import bus
from evalsi.bus.natsserver import NatsServer
from evalsi.evaluators import Output, Pack, Registry, evaluator
from evalsi.judges.panel import JudgeSet
from evalsi.ports import free_port
from evalsi.projects import PROJECT_RULE
from evalsi.runs.execute import Executor
from evalsi.stats import DEFAULT_BOOTSTRAP_RESAMPLES
from evalsi.v1alpha1 import evaluation_service_pb2_grpc
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest, EvaluateResponse
from evalsi.v1alpha1.score_pb2 import MetricSummary

ROOT = Path(__file__).resolve().parents[2]
try:
    from evalsi_api import main as api_main
except ImportError:  # until the package path is in the installed distribution
    sys.path.insert(0, str(ROOT / "services" / "api"))
    from evalsi_api import main as api_main

# The seed's own example (section "What 'single door' looks like"), with the deterministic evaluator only:
# two records, no ids.
SEED_RECORDS = [
    {"input": {"text": "Capital of France?"}, "output": {"text": "Paris"}, "reference": {"text": "Paris"}},
    {"input": {"text": "2+2?"}, "output": {"text": "5"}, "reference": {"text": "4"}},
]
EXACT_MATCH = [{"ref": "builtin/exact-match"}]



@dataclass
class Served:
    http: aiohttp.ClientSession
    grpc_target: str


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    """The api service over a real NATS, with the worker's Evaluate responder (Executor.evaluate_request)."""
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    with NatsServer() as nats_server:
        settings = api_main.parse_settings(
            [
                "--http-port", str(free_port()),
                "--grpc-port", str(free_port()),
                "--metadata-url", f"sqlite:///{tmp_path / 'evalsi.db'}",
                "--objects-url", str(tmp_path / "objects"),
                "--datasets-dir", str(datasets),
                "--grace-period", "1",
                "--nats", nats_server.url,
            ],
            environ={},
        )  # fmt: skip
        connection = await bus.connect(nats_server.url, name="worker")
        async with JudgeSet({}, cache=False) as judges:
            executor = Executor(Registry.from_entry_points(), judges)

            async def answer(request: EvaluateRequest, _delivery: bus.Delivery) -> EvaluateResponse:
                return await executor.evaluate_request(request)

            responder = await bus.serve_requests(
                connection.nc, bus.subjects.evaluate("cpu"), bus.subjects.evaluate_queue("cpu"), answer,
                request_type=EvaluateRequest,
            )  # fmt: skip
            await connection.nc.flush()
            stop = asyncio.Event()
            serving = asyncio.create_task(api_main.serve(settings, stop=stop))
            base = f"http://127.0.0.1:{settings.server.http_port}"
            try:
                async with aiohttp.ClientSession(base) as session:
                    await _ready(session, serving)
                    yield Served(session, f"127.0.0.1:{settings.server.grpc_port}")
            finally:
                stop.set()
                await asyncio.wait_for(serving, 10)
                await responder.stop()
                await connection.close()


async def _ready(session: aiohttp.ClientSession, serving: asyncio.Task[Any]) -> None:
    for _ in range(200):
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


async def evaluate(http: aiohttp.ClientSession, records: list[dict[str, Any]]) -> EvaluateResponse:
    async with http.post("/v1alpha1/evaluate", json={"records": records, "evaluators": EXACT_MATCH}) as response:
        text = await response.text()
    assert response.status == 200, text
    return json_format.Parse(text, EvaluateResponse())


def summaries(answer: EvaluateResponse) -> dict[str, MetricSummary]:
    return {s.metric: s for s in answer.summaries}


async def test_records_without_ids_are_separate_samples(served: Served) -> None:
    answer = await evaluate(served.http, SEED_RECORDS)
    by_metric = summaries(answer)
    assert list(by_metric) == ["exact-match"]  # no pass@2 / pass^2 rows: nothing was a trial of anything
    (exact,) = by_metric.values()
    assert exact.n == 2 and exact.mean == 0.5
    # Two samples give an interval (Wilson on 1 of 2), which one pooled sample never could.
    assert 0 < exact.ci.low < 0.5 < exact.ci.high < 1
    ids = [r.record_id for r in answer.results]
    assert len(set(ids)) == 2 and all(ids)
    assert sorted(r.scores[0].passed for r in answer.results) == [False, True]


async def test_repeated_ids_or_given_trials_are_trials_of_one_sample(served: Served) -> None:
    http = served.http
    repeated = [{**record, "id": "q"} for record in SEED_RECORDS]
    by_metric = summaries(await evaluate(http, repeated))
    assert by_metric["exact-match.pass@2"].mean == 1.0 and by_metric["exact-match.pass^2"].mean == 0.0
    trials = [{**record, "id": "q", "provenance": {"trial": trial}} for trial, record in enumerate(SEED_RECORDS)]
    assert summaries(await evaluate(http, trials)).keys() == by_metric.keys()
    twice = [{**SEED_RECORDS[0], "id": "q", "provenance": {"trial": 1}}] * 2
    async with http.post("/v1alpha1/evaluate", json={"records": twice, "evaluators": EXACT_MATCH}) as response:
        refused = await response.json()
    assert response.status == 400 and "'q' with trial 1 appears twice" in refused["message"]


async def test_a_bad_project_is_refused_over_both_transports_naming_the_rule(served: Served) -> None:
    body = {"records": SEED_RECORDS, "evaluators": EXACT_MATCH, "project": "acme.prod"}
    async with served.http.post("/v1alpha1/evaluate", json=body) as response:
        refused = await response.json()
    assert response.status == 400 and refused["message"] == (
        f"project: 'acme.prod' is not a valid project name ({PROJECT_RULE})"
    )
    request = json_format.ParseDict({"records": SEED_RECORDS, "evaluators": EXACT_MATCH}, EvaluateRequest())
    async with grpc.aio.insecure_channel(served.grpc_target) as channel:
        stub = evaluation_service_pb2_grpc.EvaluationServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Evaluate(request, metadata=(("x-evalsi-project", "acme.prod"),))
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert info.value.details() == (
            f"x-evalsi-project header: 'acme.prod' is not a valid project name ({PROJECT_RULE})"
        )
        answered = await stub.Evaluate(request, metadata=(("x-evalsi-project", "acme-prod"),))
    assert [s.metric for s in answered.summaries] == ["exact-match"]


async def test_an_evaluates_dataset_scope_bootstrap_follows_its_summary() -> None:
    """Resamples, level and seed of a dataset-scope metric come from the request's summary, as in a run."""

    @evaluator(
        "test/accuracy", scope="dataset", requires=["output", "reference"],
        outputs=[Output("accuracy", "number", min=0, max=1)],
        mapper=lambda record: record.output.text == record.reference.text,
    )  # fmt: skip
    def accuracy(matches: list[bool]) -> float:
        return sum(matches) / len(matches)

    rows = [{"output": {"text": "a"}, "reference": {"text": "a" if i % 3 else "b"}} for i in range(30)]
    async with JudgeSet({}, cache=False) as judges:
        executor = Executor(Registry([Pack("test", (accuracy,))]), judges)

        async def resampled(summary: dict[str, Any]) -> dict[str, float]:
            request = json_format.ParseDict(
                {"records": rows, "evaluators": [{"ref": "test/accuracy"}], "summary": summary}, EvaluateRequest()
            )
            (result,) = (await executor.evaluate_request(request)).results
            return {key: result.scores[0].metadata[key].number_value for key in ("resamples", "ci_low", "ci_high")}

        default, asked = await resampled({}), await resampled({"bootstrapResamples": 300, "confidence": 0.5})
    assert default["resamples"] == DEFAULT_BOOTSTRAP_RESAMPLES and asked["resamples"] == 300
    assert default["ci_low"] < asked["ci_low"] <= asked["ci_high"] < default["ci_high"]  # a 50% interval is narrower
