"""The service kit: settings precedence and naming, the lifecycle's order, failures and readiness."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import aiohttp
import pytest

from evalsi.errors import BadInputError
from evalsi.ports import free_port
from evalsi.service.kit import serve_health
from evalsi.service.lifecycle import Lifecycle, running
from evalsi.service.settings import LOGGING, NATS, Option, build_parser, parse

LEASE = Option("--lease-ttl", float, 15.0, "lease seconds", config="scheduler.lease_ttl_s")
SWITCH = Option("--allow-non-loopback", switch=True, default=False, help="listen beyond loopback")
OPTIONS = (NATS, LEASE, SWITCH, Option("--policy", repeat=True), *LOGGING)


def settings(argv: Sequence[str] = (), environ: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return parse("scheduler", OPTIONS, list(argv), description="test", environ=environ or {})


# --- settings -------------------------------------------------------------------------------------------------


def test_a_services_own_key_is_prefixed_and_a_shared_key_is_not() -> None:
    assert LEASE.variable("scheduler") == "EVALSI_SCHEDULER_LEASE_TTL"
    assert NATS.variable("scheduler") == NATS.variable("ingest") == "EVALSI_NATS_URL"
    assert Option("--metrics-port").variable("worker") == "EVALSI_WORKER_METRICS_PORT"


def test_flags_win_over_variables_over_evalsi_yaml_over_defaults(tmp_path: Path) -> None:
    config = tmp_path / "evalsi.yaml"
    config.write_text("nats: {url: nats://from-yaml:4222}\nscheduler: {lease_ttl_s: 20}\n")
    assert settings().lease_ttl == 15.0 and settings().nats == "nats://127.0.0.1:4222"
    from_yaml = settings(["--config", str(config)])
    assert (from_yaml.lease_ttl, from_yaml.nats) == (20.0, "nats://from-yaml:4222")
    # The file may be named by its variable too.
    assert settings(environ={"EVALSI_CONFIG": str(config)}).lease_ttl == 20.0
    env = {"EVALSI_SCHEDULER_LEASE_TTL": "30", "EVALSI_CONFIG": str(config)}
    from_env = settings(environ=env)
    assert (from_env.lease_ttl, from_env.nats) == (30.0, "nats://from-yaml:4222")
    assert settings(["--lease-ttl", "40"], environ=env).lease_ttl == 40.0
    # Another service's key is not this one's.
    assert settings(environ={"EVALSI_WORKER_LEASE_TTL": "30"}).lease_ttl == 15.0


def test_a_bad_value_names_the_variable_or_the_yaml_key(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="EVALSI_SCHEDULER_LEASE_TTL='soon': expected float"):
        settings(environ={"EVALSI_SCHEDULER_LEASE_TTL": "soon"})
    with pytest.raises(BadInputError, match="EVALSI_LOG_FORMAT='xml': expected one of json, text"):
        settings(environ={"EVALSI_LOG_FORMAT": "xml"})
    config = tmp_path / "evalsi.yaml"
    config.write_text("scheduler: {lease_ttls: 20}\n")
    with pytest.raises(BadInputError, match="scheduler: lease_ttls: unknown key; did you mean lease_ttl_s"):
        settings(["--config", str(config)])
    with pytest.raises(BadInputError, match="no such config file"):
        settings(["--config", str(tmp_path / "missing.yaml")])


def test_switches_read_their_variable_as_a_boolean() -> None:
    assert not settings().allow_non_loopback and settings(["--allow-non-loopback"]).allow_non_loopback
    variable = "EVALSI_SCHEDULER_ALLOW_NON_LOOPBACK"
    assert settings(environ={variable: "yes"}).allow_non_loopback
    assert not settings(environ={variable: "off"}).allow_non_loopback
    with pytest.raises(BadInputError, match=f"{variable}='maybe': expected 1 or 0"):
        settings(environ={variable: "maybe"})


def test_repeatable_flags_collect_and_help_names_every_variable() -> None:
    assert settings(["--policy", "a.yaml", "--policy", "b.yaml"]).policy == ["a.yaml", "b.yaml"]
    text = build_parser("scheduler", OPTIONS, description="test", environ={}).format_help()
    for variable in ("EVALSI_NATS_URL", "EVALSI_SCHEDULER_LEASE_TTL", "EVALSI_LOG_LEVEL", "EVALSI_CONFIG"):
        assert variable in " ".join(text.split()), variable
    assert "evalsi.yaml scheduler.lease_ttl_s" in " ".join(text.split())


# --- the lifecycle --------------------------------------------------------------------------------------------


class Recorder:
    """Parts that note their starts and stops in one shared list."""

    def __init__(self) -> None:
        self.events: list[str] = []

    async def open(self, name: str, *, fail: bool = False) -> str:
        if fail:
            raise ConnectionError(f"{name} refused")
        self.events.append(f"start {name}")
        return name

    async def close(self, name: str) -> None:
        self.events.append(f"stop {name}")


class Broker:
    """A part with start() and stop(), as a FastStream broker has."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    async def start(self) -> None:
        self.events.append("start broker")

    async def stop(self) -> None:
        self.events.append("stop broker")


async def test_parts_start_in_order_and_stop_in_reverse() -> None:
    parts = Recorder()

    async def assemble(life: Lifecycle) -> None:
        assert await life.enter("nats", parts.open("nats"), parts.close) == "nats"
        await life.enter("store", parts.open("store"), parts.close)
        life.on_stop("driver", lambda: parts.close("driver"))  # built in place, stopped at its turn
        await life.enter_part("broker", Broker(parts.events))

    async with running("test", assemble) as life:
        assert life.started == ["nats", "store", "driver", "broker"]
        assert parts.events == ["start nats", "start store", "start broker"]
    assert parts.events[3:] == ["stop broker", "stop driver", "stop store", "stop nats"]


async def test_a_failed_start_stops_what_started_and_re_raises() -> None:
    parts = Recorder()

    async def assemble(life: Lifecycle) -> None:
        await life.enter("nats", parts.open("nats"), parts.close)
        await life.enter("store", parts.open("store"), parts.close)
        await life.enter("database", parts.open("database", fail=True), parts.close)
        await life.enter("never", parts.open("never"), parts.close)

    with pytest.raises(ConnectionError, match="database refused"):
        await Lifecycle("test").run(assemble, stop=asyncio.Event())
    assert parts.events == ["start nats", "start store", "stop store", "stop nats"]


async def test_a_failed_stop_does_not_keep_the_others_open() -> None:
    parts = Recorder()

    async def broken(_: str) -> None:
        raise OSError("close failed")

    async def assemble(life: Lifecycle) -> None:
        await life.enter("nats", parts.open("nats"), parts.close)
        await life.enter("store", parts.open("store"), broken)
        life.request_stop()

    await Lifecycle("test").run(assemble, stop=asyncio.Event())
    assert parts.events == ["start nats", "start store", "stop nats"]


async def test_a_fatal_error_in_a_running_part_stops_everything_then_is_re_raised() -> None:
    parts = Recorder()
    crash = asyncio.Event()

    async def loop() -> None:
        await crash.wait()
        raise RuntimeError("the adoption loop broke")

    async def assemble(life: Lifecycle) -> None:
        await life.enter("nats", parts.open("nats"), parts.close)
        await life.spawn("adoption", loop())
        await life.enter("consumer", parts.open("consumer"), parts.close)

    life = Lifecycle("test")
    run = asyncio.create_task(life.run(assemble, stop=asyncio.Event()))
    while life.phase != "running":
        await asyncio.sleep(0.01)
    crash.set()
    with pytest.raises(RuntimeError, match="the adoption loop broke"):
        await asyncio.wait_for(run, 5)
    assert parts.events == ["start nats", "start consumer", "stop consumer", "stop nats"]


async def test_spawned_work_is_cancelled_at_a_clean_stop_and_an_async_context_is_exited() -> None:
    events: list[str] = []

    class Session:
        async def __aenter__(self) -> Session:
            events.append("enter")
            return self

        async def __aexit__(self, *exc: object) -> None:
            events.append("exit")

    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            events.append("cancelled")
            raise

    async def assemble(life: Lifecycle) -> None:
        assert isinstance(await life.enter_context("session", Session()), Session)
        await life.spawn("loop", forever())

    stop = asyncio.Event()
    life = Lifecycle("test")
    run = asyncio.create_task(life.run(assemble, stop=stop))
    while life.phase != "running":
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(run, 5)  # a clean stop: nothing re-raised
    assert events == ["enter", "cancelled", "exit"]


async def test_readyz_flips_with_the_parts() -> None:
    port = free_port()
    release = asyncio.Event()
    bus_up = [True]

    async def slow_store() -> str:
        await release.wait()
        return "store"

    async def assemble(life: Lifecycle) -> None:
        await serve_health(life, port)
        await life.enter("bus", _value("bus"), _ignore, ready=lambda: (bus_up[0], "reconnecting"))
        await life.enter("store", slow_store(), _ignore)

    stop = asyncio.Event()
    life = Lifecycle("test")
    run = asyncio.create_task(life.run(assemble, stop=stop))
    base = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as http:
        status, body = await _get_when_up(http, base + "/readyz")
        assert status == 503 and body == {"ready": False, "reason": "starting (store next)"}
        async with http.get(base + "/healthz") as answer:  # alive while starting
            assert answer.status == 200
        release.set()
        while life.phase != "running":
            await asyncio.sleep(0.01)
        async with http.get(base + "/readyz") as answer:
            assert answer.status == 200 and (await answer.json())["ready"] is True
        bus_up[0] = False
        async with http.get(base + "/readyz") as answer:
            assert answer.status == 503 and (await answer.json())["reason"] == "bus: reconnecting"
        async with http.get(base + "/metrics") as answer:
            assert answer.status == 200 and "python_info" in await answer.text()
    stop.set()
    await asyncio.wait_for(run, 5)
    assert life.ready() == (False, "shutting down")


async def _get_when_up(http: aiohttp.ClientSession, url: str) -> tuple[int, object]:
    for _ in range(200):
        try:
            async with http.get(url) as answer:
                return answer.status, await answer.json()
        except aiohttp.ClientConnectionError:
            await asyncio.sleep(0.02)
    raise AssertionError(f"{url} never answered")


async def _value(value: str) -> str:
    return value


async def _ignore(_: object) -> None:
    return None


_HANGING_SERVICE = """
import asyncio, sys, threading
from evalsi.service.kit import run_service

async def assemble(life):
    async def hang(_):
        await asyncio.Event().wait()  # a part whose stop never returns
    await life.enter("stuck part", asyncio.sleep(0), hang)
    print("up", flush=True)

sys.exit(run_service("hangs", assemble, "info", "json", stop_deadline_s=float(sys.argv[1])))
"""


def test_a_stop_that_hangs_prints_every_threads_stack_and_exits_1_at_the_deadline(tmp_path: Path) -> None:
    script = tmp_path / "hangs.py"
    script.write_text(_HANGING_SERVICE)
    process = subprocess.Popen([sys.executable, str(script), "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == "up\n"
        process.send_signal(signal.SIGUSR1)  # kill -USR1: every thread's stack, and the service runs on
        time.sleep(0.5)
        assert process.poll() is None
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 1
    assert 1.5 < time.monotonic() - started < 15
    # Two dumps: the one asked for and the deadline's, each naming where the main thread waits.
    assert stderr.count("Current thread") + stderr.count("Thread 0x") >= 2, stderr
    # The main thread's frames down to the service's: uvloop's loop (the fast extra) is C and shows no frame of its
    # own; asyncio's shows run_forever.
    assert "in run_service" in stderr, stderr
