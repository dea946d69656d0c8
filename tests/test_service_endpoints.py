"""Every service on the kit: each binary, started as a process on a real nats-server, answers /healthz, /readyz
and /metrics and stops with exit 0 on SIGTERM; --help names every variable; a bad variable exits 2; a failed
start leaves no NATS connection open."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from evalsi.bus.natsserver import NatsServer
from evalsi.errors import BadInputError
from evalsi.service.lifecycle import Lifecycle
from evalsi.testing.services import free_port
from evalsi_api import main as api_main
from evalsi_ingest import main as ingest_main
from evalsi_policy import main as policy_main
from evalsi_scheduler import main as scheduler_main
from evalsi_worker import main as worker_main


@pytest.fixture(scope="module")
def nats() -> Iterator[NatsServer]:
    with NatsServer() as server:
        yield server


def _commands(tmp_path: Path, nats_url: str) -> dict[str, tuple[list[str], int]]:
    """Each service's command line and the port its health endpoints are on."""
    objects = str(tmp_path / "objects")
    traces = f"sqlite:///{tmp_path / 'traces.db'}"
    ports = {name: free_port() for name in ("api", "ingest", "policy", "scheduler", "worker")}
    return {
        "ingest": (["evalsi_ingest.main", "--http-port", "0", "--grpc-port", "0", "--traces-url", traces,
                    "--nats", nats_url, "--metrics-port", str(ports["ingest"])], ports["ingest"]),
        "policy": (["evalsi_policy.main", "--nats", nats_url, "--traces-url", traces, "--objects-url", objects,
                    "--metrics-port", str(ports["policy"])], ports["policy"]),
        "scheduler": (["evalsi_scheduler.main", "--nats", nats_url, "--objects-url", objects,
                       "--metadata-url", f"sqlite:///{tmp_path / 'scheduler.db'}",
                       "--metrics-port", str(ports["scheduler"])], ports["scheduler"]),
        "worker": (["evalsi_worker.main", "--pool", "cpu", "--nats", nats_url,
                    "--metrics-port", str(ports["worker"])], ports["worker"]),
        "api": (["evalsi_api.main", "--http-port", str(ports["api"]), "--grpc-port", str(free_port()),
                 "--nats", nats_url, "--metadata-url", f"sqlite:///{tmp_path / 'api.db'}", "--objects-url", objects,
                 "--datasets-dir", str(tmp_path), "--grace-period", "1"], ports["api"]),
    }


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _wait_ready(port: int, process: subprocess.Popen[str], timeout_s: float = 60.0) -> str:
    """The body of the first 200 from /readyz; fails if the process exits or it never comes."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"exited with {process.returncode}: {process.stderr.read() if process.stderr else ''}")
        try:
            status, body = _get(f"http://127.0.0.1:{port}/readyz")
        except OSError:
            time.sleep(0.1)
            continue
        if status == 200:
            return body
        last = f"{status} {body}"
        time.sleep(0.1)
    raise AssertionError(f"/readyz on {port} never answered 200; last: {last}")


def test_every_service_serves_health_readiness_and_metrics_and_stops_on_sigterm(
    tmp_path: Path, nats: NatsServer
) -> None:
    commands = _commands(tmp_path, nats.url)
    processes = {
        name: subprocess.Popen([sys.executable, "-m", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, cwd=tmp_path)
        for name, (argv, _) in commands.items()
    }
    try:
        for name, (_, port) in commands.items():
            body = _wait_ready(port, processes[name])
            # The api's own /readyz, or the kit's: both say ready only when everything started.
            assert json.loads(body) in ({"status": "ready"}, {"ready": True, "reason": ""}), (name, body)
            status, text = _get(f"http://127.0.0.1:{port}/healthz")
            assert status == 200, (name, text)
            status, metrics = _get(f"http://127.0.0.1:{port}/metrics")
            assert status == 200 and "# TYPE" in metrics, (name, metrics[:200])
        for process in processes.values():
            process.send_signal(signal.SIGTERM)
        for name, process in processes.items():
            code = process.wait(timeout=30)
            assert code == 0, f"{name} exited {code}: {process.stderr.read() if process.stderr else ''}"
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()


# --- each service main over the kit ----------------------------------------------------------------------------

SERVICES = {"api": api_main, "ingest": ingest_main, "policy": policy_main, "scheduler": scheduler_main,
            "worker": worker_main}


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_help_lists_every_flag_with_its_variable(service: str, capsys: pytest.CaptureFixture[str]) -> None:
    module = SERVICES[service]
    with pytest.raises(SystemExit) as done:
        module.main(["--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for item in module.OPTIONS:
        assert item.flag in text, item.flag
        if not item.repeat:
            assert f"${item.variable(service)}" in text, item.variable(service)


@pytest.mark.parametrize(("service", "variable", "value"), [
    ("scheduler", "EVALSI_SCHEDULER_LEASE_TTL", "soon"),
    ("worker", "EVALSI_WORKER_TASKS", "many"),
    ("policy", "EVALSI_POLICY_RELOAD", "often"),
])
def test_a_bad_variable_exits_2_naming_it(service: str, variable: str, value: str,
                                          monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SystemExit) as done:
        SERVICES[service].main([])
    assert done.value.code == 2
    assert f"evalsi-{service}: {variable}={value!r}: expected" in capsys.readouterr().err


def _connections(nats: NatsServer) -> int:
    with urllib.request.urlopen(f"{nats.monitor_url}/connz", timeout=2) as answer:
        return int(json.loads(answer.read())["num_connections"])


@pytest.mark.parametrize("service", ["scheduler", "policy"])
async def test_a_start_failing_after_the_bus_connected_leaves_no_connection_open(
    service: str, nats: NatsServer, tmp_path: Path
) -> None:
    # The scheduler connects to NATS before it opens the metadata store; the policy service opens its trace store
    # first. Either way nothing the failed start opened is left when the lifecycle re-raises.
    argv = ["--nats", nats.url, "--metadata-url", "mysql://nowhere/db", "--objects-url", str(tmp_path / "objects")]
    if service == "policy":
        argv += ["--traces-url", f"sqlite:///{tmp_path / 'traces.db'}"]
    module = SERVICES[service]
    args = module.parse_flags(service, module.OPTIONS, argv, description="test", environ={})
    before = _connections(nats)
    with pytest.raises(BadInputError, match="mysql://nowhere/db"):
        await Lifecycle(service).run(partial(module.assemble, args), stop=asyncio.Event())
    # The server notes a closed connection a moment after the client closed it.
    deadline = time.monotonic() + 5
    while _connections(nats) != before and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert _connections(nats) == before
