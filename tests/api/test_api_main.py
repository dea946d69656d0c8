"""The evalsi-api process: flags and environment, its wiring against a real NATS and SQLite, SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import grpc
import pytest
from google.protobuf import json_format

from evalsi import bus
from evalsi.bus.natsserver import NatsServer
from evalsi.bus.v1alpha1.bus_pb2 import CONTROL_ACTION_CANCEL, CONTROL_ACTION_CREATED, RunControl
from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.ports import free_port
from evalsi.v1alpha1 import run_service_pb2_grpc
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest, EvaluateResponse
from evalsi.v1alpha1.run_pb2 import RUN_STATE_SUCCEEDED, Run
from evalsi.v1alpha1.run_service_pb2 import (
    RUN_EVENT_TYPE_PROGRESS,
    RUN_EVENT_TYPE_STATE,
    RUN_EVENT_TYPE_SUMMARY,
    GetRunRequest,
    RunEvent,
)
from evalsi.v1alpha1.score_pb2 import OUTCOME_SCORED, EvaluationResult

ROOT = Path(__file__).resolve().parents[2]
SERVICE_PATH = ROOT / "services" / "api"
try:
    from evalsi_api import main as api_main
except ImportError:  # until the package path is in the installed distribution
    sys.path.insert(0, str(SERVICE_PATH))
    from evalsi_api import main as api_main



# --- flags and environment ---


def test_defaults_environment_and_flags(tmp_path: Path) -> None:
    defaults = api_main.parse_settings([], environ={})
    assert (defaults.server.host, defaults.server.http_port, defaults.server.grpc_port) == ("127.0.0.1", 8080, 8081)
    assert defaults.server.max_request_bytes == 16 * 1024 * 1024
    assert defaults.limits.max_sync_records == 1000
    env = {"EVALSI_API_HTTP_PORT": "9000", "EVALSI_NATS_URL": "nats://n:1", "EVALSI_DATASETS_DIR": str(tmp_path)}
    from_env = api_main.parse_settings([], environ=env)
    assert (from_env.server.http_port, from_env.nats_url, from_env.datasets_dir) == (9000, "nats://n:1", tmp_path)
    flagged = api_main.parse_settings(["--http-port", "9100", "--max-sync-records", "5"], environ=env)
    assert (flagged.server.http_port, flagged.limits.max_sync_records) == (9100, 5)
    with pytest.raises(BadInputError, match="EVALSI_API_GRPC_PORT='x': expected int"):
        api_main.parse_settings([], environ={"EVALSI_API_GRPC_PORT": "x"})


def test_a_non_loopback_host_exits_2_saying_there_is_no_auth(capsys: pytest.CaptureFixture[str]) -> None:
    assert api_main.main(["--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert "--host 0.0.0.0: not a loopback address, and there is no auth section" in err
    assert "--no-auth" in err and "docs/auth.md" in err  # the refusal names the ways out


def test_no_auth_from_the_flag_or_its_variable(tmp_path: Path) -> None:
    flagged = api_main.parse_settings(["--host", "0.0.0.0", "--no-auth"], environ={})
    assert flagged.access.no_auth
    from_env = api_main.parse_settings(["--host", "0.0.0.0"], environ={"EVALSI_NO_AUTH": "1"})
    assert from_env.access.no_auth
    from dataclasses import replace

    replace(flagged, datasets_dir=tmp_path).validate()  # no refusal
    off = api_main.parse_settings(["--host", "0.0.0.0"], environ={"EVALSI_NO_AUTH": "0"})
    with pytest.raises(BadInputError, match="no auth section"):
        replace(off, datasets_dir=tmp_path).validate()
    with pytest.raises(BadInputError, match="EVALSI_NO_AUTH='maybe'"):
        api_main.parse_settings([], environ={"EVALSI_NO_AUTH": "maybe"})
    with pytest.raises(SystemExit):  # a switch takes no value
        api_main.parse_settings(["--no-auth=yes"], environ={})


def test_bad_flags_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert api_main.main(["--datasets-dir", str(tmp_path / "missing")]) == 2
    assert "--datasets-dir" in capsys.readouterr().err
    with pytest.raises(SystemExit) as caught:
        api_main.main(["--http-port", "eighty"])
    assert caught.value.code == 2


def test_evaluate_requests_spanning_pools_are_split_per_pool() -> None:
    registry = Registry.from_entry_points()
    request = json_format.ParseDict(
        {"records": [{"id": "a"}], "evaluators": [{"ref": "exact-match"}, {"ref": "llm-judge"}, {"ref": "contains"}]},
        EvaluateRequest(),
    )
    parts = api_main.split_by_pool(request, registry)
    assert {pool: [e.ref for e in part.evaluators] for pool, part in parts.items()} == {
        "cpu": ["exact-match", "contains"],
        "judge": ["llm-judge"],
    }
    assert all(len(part.records) == 1 for part in parts.values())
    single = json_format.ParseDict({"evaluators": [{"ref": "exact-match"}]}, EvaluateRequest())
    assert api_main.split_by_pool(single, registry) == {"cpu": single}


# --- the wiring, against a real NATS, SQLite and a local object directory ---


@pytest.fixture(scope="module")
def nats_server() -> Iterator[NatsServer]:
    with NatsServer() as server:
        yield server


@pytest.fixture
def datasets(tmp_path: Path) -> Path:
    directory = tmp_path / "datasets"
    directory.mkdir()
    (directory / "qa.jsonl").write_text('{"id": "q1", "output": "a", "reference": "a"}\n')
    return directory


def settings_for(tmp_path: Path, datasets: Path, nats_url: str) -> api_main.Settings:
    return api_main.parse_settings(
        [
            "--http-port", str(free_port()),
            "--grpc-port", str(free_port()),
            "--nats", nats_url,
            "--metadata-url", f"sqlite:///{tmp_path / 'evalsi.db'}",
            "--objects-url", str(tmp_path / "objects"),
            "--datasets-dir", str(datasets),
            "--grace-period", "1",
        ],
        environ={},
    )  # fmt: skip


@pytest.fixture
async def wired(tmp_path: Path, datasets: Path, nats_server: NatsServer) -> AsyncIterator[api_main.Settings]:
    settings = settings_for(tmp_path, datasets, nats_server.url)
    stop = asyncio.Event()
    serving = asyncio.create_task(api_main.serve(settings, stop=stop))
    base = f"http://127.0.0.1:{settings.server.http_port}"
    async with aiohttp.ClientSession() as session:
        for _ in range(200):
            if serving.done():
                serving.result()
            try:
                async with session.get(base + "/readyz") as response:
                    if response.status == 200:
                        break
            except aiohttp.ClientConnectionError:
                pass
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the api never became ready")
    yield settings
    stop.set()
    await asyncio.wait_for(serving, 10)


async def test_the_wired_service_creates_evaluates_watches_and_controls_over_the_bus(
    wired: api_main.Settings, nats_server: NatsServer
) -> None:
    base = f"http://127.0.0.1:{wired.server.http_port}"
    connection = await bus.connect(nats_server.url, name="test")
    controls: asyncio.Queue[RunControl] = asyncio.Queue()

    async def on_control(msg) -> None:
        await controls.put(bus.decode(msg.data, msg.headers, RunControl))

    control_sub = await connection.nc.subscribe("runs.control.>", cb=on_control)

    async def answer(request: EvaluateRequest, delivery: bus.Delivery) -> EvaluateResponse:
        results = [
            EvaluationResult(record_id=r.id, evaluator=e.ref, outcome=OUTCOME_SCORED)
            for r in request.records
            for e in request.evaluators
        ]
        return EvaluateResponse(results=results, request_id=request.request_id)

    responder = await bus.serve_requests(
        connection.nc, bus.subjects.evaluate("cpu"), bus.subjects.evaluate_queue("cpu"), answer,
        request_type=EvaluateRequest,
    )  # fmt: skip
    await connection.nc.flush()  # the server knows the subscriptions before the api sends to them
    probe = EvaluateRequest(records=[{"id": "probe"}], evaluators=[{"ref": "exact-match"}])
    await bus.request(connection.nc, bus.subjects.evaluate("cpu"), probe, EvaluateResponse, 5)
    try:
        async with aiohttp.ClientSession(base, headers={"x-evalsi-project": "team-a"}) as http:
            body = {"records": [{"id": "r1", "output": {"text": "x"}}], "evaluators": [{"ref": "exact-match"}]}
            async with http.post("/v1alpha1/evaluate", json=body) as response:
                assert response.status == 200, await response.text()
                answered = json_format.Parse(await response.text(), EvaluateResponse())
            assert [r.record_id for r in answered.results] == ["r1"] and answered.request_id

            run_body = {
                "run": {
                    "apiVersion": "evals.si/v1alpha1",
                    "kind": "EvalRun",
                    "metadata": {"name": "wired"},
                    "spec": {"dataset": {"path": "qa.jsonl"}, "evaluators": [{"ref": "exact-match"}]},
                }
            }
            async with http.post("/v1alpha1/runs", json=run_body) as response:
                assert response.status == 200, await response.text()
                run = json_format.Parse(await response.text(), Run())
            created = await asyncio.wait_for(controls.get(), 5)
            assert (created.run_id, created.project, created.action) == (run.id, "team-a", CONTROL_ACTION_CREATED)

            async with grpc.aio.insecure_channel(f"127.0.0.1:{wired.server.grpc_port}") as channel:
                stored = await run_service_pb2_grpc.RunServiceStub(channel).GetRun(
                    GetRunRequest(id=run.id), metadata=(("x-evalsi-project", "team-a"),)
                )
            assert stored == run

            async with http.post(f"/v1alpha1/runs/{run.id}:cancel") as response:
                assert response.status == 200
            cancel = await asyncio.wait_for(controls.get(), 5)
            assert (cancel.run_id, cancel.action) == (run.id, CONTROL_ACTION_CANCEL)

            events = await _watch_with_events(http, connection, run.id)
            assert [(e.type, e.state) for e in events] == [
                (RUN_EVENT_TYPE_STATE, run.state),
                (RUN_EVENT_TYPE_PROGRESS, 0),
                (RUN_EVENT_TYPE_SUMMARY, RUN_STATE_SUCCEEDED),
            ]
    finally:
        await responder.stop()
        await control_sub.unsubscribe()
        await connection.close()


async def _watch_with_events(http: aiohttp.ClientSession, connection: bus.BusConnection, run_id: str) -> list:
    """Publish progress until the watcher shows it (its subscription is live), then the end."""
    seen_progress = asyncio.Event()

    async def publish() -> None:
        subject = bus.subjects.run_events(run_id)
        while not seen_progress.is_set():
            await bus.publish(connection.js, subject, RunEvent(run_id=run_id, type=RUN_EVENT_TYPE_PROGRESS), key=None)
            await asyncio.sleep(0.05)
        final = RunEvent(run_id=run_id, type=RUN_EVENT_TYPE_SUMMARY, state=RUN_STATE_SUCCEEDED)
        await bus.publish(connection.js, subject, final, key=None)

    publisher = asyncio.create_task(publish())
    events: list[RunEvent] = []
    try:
        async with http.get(f"/v1alpha1/runs/{run_id}:watch") as response:
            assert response.status == 200
            async for line in response.content:
                event = json_format.Parse(line, RunEvent())
                if event.type == RUN_EVENT_TYPE_PROGRESS:
                    if seen_progress.is_set():
                        continue  # more progress published before the end went out
                    seen_progress.set()
                events.append(event)
    finally:
        seen_progress.set()
        await publisher
    return events


def test_the_process_serves_and_stops_cleanly_on_sigterm(tmp_path: Path, datasets: Path) -> None:
    http_port = free_port()
    args = [
        sys.executable, "-m", "evalsi_api.main",
        "--http-port", str(http_port), "--grpc-port", str(free_port()),
        "--nats", "nats://127.0.0.1:1",  # nothing there: the api serves, but is not ready
        "--metadata-url", f"sqlite:///{tmp_path / 'evalsi.db'}", "--objects-url", str(tmp_path / "objects"),
        "--datasets-dir", str(datasets), "--grace-period", "1",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SERVICE_PATH), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True)
    try:
        ready = None
        deadline = time.monotonic() + 90  # the api imports for seconds; far longer on a loaded machine
        while time.monotonic() < deadline:
            try:
                import urllib.error
                import urllib.request

                urllib.request.urlopen(f"http://127.0.0.1:{http_port}/readyz", timeout=1)
            except urllib.error.HTTPError as exc:
                ready = exc.code, json.loads(exc.read())
                break
            except OSError:
                time.sleep(0.05)
        assert ready is not None, "the api never answered"
        status, body = ready
        assert status == 503 and body["status"] == "not ready"
        assert any(reason.startswith("nats: ") for reason in body["reasons"])
        process.send_signal(signal.SIGTERM)
        code, stderr = stopped(process)
        assert code == 0, stderr
        logs = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
        events = [entry.get("event") for entry in logs]
        assert "api listening" in events and "api stopped" in events
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def stopped(process: subprocess.Popen[str]) -> tuple[int | None, str]:
    """Wait for a process told to stop, reading its stderr meanwhile; its exit code and stderr. Within the api's
    stop deadline (its grace period + 30 s) it ends by itself, printing every thread's stack if its stop hung."""
    try:
        _, stderr = process.communicate(timeout=45)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGUSR1)  # every thread's stack, to say where it hangs
        time.sleep(1)
        process.kill()
        _, stderr = process.communicate()
    return process.returncode, stderr


def test_no_auth_listens_on_all_interfaces_with_a_warning(tmp_path: Path, datasets: Path) -> None:
    http_port = free_port()
    args = [
        sys.executable, "-m", "evalsi_api.main", "--host", "0.0.0.0", "--no-auth",
        "--http-port", str(http_port), "--grpc-port", str(free_port()), "--nats", "nats://127.0.0.1:1",
        "--metadata-url", f"sqlite:///{tmp_path / 'evalsi.db'}", "--objects-url", str(tmp_path / "objects"),
        "--datasets-dir", str(datasets), "--grace-period", "1",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SERVICE_PATH), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True)
    try:
        import urllib.error
        import urllib.request

        deadline = time.monotonic() + 90  # the api imports for seconds; far longer on a loaded machine
        answered = False
        while time.monotonic() < deadline and not answered:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{http_port}/healthz", timeout=1)
                answered = True
            except OSError:
                time.sleep(0.05)
        assert answered, "the api never answered"
        process.send_signal(signal.SIGTERM)
        code, stderr = stopped(process)
        assert code == 0, stderr
        logs = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
        warnings = [entry for entry in logs if entry.get("level") == "warning" and "WITHOUT AUTHENTICATION" in
                    entry.get("event", "")]  # fmt: skip
        assert len(warnings) == 1 and warnings[0]["host"] == "0.0.0.0"
        assert "--no-auth or EVALSI_NO_AUTH=1" in warnings[0]["event"] and "auth section" in warnings[0]["event"]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
