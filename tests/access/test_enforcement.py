"""§23 phase 2's exit criteria on the real servers: with an OIDC provider configured, every surface (gRPC,
HTTP/JSON, OTLP over gRPC and HTTP, /metrics, reflection) refuses an unauthenticated call; a viewer cannot start
runs nor read another project's runs or traces; an ingest key bound to project a cannot write into project b."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from access_stack import Stack, grpc_unary, span_batch, start_stack
from auth_helpers import IdentityProvider, SigningKey
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from evalsi.evaluators import Registry
from evalsi.v1alpha1.catalog_service_pb2 import ListEvaluatorsRequest
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest
from evalsi.v1alpha1.evaluator_pb2 import EvaluatorRef
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import RUN_STATE_SUCCEEDED, Run
from evalsi.v1alpha1.run_service_pb2 import CreateRunRequest, GetRunRequest

LIST_EVALUATORS = "/evalsi.v1alpha1.CatalogService/ListEvaluators"
CREATE_RUN = "/evalsi.v1alpha1.RunService/CreateRun"
GET_RUN = "/evalsi.v1alpha1.RunService/GetRun"
OTLP_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
PROTOBUF = {"Content-Type": "application/x-protobuf"}


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry.from_entry_points()


@pytest.fixture
async def stack(tmp_path: Path, registry: Registry) -> AsyncIterator[Stack]:
    idp = await IdentityProvider(keys=[SigningKey.generate("RS256", "k1")]).start()
    served = await start_stack(tmp_path, idp, registry)
    try:
        yield served
    finally:
        await served.close()
        await idp.stop()


def bearer(token: str, project: str = "") -> dict[str, str]:
    headers = {"authorization": f"Bearer {token}"}
    if project:
        headers["x-evalsi-project"] = project
    return headers


async def grpc_code(target: str, method: str, request: bytes, headers: dict[str, str] | None = None) -> Any:
    async with grpc.aio.insecure_channel(target) as channel:
        try:
            await grpc_unary(channel, method)(request, metadata=tuple((headers or {}).items()), timeout=10)
        except grpc.aio.AioRpcError as exc:
            return exc.code(), exc.details()
    return grpc.StatusCode.OK, ""


async def test_every_surface_refuses_an_unauthenticated_call(stack: Stack) -> None:
    code, details = await grpc_code(stack.grpc_target, LIST_EVALUATORS, ListEvaluatorsRequest().SerializeToString())
    assert code == grpc.StatusCode.UNAUTHENTICATED and "authentication required" in details
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{stack.http}/v1alpha1/evaluators") as answer:
            assert answer.status == 401 and answer.headers["WWW-Authenticate"].startswith("Bearer realm=")
        async with http.get(f"{stack.http}/metrics") as answer:
            assert answer.status == 401
        async with http.post(f"{stack.otlp_http}/v1/traces", data=span_batch(), headers=PROTOBUF) as answer:
            assert answer.status == 401 and answer.headers["WWW-Authenticate"].startswith("Bearer")
        # Health and the login discovery stay open: liveness only, and what `evalsi login` needs to begin.
        async with http.get(f"{stack.http}/healthz") as answer:
            assert answer.status == 200
        async with http.get(f"{stack.http}/.well-known/evalsi-auth") as answer:
            assert answer.status == 200
            assert await answer.json() == {"issuer": "https://sso.example.test/realms/eng", "client_id": "evalsi-cli",
                                           "scopes": ["openid", "profile", "email", "offline_access"]}
    code, _ = await grpc_code(stack.otlp_grpc, OTLP_EXPORT, span_batch())
    assert code == grpc.StatusCode.UNAUTHENTICATED
    async with grpc.aio.insecure_channel(stack.grpc_target) as channel:
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert health.status in (health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING)
        reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
        listing = reflection_pb2.ServerReflectionRequest(list_services="")
        with pytest.raises(grpc.aio.AioRpcError) as refused:  # refused before any request is read
            async for _ in reflection.ServerReflectionInfo(iter([]), timeout=10):
                pass
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        # The same calls with a viewer's token go through.
        metadata = tuple(bearer(stack.token("viewer-1"), "a").items())
        answers = [answer async for answer in reflection.ServerReflectionInfo(iter([listing]), metadata=metadata,
                                                                                timeout=10)]
        services = {service.name for service in answers[0].list_services_response.service}
        assert "evalsi.v1alpha1.RunService" in services
    code, _ = await grpc_code(stack.grpc_target, LIST_EVALUATORS, ListEvaluatorsRequest().SerializeToString(),
                              bearer(stack.token("viewer-1"), "a"))
    assert code == grpc.StatusCode.OK


async def test_a_bad_token_is_refused_with_the_reason_and_never_echoed(stack: Stack) -> None:
    forged = SigningKey.generate("RS256", "k1").sign({"iss": stack.idp.issuer, "sub": "root"})
    async with aiohttp.ClientSession() as http, http.get(f"{stack.http}/v1alpha1/evaluators",
                                                         headers=bearer(forged)) as answer:
        assert answer.status == 401
        challenge = answer.headers["WWW-Authenticate"]
        assert 'error="invalid_token"' in challenge and forged not in challenge and forged not in await answer.text()


async def test_metrics_are_the_owners(stack: Stack) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{stack.http}/metrics", headers=bearer(stack.token("viewer-1"), "a")) as answer:
            assert answer.status == 403
            assert "metrics.read" in (await answer.json())["message"]
        async with http.get(f"{stack.http}/metrics", headers=bearer(stack.token("root"))) as answer:
            assert answer.status == 200 and "evalsi_api" in await answer.text()


async def _stored_run(stack: Stack, project: str, run_id: str) -> None:
    run = Run(id=run_id, project=project, name=f"run-{project}", state=RUN_STATE_SUCCEEDED, created_by="corp/root")
    await stack.metadata.create_run(run)


async def test_a_viewer_cannot_create_runs_nor_read_another_projects_runs(stack: Stack) -> None:
    await _stored_run(stack, "a", "run-in-a")
    await _stored_run(stack, "b", "run-in-b")
    viewer = stack.token("viewer-1")
    code, details = await grpc_code(stack.grpc_target, CREATE_RUN, CreateRunRequest(project="a").SerializeToString(),
                                    bearer(viewer))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert details == "corp/viewer-1 may not runs.create in project 'a'"  # the action and project, not why
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{stack.http}/v1alpha1/runs", json={"run": {"metadata": {"name": "x"}}},
                             headers=bearer(viewer, "a")) as answer:
            assert answer.status == 403
        async with http.get(f"{stack.http}/v1alpha1/runs/run-in-a", headers=bearer(viewer, "a")) as answer:
            assert answer.status == 200 and (await answer.json())["id"] == "run-in-a"
        # Project b: the header, the query parameter and the gRPC field alike.
        async with http.get(f"{stack.http}/v1alpha1/runs/run-in-b", headers=bearer(viewer, "b")) as answer:
            assert answer.status == 403
        async with http.get(f"{stack.http}/v1alpha1/runs/run-in-b?project=b", headers=bearer(viewer)) as answer:
            assert answer.status == 403
        async with http.get(f"{stack.http}/v1alpha1/runs?project=b", headers=bearer(viewer)) as answer:
            assert answer.status == 403
        async with http.get(f"{stack.http}/v1alpha1/traces?project=b", headers=bearer(viewer)) as answer:
            assert answer.status == 403
        # Asked in its own project, b's run is simply not there, and nothing says where it is.
        async with http.get(f"{stack.http}/v1alpha1/runs/run-in-b", headers=bearer(viewer, "a")) as answer:
            assert answer.status == 404 and "'b'" not in await answer.text()
    code, _ = await grpc_code(stack.grpc_target, GET_RUN, GetRunRequest(id="run-in-b", project="b").SerializeToString(),
                              bearer(viewer))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    # The owner reads both.
    code, _ = await grpc_code(stack.grpc_target, GET_RUN, GetRunRequest(id="run-in-b", project="b").SerializeToString(),
                              bearer(stack.token("root")))
    assert code == grpc.StatusCode.OK


async def _trace_projects(stack: Stack, *projects: str) -> dict[str, int]:
    counts = {}
    for project in projects:
        counts[project] = len((await stack.traces.list_traces(project)).traces)
    return counts


async def test_an_ingest_key_bound_to_a_writes_a_and_cannot_write_b(stack: Stack) -> None:
    key = bearer(stack.ingest_key)
    async with aiohttp.ClientSession() as http:
        # Not naming a project: the key's own.
        async with http.post(f"{stack.otlp_http}/v1/traces", data=span_batch(), headers={**PROTOBUF, **key}) as answer:
            assert answer.status == 200, await answer.read()
        # Naming project b, by resource attribute or by header: refused whole, nothing stored.
        async with http.post(f"{stack.otlp_http}/v1/traces", data=span_batch(project="b", trace_id=b"\x03" * 16),
                             headers={**PROTOBUF, **key}) as answer:
            assert answer.status == 403
        async with http.post(f"{stack.otlp_http}/v1/traces", data=span_batch(trace_id=b"\x04" * 16),
                             headers={**PROTOBUF, **key, "x-evalsi-project": "b"}) as answer:
            assert answer.status == 403
        # Naming its own project is fine.
        async with http.post(f"{stack.otlp_http}/v1/traces", data=span_batch(project="a", trace_id=b"\x05" * 16),
                             headers={**PROTOBUF, **key}) as answer:
            assert answer.status == 200
        # An ingest key writes traces; it does not read them.
        async with http.get(f"{stack.http}/v1alpha1/traces?project=a", headers=key) as answer:
            assert answer.status == 403
    code, details = await grpc_code(stack.otlp_grpc, OTLP_EXPORT, span_batch(project="b", trace_id=b"\x06" * 16),
                                    key)
    assert code == grpc.StatusCode.PERMISSION_DENIED and "traces.write in project 'b'" in details
    code, _ = await grpc_code(stack.otlp_grpc, OTLP_EXPORT, span_batch(trace_id=b"\x07" * 16), key)
    assert code == grpc.StatusCode.OK
    assert await _trace_projects(stack, "a", "b", "default") == {"a": 3, "b": 0, "default": 0}


async def test_runs_of_every_project_are_listed_for_the_owner_only(stack: Stack) -> None:
    await _stored_run(stack, "a", "run-in-a")
    await _stored_run(stack, "b", "run-in-b")
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{stack.http}/v1alpha1/runs?all_projects=true",
                            headers=bearer(stack.token("root"))) as answer:
            assert answer.status == 200, await answer.text()
            assert {run["id"] for run in (await answer.json())["runs"]} == {"run-in-a", "run-in-b"}
        async with http.get(f"{stack.http}/v1alpha1/runs?all_projects=true",
                            headers=bearer(stack.token("viewer-1"), "a")) as answer:
            assert answer.status == 403
            assert "runs.read in project '*'" in (await answer.json())["message"]


async def test_each_message_of_an_evaluation_stream_is_decided_on_its_own_evaluators(stack: Stack) -> None:
    # Admitted before any message (nothing to run yet); the first request names an evaluator the role's condition
    # refuses (the server cannot vouch that it runs no code), so the stream ends there, before any evaluation.
    request = EvaluateRequest(project="a", evaluators=[EvaluatorRef(ref="exact-match")],
                              records=[Record(id="r1")])
    async with grpc.aio.insecure_channel(stack.grpc_target) as channel:
        stream = channel.stream_stream("/evalsi.v1alpha1.EvaluationService/EvaluateStream",
                                       request_serializer=None, response_deserializer=None)
        call = stream(iter([request.SerializeToString()]), metadata=tuple(bearer(stack.token("ci-1"), "a").items()),
                      timeout=10)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            async for _ in call:
                pass
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert refused.value.details() == "corp/ci-1 may not evaluations.run in project 'a'"


def _model_run(model: str) -> bytes:
    request = CreateRunRequest(project="a")
    request.run.metadata.name = f"on-{model}"
    request.run.spec.target.model.connection = "local"
    request.run.spec.target.model.model = model
    return request.SerializeToString()


async def test_a_custom_role_with_a_model_condition_starts_runs_only_on_its_models(stack: Stack) -> None:
    """Phase 2's exit criterion: the condition decides on the run's own target, over gRPC and HTTP/JSON alike."""
    engineer = bearer(stack.token("pe-1"))
    code, details = await grpc_code(stack.grpc_target, CREATE_RUN, _model_run("gpt-5"), engineer)
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert details == "corp/pe-1 may not runs.create in project 'a'"
    allowed, _ = await grpc_code(stack.grpc_target, CREATE_RUN, _model_run("qwen3"), engineer)
    # Past the gate the handler takes over: this bare spec (no dataset, no evaluators) is its to refuse.
    assert allowed == grpc.StatusCode.INVALID_ARGUMENT
    async with aiohttp.ClientSession() as http:
        run = {"metadata": {"name": "x"}, "spec": {"target": {"model": {"connection": "local", "model": "gpt-5"}}}}
        headers = bearer(stack.token("pe-1"), "a")
        async with http.post(f"{stack.http}/v1alpha1/runs", json={"run": run}, headers=headers) as answer:
            assert answer.status == 403
