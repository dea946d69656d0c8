"""ListRuns by creation time through the api's real HTTP transport and handlers over a real SQLite store: the
query parameters, paging within the bounds, the 400s, ``Client.runs.list`` and ``evalsi runs list --since/--until``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from click.testing import CliRunner

from evalsi.api import ApiServer, CatalogHandlers, EvaluationHandlers, RunHandlers, ServerConfig, build_table
from evalsi.api.run_dataset import load_run_dataset
from evalsi.cli.main import cli
from evalsi.cli.runs_cmd import parse_until
from evalsi.client import Client
from evalsi.evaluators import Registry
from evalsi.runs.spec import validate_eval_run
from evalsi.stores import open_metadata_store, open_object_store
from evalsi.v1alpha1.run_pb2 import RUN_STATE_SUCCEEDED, Run

CREATED = {
    "r0": "2026-11-30T23:59:59Z",
    "r1": "2026-12-01T00:00:00Z",
    "r2": "2026-12-01T12:00:00Z",
    "r3": "2026-12-01T23:59:59.500Z",
    "r4": "2026-12-02T00:00:00Z",
    "r5": "2026-12-02T08:00:00Z",
}


async def _nothing(*_args: Any) -> None:
    return None


async def _no_events(_run_id: str) -> AsyncIterator[Any]:
    return
    yield


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[str]:
    """The api's HTTP address; the runs of CREATED stored in project ``default``, one more in ``other``."""
    registry = Registry.from_entry_points()
    store = await open_metadata_store(f"sqlite:///{tmp_path / 'meta.db'}")
    objects = await open_object_store(str(tmp_path / "objects"))
    for run_id, created in [*CREATED.items(), ("elsewhere", "2026-12-01T12:00:00Z")]:
        run = Run(id=run_id, project="other" if run_id == "elsewhere" else "default", name=f"qa {run_id}",
                  state=RUN_STATE_SUCCEEDED)
        run.create_time.FromJsonString(created)
        await store.create_run(run)
    runs = RunHandlers(
        store=store, objects=objects, control=_nothing, watch=_no_events,
        validate_run=partial(validate_eval_run, registry=registry, datasets_dir=tmp_path),
        load_records=partial(load_run_dataset, datasets_dir=tmp_path),
    )
    server = ApiServer(build_table(evaluation=EvaluationHandlers(_nothing, registry=registry), runs=runs,
                                   catalog=CatalogHandlers(registry)),
                       ServerConfig(http_port=0, grpc_port=0, grace_period_s=1.0))
    await server.start()
    try:
        yield f"http://127.0.0.1:{server.http_port}"
    finally:
        await server.stop()
        await objects.close()
        await store.close()


async def test_http_pages_stay_inside_the_bounds(served: str) -> None:
    bounds = {"createdAfter": "2026-12-01T00:00:00Z", "createdBefore": "2026-12-02T00:00:00Z"}
    seen: list[str] = []
    pages: list[int] = []
    async with aiohttp.ClientSession(served) as http:
        token = ""
        while True:
            response = await http.get("/v1alpha1/runs", params={**bounds, "pageSize": "2", "pageToken": token})
            assert response.status == 200, await response.text()
            body = await response.json()
            seen += [run["id"] for run in body["runs"]]
            pages.append(len(body["runs"]))
            token = body.get("nextPageToken", "")
            if not token:
                break
        # created_after is inclusive (r1 at midnight), created_before exclusive (r4 at the next midnight).
        assert seen == ["r3", "r2", "r1"]
        assert pages == [2, 1]

        first = await (await http.get("/v1alpha1/runs", params={**bounds, "pageSize": "2"})).json()
        moved = {**bounds, "createdBefore": "2026-12-03T00:00:00Z"}
        response = await http.get("/v1alpha1/runs",
                                  params={**moved, "pageSize": "2", "pageToken": first["nextPageToken"]})
        assert response.status == 400
        assert "different query" in (await response.json())["message"]

        only_after = await (await http.get("/v1alpha1/runs", params={"created_after": "2026-12-02T00:00:00Z"})).json()
        assert [run["id"] for run in only_after["runs"]] == ["r5", "r4"]


@pytest.mark.parametrize("after, before", [("2026-12-02T00:00:00Z", "2026-12-01T00:00:00Z"),
                                           ("2026-12-01T00:00:00Z", "2026-12-01T00:00:00Z")])
async def test_an_empty_range_is_a_400_naming_both_fields(served: str, after: str, before: str) -> None:
    async with aiohttp.ClientSession(served) as http:
        response = await http.get("/v1alpha1/runs", params={"createdAfter": after, "createdBefore": before})
        body = await response.json()
    assert response.status == 400
    assert body["message"] == (
        f"created_before ({before}): must be later than created_after ({after}); created_after is inclusive, "
        "created_before exclusive"
    )


async def test_a_time_that_is_not_rfc_3339_is_a_400_naming_the_parameter(served: str) -> None:
    async with aiohttp.ClientSession(served) as http:
        response = await http.get("/v1alpha1/runs", params={"createdAfter": "yesterday"})
        body = await response.json()
    assert response.status == 400
    assert body["message"].startswith("createdAfter:")
    assert "RFC 3339" in body["message"]


async def test_the_client_sends_the_bounds(served: str) -> None:
    def listed() -> list[str]:
        with Client(served) as client:
            runs = client.runs.list(page_size=1, created_after=datetime(2026, 12, 1, 12, tzinfo=UTC),
                                    created_before=datetime(2026, 12, 2, 8))  # no zone: UTC
            return [run.id for run in runs]

    assert await asyncio.to_thread(listed) == ["r4", "r3", "r2"]


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["runs", "list", *args], env={"EVALSI_PROJECT": None})
    return result.exit_code, result.output


async def test_runs_list_since_until(served: str) -> None:
    code, output = await asyncio.to_thread(_cli, "--server", served, "--since", "2026-12-01", "--until", "2026-12-01",
                                           "--format", "json")
    assert code == 0, output
    assert [run["id"] for run in json.loads(output)] == ["r3", "r2", "r1"]  # a bare --until date: the whole day
    code, output = await asyncio.to_thread(_cli, "--server", served, "--until", "2026-12-01T12:00:00Z",
                                           "--format", "json")
    assert code == 0, output
    assert [run["id"] for run in json.loads(output)] == ["r1", "r0"]  # an RFC 3339 --until: exclusive
    code, output = await asyncio.to_thread(_cli, "--server", served, "--since", "2026-12-02", "--until", "2026-12-01")
    assert code == 2
    assert "--until '2026-12-01' (2026-12-02T00:00:00+00:00) is not later than --since '2026-12-02'" in output
    code, output = await asyncio.to_thread(_cli, "--server", served, "--until", "friday")
    assert code == 2
    assert "--until 'friday': expected a duration such as 30m" in output


def test_until_a_date_takes_in_the_day_and_a_time_ends_there() -> None:
    now = datetime(2026, 12, 2, 12, tzinfo=UTC)
    assert parse_until("2026-12-01", now) == datetime(2026, 12, 2, tzinfo=UTC)
    assert parse_until("2026-12-01T09:30:00+01:00", now) == datetime(2026, 12, 1, 8, 30, tzinfo=UTC)
    assert parse_until("2h", now) == datetime(2026, 12, 2, 10, tzinfo=UTC)
