"""`evalsi serve`'s bundled nats-server admits each service as its own user with its own permissions, and a
served run, an Evaluate and a completed trace still work: not one permissions violation in the server's log."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import nats
import nats.errors
import pytest

import evalsi
from evalsi.bus.credentials import read_credentials
from evalsi.bus.permissions import all_identities
from evalsi.records import make_record
from evalsi.service.settings import NATS_CREDENTIALS
from evalsi.testing.stack import Stack
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest
from evalsi.v1alpha1.evaluator_pb2 import EvaluatorRef
from evalsi.v1alpha1.run_pb2 import RUN_STATE_SUCCEEDED

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "runs" / "qa-outputs.yaml"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One stack for the module (a stack is ~10 CPU seconds to start); the refusals are tested last, after the
    served run has shown a log free of violations."""
    running = Stack(tmp_path_factory.mktemp("serve"), datasets_dir=ROOT / "examples").start()
    try:
        yield running
    finally:
        running.stop()


def _violations(stack: Stack) -> list[str]:
    assert stack.supervisor.nats is not None
    return [line for line in stack.supervisor.nats.log_path.read_text().splitlines() if "Violation" in line]


def test_every_service_works_as_its_own_nats_user(stack: Stack) -> None:
    supervisor = stack.supervisor
    assert supervisor.nats is not None
    # Each service was handed its own user's file, by path; nothing secret is on any command line.
    variable = NATS_CREDENTIALS.variable("")
    # sandboxd is on no bus (bus_identity ""): a sandbox host holds no bus credentials.
    given = {child.name: child.env.get(variable, "") for child in supervisor.children if child.bus_identity}
    assert not [child.name for child in supervisor.children if not child.bus_identity and variable in child.env]
    assert all(given.values()), given
    users = {name: read_credentials(path).user for name, path in given.items()}
    assert users["api"] == "api" and users["scheduler-0"] == "scheduler" and users["ingest"] == "ingest"
    assert users["worker-cpu-0"] == "worker-cpu" and users["worker-judge-0"] == "worker-judge"
    assert supervisor.bus_users is not None
    directory = supervisor.bus_users.directory
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    for path in directory.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in directory.iterdir()) == sorted(
        all_identities([w.pool for w in stack.config.workers]))
    config = Path(supervisor.nats.log_path).parent / "nats.conf"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    passwords = [read_credentials(given[name]).password for name in given]
    command_line = Path(f"/proc/{supervisor.nats.pid}/cmdline").read_bytes().decode()
    assert str(config) in command_line and not any(password in command_line for password in passwords)

    # A served run: the api publishes control, the scheduler plans work, a worker returns results, events flow.
    with evalsi.Client(stack.grpc) as client:
        handle = client.runs.create(SPEC)
        events = list(handle.watch())  # WatchRun: the api reads runs.events.<run> until the run ends
        served = handle.wait()
        assert served.state == RUN_STATE_SUCCEEDED, served.message
        # A synchronous Evaluate: the api's request on evaluate.cpu, the worker's reply to the api's inbox.
        request = EvaluateRequest(evaluators=[EvaluatorRef(ref="exact-match")])
        request.records.extend([make_record(id="a", output="Paris", reference="Paris")])
        assert client.evaluate(request).results[0].scores[0].passed
    assert events
    # A completed trace: ingest publishes it for the policy service (its own stream and durable).
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", "name": "root",
        "startTimeUnixNano": "1", "endTimeUnixNano": "2"}]}]}]}).encode()
    urllib.request.urlopen(urllib.request.Request(
        f"http://127.0.0.1:{stack.config.ingest.http_port}/v1/traces", data=body, method="POST",
        headers={"content-type": "application/json"}), timeout=10).read()
    time.sleep(stack.config.ingest.grace_s + 2.0)  # complete, published, consumed by the policy service
    assert _violations(stack) == []


async def _as_worker_cpu(url: str, credentials_file: Path) -> tuple[list[str], list[str]]:
    """What the cpu worker's user may not do: publish run control or tasks, read the judge pool's work. Returns
    the errors its connection saw and what the judge pool's durable refused it."""
    errors: list[str] = []

    async def on_error(exc: Exception) -> None:
        errors.append(str(exc))

    credentials = read_credentials(credentials_file)
    nc = await nats.connect(url, error_cb=on_error, inbox_prefix=f"_INBOX.{credentials.user}",
                            **credentials.connect_options())
    refused: list[str] = []
    try:
        await nc.publish("runs.control.r1", b"cancel")
        await nc.publish("work.judge", b"task")
        await nc.subscribe("work.judge")
        await nc.flush()
        js = nc.jetstream(timeout=1.0)
        try:
            await js.pull_subscribe("work.judge", durable="work-judge", stream="WORK")
        except (nats.errors.TimeoutError, nats.errors.Error) as exc:
            refused.append(type(exc).__name__)
        await asyncio.sleep(0.3)
    finally:
        await nc.close()
    return errors, refused


def test_a_workers_user_is_refused_other_subjects_and_other_pools_work(stack: Stack) -> None:
    supervisor = stack.supervisor
    assert supervisor.nats is not None
    worker = supervisor.child("worker-cpu-0")
    errors, refused = asyncio.run(_as_worker_cpu(supervisor.nats.url,
                                                 Path(worker.env[NATS_CREDENTIALS.variable("")])))
    assert 'nats: permissions violation for publish to "runs.control.r1"' in errors
    assert 'nats: permissions violation for publish to "work.judge"' in errors
    assert 'nats: permissions violation for subscription to "work.judge"' in errors
    assert refused  # the judge pool's durable answers nothing to the cpu worker's user
    log = "\n".join(_violations(stack))
    assert '"$G/user:worker-cpu" - Publish Violation - Subject "runs.control.r1"' in log
    assert 'Subject "$JS.API.CONSUMER.INFO.WORK.work-judge"' in log


def test_nobody_without_credentials_reaches_the_bundled_nats(stack: Stack) -> None:
    assert stack.supervisor.nats is not None

    async def anonymous() -> None:
        nc = await nats.connect(stack.supervisor.nats.url, allow_reconnect=False, connect_timeout=2)
        await nc.close()

    with pytest.raises((nats.errors.Error, OSError)) as raised:
        asyncio.run(anonymous())
    assert "authorization" in str(raised.value).lower()
    assert os.environ.get(NATS_CREDENTIALS.variable("")) is None  # this test process was handed nothing


def test_no_service_inherits_the_callers_own_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """§17: the services, the worker above all, receive no user credentials, even those of the shell that runs
    `evalsi serve` (the CLI's token, key and GitHub Actions OIDC request token)."""
    from evalsi.service.config import Config
    from evalsi.service.supervisor import CALLER_CREDENTIALS, plan_children

    for name in CALLER_CREDENTIALS:
        monkeypatch.setenv(name, f"caller-secret-{name}")
    monkeypatch.setenv("JUDGE_KEY", "the-servers-own")  # a secret evalsi.yaml's judges name: the workers need it
    for child in plan_children(Config(), "nats://127.0.0.1:4222", tmp_path):
        assert not [name for name in CALLER_CREDENTIALS if name in child.env], child.name
        if child.name == "sandboxd":  # a sandbox host holds no provider keys (§17)
            assert "JUDGE_KEY" not in child.env
            continue
        assert child.env["JUDGE_KEY"] == "the-servers-own"
