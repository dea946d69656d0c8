"""compose.yaml's bus users, for real (there is no Docker engine here, so the containers' commands run as local
processes): the bus-credentials init command writes the users into a directory standing for its volume, a real
nats-server starts with the command line compose gives it, and each service connects with the file its container
would see. A served run and an Evaluate go through the api, the scheduler and the cpu worker started with their
compose commands (addresses and stores mapped to this machine), with every other service of the file running, and a
trace goes from ingest to the policy service, without one permissions violation; the cpu worker's user is refused
another pool's work, and nobody connects without a user."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest
from click.testing import CliRunner
from test_compose import (
    INIT,
    NATS_CREDENTIALS_ENV,
    OURS,
    ROOT,
    SCRIPTS,
    SERVICES,
    command,
    environment,
    host_path,
    identity_of,
    init_argv,
)

import evalsi
from evalsi.bus import subjects
from evalsi.bus.credentials import inbox_prefix, read_credentials
from evalsi.bus.natsserver import NatsServer
from evalsi.bus.permissions import ADMIN, all_identities
from evalsi.cli.main import cli
from evalsi.ports import free_port
from evalsi.records import make_record
from evalsi.service.bus_users_files import AUTHORIZATION_FILE, CREDENTIALS_FILE, SERVER_DIRECTORY
from evalsi.testing.bus_probes import anonymous_refusal, probe_worker
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest
from evalsi.v1alpha1.evaluator_pb2 import EvaluatorRef
from evalsi.v1alpha1.run_pb2 import RUN_STATE_SUCCEEDED

SPEC = ROOT / "examples" / "runs" / "qa-outputs.yaml"
SERVICES_INIT = SERVICES[INIT]
# Every Evals.si service of the file, so each shows it starts (streams, durables, inboxes) as its own user.
RUNNING = OURS
# Compose's `${NAME:-default}` in a value: its default here (no secret of this machine reaches the services).
_INTERPOLATED = re.compile(r"\$\{\w+:-([^}]*)\}")
# Root here may hand files to the image's uid, as the init container does; anyone else keeps them.
OWNER = "10001" if os.geteuid() == 0 else str(os.geteuid())


def run_init(volume: Path, *extra: str) -> str:
    """The init service's command, as compose runs it (``docker compose run --rm bus-credentials EXTRA`` appends),
    with --out at the directory standing for its volume and --owner at a user of this machine; its output."""
    argv = init_argv()
    mapped = []
    for arg in argv[1:]:
        name, _, value = arg.partition("=")
        if name == "--out":
            arg = f"--out={host_path(INIT, value, {INIT: volume})}"
        elif name == "--owner":
            arg = f"--owner={OWNER}"
        mapped.append(arg)
    result = CliRunner().invoke(cli, [*mapped, *extra])
    assert result.exit_code == 0, result.output
    return result.output


def passwords(volume: Path) -> dict[str, str]:
    return {p.parent.name: read_credentials(p).password for p in volume.glob(f"*/{CREDENTIALS_FILE}")}


def service_credentials(name: str, volume: Path) -> Path:
    """The file a service's container reads (EVALSI_NATS_CREDENTIALS), where its mount puts it here."""
    return host_path(name, environment(name)[NATS_CREDENTIALS_ENV], {INIT: volume})


def test_the_init_command_keeps_its_users_across_restarts_and_rotates_on_request(tmp_path: Path) -> None:
    volume = tmp_path / "bus-credentials"
    output = run_init(volume)
    first = passwords(volume)
    pools = [identity.removeprefix("worker-") for identity in first if identity.startswith("worker-")]
    assert sorted(first) == sorted(all_identities(pools))
    assert not any(password in output for password in first.values())  # said what it wrote, never a secret
    authorization = volume / SERVER_DIRECTORY / AUTHORIZATION_FILE
    for path in (authorization, *volume.glob(f"*/{CREDENTIALS_FILE}")):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    for name in OURS:  # each service's file is its container user's, nats-server's and the operator's are not
        assert service_credentials(name, volume).stat().st_uid == int(OWNER)
    assert authorization.stat().st_uid == os.geteuid()
    text = authorization.read_text()

    run_init(volume)  # the next `docker compose up`: the services already running keep connecting
    assert passwords(volume) == first and authorization.read_text() == text
    (volume / "worker-cpu" / CREDENTIALS_FILE).unlink()  # a file lost: that user alone gets a new password
    run_init(volume)
    again = passwords(volume)
    assert {k for k in first if again[k] != first[k]} == {"worker-cpu"}

    run_init(volume, "--rotate")  # `docker compose run --rm bus-credentials --rotate`
    rotated = passwords(volume)
    assert sorted(rotated) == sorted(first) and not any(rotated[k] == again[k] for k in first)
    assert all(password in authorization.read_text() for password in rotated.values())


def test_the_init_services_capabilities_are_enough_to_write_and_then_keep(tmp_path: Path) -> None:
    """compose runs it as root with every capability dropped but its cap_add: enough to write the users, hand them
    to the services' user, and (the next `up`) read and keep them; one fewer and the second run fails."""
    assert os.geteuid() == 0, "the init container runs as root: so must this test"
    setpriv = shutil.which("setpriv")
    assert setpriv, "setpriv (util-linux) is needed to drop capabilities as compose does"
    volume = tmp_path / "bus-credentials"
    argv = [str(Path(sys.executable).parent / "evalsi"), *init_argv()[1:]]
    argv = [f"--out={volume}" if a.startswith("--out=") else f"--owner={OWNER}" if a.startswith("--owner=") else a
            for a in argv]

    def run(caps: list[str]) -> subprocess.CompletedProcess[str]:
        only = ",".join(["-all", *(f"+{cap.lower()}" for cap in caps)])
        return subprocess.run([setpriv, f"--inh-caps={only}", f"--bounding-set={only}", *argv],
                              capture_output=True, text=True, timeout=60)

    caps = [str(cap) for cap in SERVICES_INIT["cap_add"]]
    assert run(caps).returncode == 0
    first = passwords(volume)
    kept = run(caps)
    assert kept.returncode == 0, kept.stderr
    assert passwords(volume) == first
    for missing in caps:
        fewer = run([cap for cap in caps if cap != missing])
        assert fewer.returncode != 0, f"{missing} is not needed: drop it from cap_add"
    assert passwords(volume) == first  # a refused run replaced nothing


@dataclass
class ComposeBus:
    volume: Path
    nats: NatsServer


@pytest.fixture(scope="module")
def bus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ComposeBus]:
    """The init command's users, and nats-server started with compose's command line (its paths mapped)."""
    volume = tmp_path_factory.mktemp("compose") / "bus-credentials"
    run_init(volume)
    argv = command("nats")
    assert argv[0] == "nats-server"
    rest, config = list(argv[1:]), ""
    while "-c" in rest:
        at = rest.index("-c")
        config = str(host_path("nats", rest[at + 1], {INIT: volume}))
        del rest[at:at + 2]
    # What remains is what NatsServer itself gives, on this machine's ports and a store of its own.
    assert [a for a in rest if a.startswith("-")] == ["-js", "-sd", "-m"], argv
    with NatsServer(extra_args=["-c", config]) as server:  # ready = /healthz?js-enabled-only=true, compose's check
        yield ComposeBus(volume, server)


def test_every_service_connects_as_its_own_user_and_nobody_else_does(bus: ComposeBus) -> None:
    async def connect(path: Path) -> str:
        credentials = read_credentials(path)
        errors: list[str] = []

        async def on_error(exc: Exception) -> None:
            errors.append(str(exc))

        nc = await nats.connect(bus.nats.url, allow_reconnect=False, error_cb=on_error,
                                inbox_prefix=inbox_prefix(credentials.user), **credentials.connect_options())
        try:
            await nc.subscribe(f"{inbox_prefix(credentials.user)}.probe")  # its own inbox, which every user may read
            await nc.flush()
            await asyncio.sleep(0.1)
        finally:
            await nc.close()
        assert not errors, errors
        return credentials.user

    for name in OURS:
        assert asyncio.run(connect(service_credentials(name, bus.volume))) == identity_of(name)
    assert "authorization" in asyncio.run(anonymous_refusal(bus.nats.url)).lower()
    wrong = bus.volume.parent / "wrong"
    wrong.write_text("api:not-its-password\n")
    with pytest.raises(nats.errors.Error, match=r"(?i)authorization"):
        asyncio.run(connect(wrong))


def local_command(name: str, bus: ComposeBus, state: Path) -> tuple[list[str], dict[str, str], int]:
    """A compose service's command and environment on this machine: the bus and stores mapped to local ones, its
    ports to free ones, container paths to where their mounts are here. Also the port of its /readyz."""
    stores = {"--nats": bus.nats.url, "--objects-url": str(state / "objects"),
              "--traces-url": f"sqlite:///{state / 'traces.db'}", "--host": "127.0.0.1"}
    ports = {"--http-port": free_port(), "--grpc-port": free_port(), "--metrics-port": free_port()}
    argv = []
    for arg in command(name)[1:]:
        key, equals, value = arg.partition("=")
        assert equals or not arg.startswith("--") or arg == "--no-auth", f"{name}: write {arg} as --flag=value"
        if key in stores:
            value = stores[key]
        elif key in ports:
            value = str(ports[key])
        elif value.startswith("/"):
            value = str(host_path(name, value, {INIT: bus.volume}))
        argv.append(f"{key}={value}" if equals else arg)
    env = {key: str(host_path(name, value, {INIT: bus.volume})) if value.startswith("/")
           else _INTERPOLATED.sub(r"\1", value) for key, value in environment(name).items()}
    env["EVALSI_METADATA_URL"] = f"sqlite:///{state / 'metadata.db'}"  # compose's Postgres, here a shared SQLite
    ready = ports["--http-port"] if command(name)[0] == "evalsi-api" else ports["--metrics-port"]
    module = SCRIPTS[command(name)[0]].split(":")[0]
    return [sys.executable, "-m", module, *argv], {**os.environ, **env}, ready


def _port(argv: list[str], name: str) -> int:
    return int(next(a.partition("=")[2] for a in argv if a.startswith(f"{name}=")))


@dataclass
class Services:
    grpc: str
    otlp_http: str
    logs: Path


@pytest.fixture(scope="module")
def services(bus: ComposeBus, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    state = tmp_path_factory.mktemp("compose-state")
    started: dict[str, subprocess.Popen[bytes]] = {}
    grpc = otlp = 0
    try:
        ready = {}
        for name in RUNNING:
            argv, env, port = local_command(name, bus, state)
            if command(name)[0] == "evalsi-api":
                grpc = _port(argv, "--grpc-port")
            elif command(name)[0] == "evalsi-ingest":
                otlp = _port(argv, "--http-port")
            with open(state / f"{name}.log", "wb") as log:
                started[name] = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                                 stdin=subprocess.DEVNULL, cwd=state)
            ready[name] = port
        for name, port in ready.items():
            _wait_ready(name, port, started[name], state)
        yield Services(f"grpc://127.0.0.1:{grpc}", f"http://127.0.0.1:{otlp}/v1/traces", state)
    finally:
        for process in started.values():
            process.terminate()
        for process in started.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_ready(name: str, port: int, process: subprocess.Popen[bytes], state: Path, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{name} exited {process.returncode}:\n{(state / f'{name}.log').read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{name} not ready in {timeout_s} s:\n{(state / f'{name}.log').read_text()[-3000:]}")


def _violations(bus: ComposeBus) -> list[str]:
    return [line for line in bus.nats.log_path.read_text().splitlines() if "Violation" in line]


def test_a_run_and_an_evaluate_go_through_the_compose_services_each_as_its_own_user(
    bus: ComposeBus, services: Services
) -> None:
    with evalsi.Client(services.grpc) as client:
        handle = client.runs.create(SPEC)
        events = list(handle.watch())  # WatchRun: the api's user reads runs.events.<run>
        served = handle.wait()
        assert served.state == RUN_STATE_SUCCEEDED, served.message
        request = EvaluateRequest(evaluators=[EvaluatorRef(ref="exact-match")])
        request.records.extend([make_record(id="a", output="Paris", reference="Paris")])
        assert client.evaluate(request).results[0].scores[0].passed  # evaluate.cpu, answered to the api's inbox
    assert events
    # A completed trace: ingest publishes it (after its --grace) for the policy service's durable.
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", "name": "root",
        "startTimeUnixNano": "1", "endTimeUnixNano": "2"}]}]}]}).encode()
    urllib.request.urlopen(urllib.request.Request(services.otlp_http, data=body, method="POST",
                                                  headers={"content-type": "application/json"}), timeout=10).read()
    assert _policy_acked_a_trace(bus), "the trace never reached the policy service"
    assert _violations(bus) == [], "a compose service was refused something it needs"


def _policy_acked_a_trace(bus: ComposeBus, timeout_s: float = 30.0) -> bool:
    """Whether the policy service's durable acked a completed trace (ingest publishes one after its --grace), asked
    as the operator's user."""

    async def acked() -> bool:
        admin = read_credentials(bus.volume / ADMIN / CREDENTIALS_FILE)
        nc = await nats.connect(bus.nats.url, allow_reconnect=False, **admin.connect_options())
        try:
            js = nc.jetstream(timeout=2.0)
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                info = await js.consumer_info(subjects.TRACES_STREAM, subjects.POLICY_CONSUMER)
                if info.ack_floor is not None and (info.ack_floor.stream_seq or 0) >= 1:
                    return True
                await asyncio.sleep(0.5)
            return False
        finally:
            await nc.close()

    return asyncio.run(acked())


def test_the_cpu_workers_user_consumes_its_own_pool_only(bus: ComposeBus, services: Services) -> None:
    probe = asyncio.run(probe_worker(bus.nats.url, service_credentials("worker-cpu", bus.volume), "judge"))
    assert probe.own_durable  # work-cpu on work.cpu, which the worker started with compose's command created
    assert 'nats: permissions violation for publish to "runs.control.r1"' in probe.errors
    assert 'nats: permissions violation for publish to "work.judge"' in probe.errors
    assert 'nats: permissions violation for subscription to "work.judge"' in probe.errors
    assert probe.refused  # the judge pool's durable answers nothing to the cpu worker's user
    log = "\n".join(_violations(bus))
    assert '"$G/user:worker-cpu" - Publish Violation - Subject "runs.control.r1"' in log
    assert 'Subject "$JS.API.CONSUMER.INFO.WORK.work-judge"' in log
