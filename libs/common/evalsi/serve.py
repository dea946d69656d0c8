"""``evalsi serve``: the standalone tier on one machine.

Starts the bundled nats-server with JetStream and every service as its own process on loopback (SQLite and
a local directory by default; Postgres and S3 when evalsi.yaml says so), restarts a child that crashes, and
stops everything cleanly on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from evalsi.config import Config, require_loopback
from evalsi.natsserver import NatsServer

RESTART_BACKOFF_S = (0.5, 1.0, 2.0, 5.0, 10.0)


@dataclass
class Child:
    """One supervised service process."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    started_at: float = 0.0

    def start(self) -> None:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.started_at = time.monotonic()

    def exited(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def stop(self, grace_s: float) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _module(name: str) -> list[str]:
    return [sys.executable, "-m", name]


def plan_children(config: Config, nats_url: str, state_dir: Path) -> list[Child]:
    """The service processes for a config: one api, one ingest, one policy service, the schedulers, and the
    workers of each pool.

    The api and ingest share one trace store, ``<state>/traces.db``: ingest writes it, TraceService reads it.
    """
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    common = [
        "--nats",
        nats_url,
        "--metadata-url",
        _resolve_url(config.metadata_url),
        "--objects-url",
        _resolve_url(config.objects_url),
    ]
    logs = state_dir / "logs"
    traces_url = _resolve_url(config.traces_url) if config.traces_url else traces_url_for(state_dir)
    taken = {config.api.http_port, config.api.grpc_port, config.ingest.http_port, config.ingest.grpc_port}
    children = [
        Child(
            "api",
            [
                *_module("evalsi_api.main"),
                *common,
                "--host",
                config.api.host,
                "--http-port",
                str(config.api.http_port),
                "--grpc-port",
                str(config.api.grpc_port),
                "--datasets-dir",
                str(Path(config.datasets_dir).resolve()),
                "--traces-url",
                traces_url,
            ],
            env,
            logs / "api.log",
        ),
        Child(
            "ingest",
            [
                *_module("evalsi_ingest.main"),
                "--host",
                config.api.host,
                "--http-port",
                str(config.ingest.http_port),
                "--grpc-port",
                str(config.ingest.grpc_port),
                "--traces-url",
                traces_url,
                "--grace",
                str(config.ingest.grace_s),
                "--nats",
                nats_url,
                "--metrics-port",
                str(_free_port(taken)),
            ],
            env,
            logs / "ingest.log",
        ),
        Child(
            "policy",
            [*_module("evalsi_policy.main"), *common, "--traces-url", traces_url, "--metrics-port",
             str(_free_port(taken)), "--reload", "1"],
            env,
            logs / "policy.log",
        ),
    ]
    for i in range(config.scheduler.replicas):
        children.append(
            Child(
                f"scheduler-{i}",
                [
                    *_module("evalsi_scheduler.main"),
                    *common,
                    "--lease-ttl",
                    str(config.scheduler.lease_ttl_s),
                    "--metrics-port",
                    str(_free_port(taken)),
                ],
                env,
                logs / f"scheduler-{i}.log",
            )
        )
    for worker in config.workers:
        for i in range(worker.replicas):
            name = f"worker-{worker.pool}-{i}"
            argv = [
                *_module("evalsi_worker.main"),
                *common,
                "--pool",
                worker.pool,
                "--concurrency",
                str(worker.concurrency),
                "--metrics-port",
                str(_free_port(taken)),
            ]
            children.append(Child(name, argv, env, logs / f"{name}.log"))
    return children


def traces_url_for(state_dir: Path) -> str:
    """The trace store ingest writes and the api reads: ``sqlite:///<state>/traces.db`` (absolute)."""
    return "sqlite:///" + str((state_dir / "traces.db").resolve())


def _free_port(taken: set[int]) -> int:
    """A free loopback port for a child's /metrics, /healthz and /readyz, never one in ``taken`` (the
    kernel may hand a just-released port out again, e.g. one the api is about to bind)."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if port not in taken:
            taken.add(port)
            return port


def metrics_url(child: Child) -> str:
    """Where a background service serves /metrics ("" for the api, which serves it on its HTTP port)."""
    if "--metrics-port" not in child.argv:
        return ""
    return f"http://127.0.0.1:{child.argv[child.argv.index('--metrics-port') + 1]}/metrics"


def _resolve_url(url: str) -> str:
    """Relative sqlite and directory paths are made absolute, so every child sees the same state."""
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        return "sqlite:///" + str(Path(url.removeprefix("sqlite:///")).resolve())
    if "://" not in url:
        return str(Path(url).resolve())
    return url


@dataclass
class Supervisor:
    config: Config
    state_dir: Path
    echo: Callable[[str], None] = print
    children: list[Child] = field(default_factory=list)
    nats: NatsServer | None = None
    # Tests turn restarts off to watch another replica take over from a killed one.
    restart: bool = True
    _stopping: bool = False

    def start(self) -> None:
        require_loopback(self.config.api.host, "api.host")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        (self.state_dir / "logs").mkdir(exist_ok=True)
        database = _resolve_url(self.config.metadata_url)
        if database.startswith("sqlite:///"):
            Path(database.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        objects = _resolve_url(self.config.objects_url)
        if "://" not in objects:
            Path(objects).mkdir(parents=True, exist_ok=True)
        nats_url = self.config.nats_url
        if not nats_url:
            self.nats = NatsServer(store_dir=str(self.state_dir / "nats")).start()
            nats_url = self.nats.url
            self.echo(f"nats       {nats_url} (JetStream, store {self.state_dir / 'nats'})")
        self.children = plan_children(self.config, nats_url, self.state_dir)
        for child in self.children:
            child.start()
        api = self.config.api
        self.echo(f"http api   http://{api.host}:{api.http_port}   (/healthz /readyz /metrics)")
        self.echo(f"grpc api   grpc://{api.host}:{api.grpc_port}")
        ingest = self.config.ingest
        self.echo(
            f"otlp       http://{api.host}:{ingest.http_port} (OTLP/HTTP) · {api.host}:{ingest.grpc_port} (OTLP/gRPC)"
            f" · traces {self.config.traces_url or traces_url_for(self.state_dir)}"
        )
        self.echo(
            f"state      {_resolve_url(self.config.metadata_url)} · objects {_resolve_url(self.config.objects_url)}"
        )
        for child in self.children:
            metrics = metrics_url(child) or f"http://{api.host}:{api.http_port}/metrics"
            self.echo(f"{child.name:<18} metrics {metrics}   log {child.log_path}")

    def supervise_once(self) -> None:
        """Restart children that exited, with a growing backoff for ones that keep crashing."""
        for child in self.children:
            code = child.exited()
            if code is None or self._stopping or not self.restart:
                continue
            ran_for = time.monotonic() - child.started_at
            if ran_for > 60:
                child.restarts = 0
            delay = RESTART_BACKOFF_S[min(child.restarts, len(RESTART_BACKOFF_S) - 1)]
            self.echo(
                f"{child.name} exited with {code} after {ran_for:.1f} s; restarting in {delay} s "
                f"(log: {child.log_path})"
            )
            time.sleep(delay)
            child.restarts += 1
            child.start()

    def child(self, name: str) -> Child:
        for child in self.children:
            if child.name == name:
                return child
        raise KeyError(f"no child named {name!r}; children: {', '.join(c.name for c in self.children)}")

    def stop(self, grace_s: float = 10.0) -> None:
        self._stopping = True
        for child in self.children:
            if child.process is not None and child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for child in self.children:
            child.stop(max(0.1, deadline - time.monotonic()))
        if self.nats is not None:
            self.nats.stop()

    def run_forever(self) -> None:
        stop = {"requested": False}

        def request_stop(signum: int, _frame: object) -> None:
            stop["requested"] = True

        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)
        try:
            while not stop["requested"]:
                self.supervise_once()
                time.sleep(0.2)
        finally:
            self.echo("stopping: services drain, then nats stops")
            self.stop()
            self.echo("stopped")
