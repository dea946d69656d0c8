"""The real transports: a grpc.aio server and an aiohttp server on free loopback ports, one handler table."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import aiohttp
import grpc
import pytest
from google.protobuf import json_format
from google.rpc import status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from evalsi.api import ApiServer, ServerConfig
from evalsi.errors import BadInputError
from evalsi.v1alpha1 import catalog_service_pb2_grpc, evaluation_service_pb2_grpc, run_service_pb2_grpc
from evalsi.v1alpha1.catalog_service_pb2 import ListEvaluatorsRequest, ListEvaluatorsResponse
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest, EvaluateResponse
from evalsi.v1alpha1.run_pb2 import RUN_STATE_RUNNING, RUN_STATE_SUCCEEDED, Run
from evalsi.v1alpha1.run_service_pb2 import (
    RUN_EVENT_TYPE_PROGRESS,
    RUN_EVENT_TYPE_STATE,
    RUN_EVENT_TYPE_SUMMARY,
    GetRunRequest,
    RunEvent,
    WatchRunRequest,
)

if TYPE_CHECKING:
    from api_doubles import Api

EVALUATE_BODY = {
    "records": [
        {"id": "a", "output": {"text": "Paris"}, "reference": {"text": "Paris"}},
        {"id": "b", "output": {"text": "Lyon"}, "reference": {"text": "Paris"}},
    ],
    "evaluators": [{"ref": "builtin/exact-match@1.0.0"}],
    "requestId": "fixed",
}
RUN_BODY = {
    "run": {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "nightly"},
        "spec": {"dataset": {"path": "qa.jsonl"}, "evaluators": [{"ref": "exact-match"}]},
    }
}


@pytest.fixture
async def served(api: Api) -> AsyncIterator[Api]:
    await api.start(max_request_bytes=64 * 1024)
    yield api


@pytest.fixture
async def http(served: Api) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(served.http) as session:
        yield session


@pytest.fixture
async def channel(served: Api) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(served.grpc_target) as chan:
        yield chan


def project(name: str) -> tuple[tuple[str, str], ...]:
    return (("x-evalsi-project", name),)


async def grpc_error(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


# --- one handler, two transports ---


async def test_create_then_get_gives_the_same_run_over_http_and_grpc(
    served: Api, http: aiohttp.ClientSession, channel: grpc.aio.Channel
) -> None:
    async with http.post("/v1alpha1/runs", json=RUN_BODY, headers={"x-evalsi-project": "team-a"}) as response:
        assert response.status == 200, await response.text()
        created = json_format.Parse(await response.text(), Run())
    assert created.project == "team-a" and created.id.startswith("run-")
    async with http.get(f"/v1alpha1/runs/{created.id}", headers={"x-evalsi-project": "team-a"}) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("application/json")
        over_http = json_format.Parse(await response.text(), Run())
    over_grpc = await run_service_pb2_grpc.RunServiceStub(channel).GetRun(
        GetRunRequest(id=created.id), metadata=project("team-a")
    )
    assert over_http == over_grpc == created


async def test_evaluate_and_catalog_are_identical_over_both_transports(
    http: aiohttp.ClientSession, channel: grpc.aio.Channel
) -> None:
    async with http.post("/v1alpha1/evaluate", json=EVALUATE_BODY) as response:
        assert response.status == 200, await response.text()
        over_http = json_format.Parse(await response.text(), EvaluateResponse())
    over_grpc = await evaluation_service_pb2_grpc.EvaluationServiceStub(channel).Evaluate(
        json_format.ParseDict(EVALUATE_BODY, EvaluateRequest())
    )
    assert over_http == over_grpc
    assert [s.passed for r in over_grpc.results for s in r.scores] == [True, False]
    async with http.get("/v1alpha1/evaluators", params={"pack": "core"}) as response:
        catalog_http = json_format.Parse(await response.text(), ListEvaluatorsResponse())
    catalog_grpc = await catalog_service_pb2_grpc.CatalogServiceStub(channel).ListEvaluators(
        ListEvaluatorsRequest(pack="core")
    )
    assert catalog_http == catalog_grpc and catalog_grpc.evaluators


async def test_grpc_answers_echo_the_request_id_unary_in_trailers_streams_in_headers(
    served: Api, channel: grpc.aio.Channel
) -> None:
    evaluate = evaluation_service_pb2_grpc.EvaluationServiceStub(channel).Evaluate(
        json_format.ParseDict(EVALUATE_BODY, EvaluateRequest()), metadata=(("x-request-id", "req-u"),)
    )
    assert [s.passed for r in (await evaluate).results for s in r.scores] == [True, False]
    # A unary answer's id rides with its status, as an error's does: no batch of initial metadata of its own.
    assert ("x-request-id", "req-u") in tuple(await evaluate.trailing_metadata())
    assert "x-request-id" not in dict(await evaluate.initial_metadata())
    generated = catalog_service_pb2_grpc.CatalogServiceStub(channel).ListEvaluators(ListEvaluatorsRequest())
    await generated
    assert dict(await generated.trailing_metadata())["x-request-id"]  # generated when the caller sent none

    await served.store.create_run(Run(id="run-id", project="default", state=RUN_STATE_SUCCEEDED))
    stream = run_service_pb2_grpc.RunServiceStub(channel).WatchRun(
        WatchRunRequest(id="run-id"), metadata=(("x-request-id", "req-s"),)
    )
    assert dict(await stream.initial_metadata())["x-request-id"] == "req-s"  # before the first event
    assert [event.state async for event in stream] == [RUN_STATE_SUCCEEDED]


async def test_not_found_is_404_and_NOT_FOUND_with_the_same_message(
    http: aiohttp.ClientSession, channel: grpc.aio.Channel
) -> None:
    async with http.get("/v1alpha1/runs/run-nope", headers={"x-request-id": "req-42"}) as response:
        assert response.status == 404
        assert response.headers["x-request-id"] == "req-42"
        body = await response.json()
    assert body["code"] == grpc.StatusCode.NOT_FOUND.value[0]
    assert body["message"] == "id: run 'run-nope' not found in project 'default'"
    assert body["details"] == [
        {"@type": "type.googleapis.com/google.rpc.RequestInfo", "requestId": "req-42"},
    ]
    error = await grpc_error(run_service_pb2_grpc.RunServiceStub(channel).GetRun(GetRunRequest(id="run-nope")))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert error.details() == body["message"]


async def test_bad_input_is_400_and_INVALID_ARGUMENT_with_the_field_path(
    http: aiohttp.ClientSession, channel: grpc.aio.Channel
) -> None:
    async with http.post("/v1alpha1/evaluate", json={"evaluators": [{"ref": "exact-match"}]}) as response:
        assert response.status == 400
        body = await response.json()
    assert body["code"] == 3
    assert body["message"] == "records: at least one record is required"
    violation = body["details"][0]
    assert violation["@type"] == "type.googleapis.com/google.rpc.BadRequest"
    assert violation["fieldViolations"] == [{"field": "records", "description": body["message"]}]
    call = evaluation_service_pb2_grpc.EvaluationServiceStub(channel).Evaluate(
        EvaluateRequest(evaluators=[{"ref": "exact-match"}])
    )
    error = await grpc_error(call)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details() == body["message"]
    trailers = dict(error.trailing_metadata())
    rich = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    assert rich.code == 3 and rich.message == body["message"] and len(rich.details) == 2


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"records": [', "request body: malformed JSON at line 1 column 14"),
        (b'{"records": [{"id": "a", "outptu": {}}]}', "records[0].outptu: unknown field"),
        (b'{"records": [{"id": 7}]}', "records[0].id: expected a string, got 7"),
        (b'{"store": "please"}', 'store: expected true or false, got "please"'),
    ],
)
async def test_malformed_json_bodies_are_400_naming_the_field(
    http: aiohttp.ClientSession, body: bytes, message: str
) -> None:
    async with http.post(
        "/v1alpha1/evaluate", data=body, headers={"Content-Type": "application/json"}
    ) as response:
        assert response.status == 400
        assert (await response.json())["message"].startswith(message)


async def test_malformed_protobuf_is_INVALID_ARGUMENT_naming_the_type(channel: grpc.aio.Channel) -> None:
    raw = channel.unary_unary("/evalsi.v1alpha1.EvaluationService/Evaluate")
    error = await grpc_error(raw(b"\x0a\xff\xff\xff"))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "malformed protobuf, not a evalsi.v1alpha1.EvaluateRequest" in error.details()


async def test_an_unexpected_error_is_500_with_a_request_id_and_no_internals(
    served: Api, http: aiohttp.ClientSession, channel: grpc.aio.Channel, capsys: pytest.CaptureFixture[str]
) -> None:
    async def broken(project: str, run_id: str) -> Run:
        raise RuntimeError("database password is hunter2")

    served.store.get_run = broken
    async with http.get("/v1alpha1/runs/run-1", headers={"x-request-id": "req-7"}) as response:
        assert response.status == 500
        body = await response.json()
    assert body["code"] == 13
    assert body["message"] == "internal error (request id req-7); the server log has the details"
    assert "hunter2" not in json.dumps(body)
    error = await grpc_error(run_service_pb2_grpc.RunServiceStub(channel).GetRun(GetRunRequest(id="run-1")))
    assert error.code() == grpc.StatusCode.INTERNAL and "hunter2" not in error.details()
    assert "hunter2" in capsys.readouterr().out  # logged, with the traceback, for the operator


async def test_infrastructure_failures_are_503_UNAVAILABLE(served: Api, http: aiohttp.ClientSession) -> None:
    async def unreachable(request: EvaluateRequest, timeout_s: float | None) -> EvaluateResponse:
        raise TimeoutError("no worker answered")

    served.evaluation._evaluate = unreachable
    async with http.post("/v1alpha1/evaluate", json=EVALUATE_BODY) as response:
        assert response.status == 503
        assert (await response.json())["code"] == 14


# --- HTTP specifics ---


async def test_unknown_routes_are_404_and_wrong_methods_405(http: aiohttp.ClientSession) -> None:
    async with http.get("/v1alpha1/nothing-here") as response:
        assert response.status == 404
        assert (await response.json())["message"].startswith("no route for GET /v1alpha1/nothing-here")
    async with http.delete("/v1alpha1/runs/run-1") as response:
        assert response.status == 405
        assert response.headers["Allow"] == "GET"
    async with http.get("/v1alpha1/evaluate") as response:
        assert response.status == 405
        assert response.headers["Allow"] == "POST"


async def test_oversize_bodies_are_413_and_oversize_messages_RESOURCE_EXHAUSTED(
    http: aiohttp.ClientSession, channel: grpc.aio.Channel
) -> None:
    big = {**EVALUATE_BODY, "records": [{"id": "x", "input": {"text": "y" * 70_000}}]}
    async with http.post("/v1alpha1/evaluate", json=big) as response:
        assert response.status == 413
        body = await response.json()
    assert body["code"] == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
    assert "larger than the limit of 65536 bytes" in body["message"]

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: the limit still holds
        yield json.dumps(big).encode()

    async with http.post("/v1alpha1/evaluate", data=chunks()) as response:
        assert response.status == 413
    request = json_format.ParseDict(big, EvaluateRequest())
    error = await grpc_error(evaluation_service_pb2_grpc.EvaluationServiceStub(channel).Evaluate(request))
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_binary_protobuf_bodies_are_refused_and_unlabelled_json_accepted(http: aiohttp.ClientSession) -> None:
    headers = {"Content-Type": "application/x-protobuf"}
    async with http.post("/v1alpha1/evaluate", data=b"\x0a\x00", headers=headers) as response:
        assert response.status == 415
        assert "send application/json" in (await response.json())["message"]
    form = {"Content-Type": "application/x-www-form-urlencoded"}  # what curl -d sends
    async with http.post("/v1alpha1/evaluate", data=json.dumps(EVALUATE_BODY), headers=form) as response:
        assert response.status == 200


async def test_project_header_isolates_runs_and_is_checked(served: Api, http: aiohttp.ClientSession) -> None:
    async with http.post("/v1alpha1/runs", json=RUN_BODY, headers={"x-evalsi-project": "team-a"}) as response:
        run_id = (await response.json())["id"]
    async with http.get(f"/v1alpha1/runs/{run_id}", headers={"x-evalsi-project": "team-b"}) as response:
        assert response.status == 404
    async with http.get("/v1alpha1/runs", headers={"x-evalsi-project": "team-b"}) as response:
        assert await response.json() == {}
    async with http.get("/v1alpha1/runs", params={"project": "team-a"}) as response:
        assert [r["id"] for r in (await response.json())["runs"]] == [run_id]
    async with http.get("/v1alpha1/runs", headers={"x-evalsi-project": "a.b"}) as response:
        assert response.status == 400
        assert (await response.json())["message"].startswith("x-evalsi-project header: 'a.b' is not a valid")


async def test_query_parameters_reach_the_handler(served: Api, http: aiohttp.ClientSession) -> None:
    for index, state in enumerate([RUN_STATE_RUNNING, RUN_STATE_SUCCEEDED, RUN_STATE_RUNNING]):
        await served.store.create_run(Run(id=f"run-{index}", project="default", name=f"n{index}", state=state))
    params = [("state", "running"), ("pageSize", "1")]
    async with http.get("/v1alpha1/runs", params=params) as response:
        page = await response.json()
    assert [r["id"] for r in page["runs"]] == ["run-0"] and page["nextPageToken"]
    async with http.get("/v1alpha1/runs", params=[*params, ("pageToken", page["nextPageToken"])]) as response:
        assert [r["id"] for r in (await response.json())["runs"]] == ["run-2"]


async def test_a_passed_deadline_is_504(served: Api, http: aiohttp.ClientSession) -> None:
    served.bus.evaluate_delay["fixed"] = 1.0
    headers = {"x-evalsi-timeout": "0.05"}
    async with http.post("/v1alpha1/evaluate", json=EVALUATE_BODY, headers=headers) as response:
        assert response.status == 504
        assert (await response.json())["code"] == grpc.StatusCode.DEADLINE_EXCEEDED.value[0]
    async with http.post("/v1alpha1/evaluate", json=EVALUATE_BODY, headers={"x-evalsi-timeout": "soon"}) as response:
        assert response.status == 400


async def test_a_grpc_deadline_is_DEADLINE_EXCEEDED_and_counted_so(
    served: Api, http: aiohttp.ClientSession, channel: grpc.aio.Channel
) -> None:
    served.bus.evaluate_delay["fixed"] = 1.0
    stub = evaluation_service_pb2_grpc.EvaluationServiceStub(channel)
    error = await grpc_error(stub.Evaluate(json_format.ParseDict(EVALUATE_BODY, EvaluateRequest()), timeout=0.05))
    assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    rpc = 'rpc="evalsi.v1alpha1.EvaluationService/Evaluate",transport="grpc"'
    for _ in range(100):  # the server notices the cancellation just after the client gives up
        async with http.get("/metrics") as response:
            if f'evalsi_api_requests_total{{code="DEADLINE_EXCEEDED",{rpc}}} 1.0' in await response.text():
                return
        await asyncio.sleep(0.02)
    raise AssertionError("the deadline was not counted")


# --- streams ---


async def _publish_when_watched(api: Api, run_id: str, events: list[RunEvent]) -> None:
    while api.bus.watchers(run_id) == 0:
        await asyncio.sleep(0.005)
    for event in events:
        api.bus.publish(event)


WATCH_EVENTS = [
    RunEvent(run_id="run-w", type=RUN_EVENT_TYPE_PROGRESS, progress={"completed": 2, "total_tasks": 4}),
    RunEvent(run_id="run-w", type=RUN_EVENT_TYPE_SUMMARY, state=RUN_STATE_SUCCEEDED, summaries=[{"metric": "m"}]),
]


async def test_watch_run_streams_ndjson_over_http_until_the_run_ends(served: Api, http: aiohttp.ClientSession) -> None:
    await served.store.create_run(Run(id="run-w", project="default", state=RUN_STATE_RUNNING))
    publisher = asyncio.create_task(_publish_when_watched(served, "run-w", WATCH_EVENTS))
    async with http.get("/v1alpha1/runs/run-w:watch") as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("application/x-ndjson")
        lines = [line async for line in response.content]
    await publisher
    events = [json_format.Parse(line, RunEvent()) for line in lines]
    assert all(line.endswith(b"\n") for line in lines)
    assert [(e.type, e.state) for e in events] == [
        (RUN_EVENT_TYPE_STATE, RUN_STATE_RUNNING),
        (RUN_EVENT_TYPE_PROGRESS, 0),
        (RUN_EVENT_TYPE_SUMMARY, RUN_STATE_SUCCEEDED),
    ]


async def test_watch_run_streams_the_same_events_over_grpc(served: Api, channel: grpc.aio.Channel) -> None:
    await served.store.create_run(Run(id="run-w", project="default", state=RUN_STATE_RUNNING))
    publisher = asyncio.create_task(_publish_when_watched(served, "run-w", WATCH_EVENTS))
    stream = run_service_pb2_grpc.RunServiceStub(channel).WatchRun(WatchRunRequest(id="run-w"))
    events = [event async for event in stream]
    await publisher
    assert [(e.type, e.state) for e in events] == [
        (RUN_EVENT_TYPE_STATE, RUN_STATE_RUNNING),
        (RUN_EVENT_TYPE_PROGRESS, 0),
        (RUN_EVENT_TYPE_SUMMARY, RUN_STATE_SUCCEEDED),
    ]
    assert events[1:] == WATCH_EVENTS


async def test_watch_of_an_unknown_run_is_a_plain_404(http: aiohttp.ClientSession) -> None:
    async with http.get("/v1alpha1/runs/run-nope:watch") as response:
        assert response.status == 404
        assert response.headers["Content-Type"].startswith("application/json")


async def test_a_failure_mid_stream_is_the_last_ndjson_line(served: Api, http: aiohttp.ClientSession) -> None:
    await served.store.create_run(Run(id="run-w", project="default", state=RUN_STATE_RUNNING))

    async def failing_watch(run_id: str) -> AsyncIterator[RunEvent]:
        yield RunEvent(run_id=run_id, type=RUN_EVENT_TYPE_PROGRESS)
        raise ConnectionError("bus went away")

    served.runs._watch = failing_watch
    async with http.get("/v1alpha1/runs/run-w:watch") as response:
        lines = [json.loads(line) async for line in response.content]
    assert len(lines) == 3
    assert lines[-1]["error"]["code"] == grpc.StatusCode.UNAVAILABLE.value[0]
    assert "bus went away" in lines[-1]["error"]["message"]


async def test_evaluate_stream_is_grpc_only_and_answers_in_order(served: Api, channel: grpc.aio.Channel) -> None:
    requests = []
    for index in range(5):
        request = json_format.ParseDict(EVALUATE_BODY, EvaluateRequest())
        request.request_id = f"s{index}"
        served.bus.evaluate_delay[request.request_id] = 0.03 * (5 - index)
        requests.append(request)

    async def send() -> AsyncIterator[EvaluateRequest]:
        for request in requests:
            yield request

    stub = evaluation_service_pb2_grpc.EvaluationServiceStub(channel)
    responses = [r async for r in stub.EvaluateStream(send(), metadata=project("team-s"))]
    assert [r.request_id for r in responses] == [f"s{i}" for i in range(5)]
    assert {r.project for r in served.bus.evaluated} == {"team-s"}


# --- health, readiness, reflection, metrics ---


async def test_healthz_and_readyz_follow_readiness(served: Api, http: aiohttp.ClientSession) -> None:
    async with http.get("/healthz") as response:
        assert response.status == 200
    async with http.get("/readyz") as response:
        assert response.status == 200 and await response.json() == {"status": "ready"}
    served.readiness.set_not_ready("store", "connection refused")
    async with http.get("/readyz") as response:
        assert response.status == 503
        assert await response.json() == {"status": "not ready", "reasons": ["store: connection refused"]}
    async with http.get("/healthz") as response:
        assert response.status == 200


async def test_grpc_health_follows_readiness(served: Api, channel: grpc.aio.Channel) -> None:
    health = health_pb2_grpc.HealthStub(channel)

    async def status(service: str = "") -> int:
        return (await health.Check(health_pb2.HealthCheckRequest(service=service))).status

    async def settles_at(expected: int, service: str = "") -> None:
        for _ in range(200):
            if await status(service) == expected:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"health of {service!r} never became {expected}")

    assert await status() == health_pb2.HealthCheckResponse.SERVING
    assert await status("evalsi.v1alpha1.RunService") == health_pb2.HealthCheckResponse.SERVING
    served.readiness.set_not_ready("store", "closed")
    await settles_at(health_pb2.HealthCheckResponse.NOT_SERVING)
    await settles_at(health_pb2.HealthCheckResponse.NOT_SERVING, "evalsi.v1alpha1.EvaluationService")
    served.readiness.set_ready("store")
    await settles_at(health_pb2.HealthCheckResponse.SERVING)


async def test_reflection_lists_every_service(channel: grpc.aio.Channel) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)

    async def ask() -> AsyncIterator[reflection_pb2.ServerReflectionRequest]:
        yield reflection_pb2.ServerReflectionRequest(list_services="")

    [answer] = [r async for r in stub.ServerReflectionInfo(ask())]
    names = {s.name for s in answer.list_services_response.service}
    assert {
        "evalsi.v1alpha1.EvaluationService",
        "evalsi.v1alpha1.RunService",
        "evalsi.v1alpha1.CatalogService",
        "grpc.health.v1.Health",
    } <= names


async def test_metrics_count_calls_per_rpc_code_and_transport(
    http: aiohttp.ClientSession, channel: grpc.aio.Channel
) -> None:
    await http.get("/v1alpha1/runs/run-nope")
    await grpc_error(run_service_pb2_grpc.RunServiceStub(channel).GetRun(GetRunRequest(id="run-nope")))
    await http.get("/v1alpha1/evaluators")
    async with http.get("/metrics") as response:
        assert response.status == 200
        text = await response.text()
    get_run = 'rpc="evalsi.v1alpha1.RunService/GetRun"'
    assert f'evalsi_api_requests_total{{code="NOT_FOUND",{get_run},transport="http"}} 1.0' in text
    assert f'evalsi_api_requests_total{{code="NOT_FOUND",{get_run},transport="grpc"}} 1.0' in text
    assert 'code="OK",rpc="evalsi.v1alpha1.CatalogService/ListEvaluators",transport="http"' in text
    assert "evalsi_api_request_duration_seconds_bucket" in text


# --- lifecycle ---


async def test_start_and_stop_twice_and_stop_is_idempotent(api: Api) -> None:
    for _ in range(2):
        server = ApiServer(api.table, ServerConfig(http_port=0, grpc_port=0, grace_period_s=0.5))
        url = "http://127.0.0.1:{}/healthz"
        async with server, aiohttp.ClientSession() as session, session.get(url.format(server.http_port)) as response:
            assert response.status == 200
        await server.stop()
        with pytest.raises(aiohttp.ClientConnectionError):
            async with aiohttp.ClientSession() as session:
                await session.get(f"http://127.0.0.1:{server.http_port}/healthz")
        with pytest.raises(RuntimeError, match="create a new one"):
            await server.start()


async def test_stop_lets_in_flight_calls_finish(served: Api, http: aiohttp.ClientSession) -> None:
    served.bus.evaluate_delay["fixed"] = 0.3
    call = asyncio.create_task(http.post("/v1alpha1/evaluate", json=EVALUATE_BODY))
    while not served.bus.evaluated:
        await asyncio.sleep(0.005)
    assert served.server is not None
    await served.server.stop()
    response = await call
    assert response.status == 200
    assert not served.readiness.ready


def test_a_non_loopback_host_is_refused_without_an_auth_section() -> None:
    from evalsi.gate.exposure import AccessSettings

    with pytest.raises(BadInputError, match=r"--host 0\.0\.0\.0: not a loopback address, and there is no auth"):
        AccessSettings().check("0.0.0.0")
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        ServerConfig(host=host).validate()
        assert AccessSettings().check(host) is None
