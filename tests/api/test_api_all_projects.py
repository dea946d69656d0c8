"""ListRuns across projects and "it is in project ...": granted only by an api that listens on loopback alone,
through the real HTTP transport and handlers over a real SQLite store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest

from evalsi.api import ApiServer, CatalogHandlers, EvaluationHandlers, RunHandlers, ServerConfig, build_table
from evalsi.api.errors import ApiError
from evalsi.api.run_dataset import load_run_dataset
from evalsi.evaluators import Registry
from evalsi.runs.spec import validate_eval_run
from evalsi.stores import MetadataStore, open_metadata_store, open_object_store
from evalsi.v1alpha1.run_pb2 import RUN_STATE_SUCCEEDED, Run


async def _nothing(*_args: Any) -> None:
    return None


async def _no_events(_run_id: str) -> AsyncIterator[Any]:
    return
    yield


@asynccontextmanager
async def api(tmp_path: Path, listen_host: str) -> AsyncIterator[tuple[aiohttp.ClientSession, RunHandlers]]:
    """The api's HTTP transport on loopback, its run handlers told they listen on ``listen_host``; two runs
    stored, one in project ``quickstart`` and one in ``other``."""
    registry = Registry.from_entry_points()
    store: MetadataStore = await open_metadata_store(f"sqlite:///{tmp_path / 'meta.db'}")
    objects = await open_object_store(str(tmp_path / "objects"))
    for run_id, project in (("run-qs", "quickstart"), ("run-other", "other")):
        await store.create_run(Run(id=run_id, project=project, name=project, state=RUN_STATE_SUCCEEDED))
    runs = RunHandlers(
        store=store, objects=objects, control=_nothing, watch=_no_events,
        validate_run=partial(validate_eval_run, registry=registry, datasets_dir=tmp_path),
        load_records=partial(load_run_dataset, datasets_dir=tmp_path), listen_host=listen_host,
    )
    evaluation = EvaluationHandlers(_nothing, registry=registry)  # never called here
    server = ApiServer(build_table(evaluation=evaluation, runs=runs, catalog=CatalogHandlers(registry)),
                       ServerConfig(http_port=0, grpc_port=0, grace_period_s=1.0))
    await server.start()
    try:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{server.http_port}") as http:
            yield http, runs
    finally:
        await server.stop()
        await objects.close()
        await store.close()


async def _json(response: aiohttp.ClientResponse) -> tuple[int, dict[str, Any]]:
    return response.status, await response.json()


async def test_a_loopback_api_lists_every_project_and_says_where_a_run_is(tmp_path: Path) -> None:
    async with api(tmp_path, "127.0.0.1") as (http, _runs):
        status, body = await _json(await http.get("/v1alpha1/runs", params={"all_projects": "true"}))
        assert status == 200
        assert sorted((r["id"], r["project"]) for r in body["runs"]) == [("run-other", "other"),
                                                                         ("run-qs", "quickstart")]
        status, body = await _json(await http.get("/v1alpha1/runs"))
        assert (status, body.get("runs", [])) == (200, [])  # without it, the call's project alone: default
        status, body = await _json(await http.get("/v1alpha1/runs/run-qs"))
        assert status == 404
        assert body["message"] == "id: run 'run-qs' not found in project 'default'; it is in project 'quickstart'"
        status, body = await _json(await http.get("/v1alpha1/runs", params={"all_projects": "true"},
                                                  headers={"x-evalsi-project": "quickstart"}))
        assert status == 400
        assert body["message"] == ("all_projects: lists every project's runs, but the call names project "
                                   "'quickstart'; give one or the other")


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3"])
async def test_an_api_beyond_loopback_refuses_all_projects_and_hides_other_projects(tmp_path: Path,
                                                                                   host: str) -> None:
    async with api(tmp_path, host) as (http, runs):
        status, body = await _json(await http.get("/v1alpha1/runs", params={"all_projects": "true"}))
        assert status == 403
        assert body["message"] == (
            f"all_projects: this server listens on {host}, so callers may be on other machines and a call sees "
            "only its own project's runs; all_projects is granted only by a server that listens on loopback alone "
            "(127.0.0.1, ::1 or localhost)")
        status, body = await _json(await http.get("/v1alpha1/runs/run-qs"))
        assert (status, body["message"]) == (404, "id: run 'run-qs' not found in project 'default'")
        # The same refusal is gRPC's PERMISSION_DENIED: one handler behind both transports.
        from evalsi.api.context import CallContext
        from evalsi.v1alpha1.run_service_pb2 import ListRunsRequest

        refuse: Callable[..., Any] = runs.list_runs
        with pytest.raises(ApiError) as caught:
            await refuse(ListRunsRequest(all_projects=True), CallContext(method="ListRuns", request_id="r"))
        assert caught.value.code == grpc.StatusCode.PERMISSION_DENIED
