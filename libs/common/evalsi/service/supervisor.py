"""``evalsi serve``: the standalone tier on one machine.

Starts the bundled nats-server with JetStream and every service as its own process on loopback (SQLite and
a local directory by default; Postgres and S3 when evalsi.yaml says so), restarts a child that crashes, and
stops everything cleanly on Ctrl-C or SIGTERM.

- Store and bus URLs, which may carry passwords, reach the services as ``EVALSI_*`` environment variables,
  never on their command lines (which every user of the machine reads with ``ps``); the console masks them.
- The bundled nats-server admits only the services, each as its own user (``evalsi.service.bus_users``); with
  an external NATS, ``nats.credentials_file`` is handed on.
- Every port is checked before anything starts; a taken one is a usage error naming it and its service.
- No child outlives the supervisor: each gets SIGKILL from the kernel when it dies, even by SIGKILL
  (``PR_SET_PDEATHSIG``), and each runs in its own process group, stopped as a whole.
- Services are forks of the supervisor, which imports what they import once, before the first fork
  (``evalsi.service.forked`` says why and what a fork resets); a child given as a plain command is exec'd.
- One "ready" line once every service answers its ``/readyz``, with the addresses to use.
- A child that keeps crashing (more than ``MAX_RESTARTS`` exits in a row, each within ``RESTART_WINDOW_S`` of
  its start) ends the supervisor with its last log lines, rather than a restart loop behind a console that
  looks fine. Counting exits of short runs, not exits per minute, bounds the restarts however slowly a child
  starts.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from evalsi.bus.natsserver import NatsServer
from evalsi.child_processes import with_death_signal
from evalsi.client_auth.github_actions import REQUEST_TOKEN_ENV, REQUEST_URL_ENV
from evalsi.client_auth.sources import API_KEY_ENV, TOKEN_ENV, TOKEN_FILE_ENV
from evalsi.connections import CONNECTIONS_ENV
from evalsi.errors import BadInputError, EvalsiError
from evalsi.gate.exposure import NO_AUTH_ENV
from evalsi.masking import mask_url
from evalsi.ports import free_port, free_ports
from evalsi.service.bus_users import BundledBusUsers
from evalsi.service.config import Config
from evalsi.service.forked import ForkedProcess, fork_service, preload, service_imports
from evalsi.service.references import bus_credentials, store_credentials
from evalsi.service.sandboxd_plan import SANDBOXD_ENV, sandboxd_environment, sandboxd_plan

RESTART_BACKOFF_S = (0.5, 1.0, 2.0, 5.0, 10.0)
MAX_RESTARTS = 5
RESTART_WINDOW_S = 60.0
LOG_TAIL_LINES = 20
# How often the supervisor looks at its children and, until they all answer, at their /readyz.
TICK_S = 0.1
READYZ_TIMEOUT_S = 0.5
# Past this without every service ready, the console says which are not and why (once), rather than staying silent.
READY_NOTICE_S = 30.0


class CrashLoop(EvalsiError):
    """A child exited more than ``max_restarts`` times within the restart window: restarting it is futile."""


@dataclass
class Child:
    """One supervised service process."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    # What it listens on, checked before anything starts: (port, what it is and where it is configured).
    ports: tuple[tuple[int, str], ...] = ()
    # Its NATS user on the bundled nats-server (evalsi.bus.permissions): "" for a child that uses no bus.
    bus_identity: str = ""
    # Forked from the supervisor (argv is then `python -m <module> [flags]`, whose main runs in the fork) rather
    # than exec'd: the imports the supervisor preloaded are not paid again (evalsi.service.forked).
    fork: bool = False
    exec_only: bool = False  # never forked (sandboxd: evalsi.service.sandboxd_plan says why)
    process: subprocess.Popen[bytes] | ForkedProcess | None = None
    restarts: int = 0
    started_at: float = 0.0
    crashes: int = 0  # exits in a row, each within the restart window of its start
    restart_at: float | None = None

    def start(self) -> None:
        if self.fork:
            self.process = fork_service(self.name, self.argv, self.env, self.log_path)
            self.started_at = time.monotonic()
            self.restart_at = None
            return
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                with_death_signal(self.argv),
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # Its own group: Ctrl-C on the terminal reaches the supervisor only (which stops children in
                # order), and stop() can end whatever the child itself started.
                process_group=0,
            )
        self.started_at = time.monotonic()
        self.restart_at = None

    def exited(self) -> int | None:
        """Its exit code, None while it runs. When it has ended, whatever it started and left behind in its
        process group is killed first: while it is an unreaped zombie its ID cannot be handed to a new process
        or group, so the signal reaches this child's processes only (after reaping, it might not)."""
        process = self.process
        if process is None:
            return None
        if process.returncode is None:
            try:
                ended = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:  # reaped behind Popen's back: nothing of it is ours to signal any more
                return process.poll()
            if ended is None:
                return None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        return process.poll()

    def terminate(self) -> None:
        """SIGTERM, by PID: unlike Popen.send_signal this never reaps it first (see exited)."""
        if self.process is not None and self.exited() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGTERM)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(the log is empty)"

    def stop(self, grace_s: float) -> None:
        """SIGTERM, then SIGKILL to its whole process group if it has not ended after ``grace_s``."""
        self.terminate()
        deadline = time.monotonic() + grace_s
        while self.process is not None and self.exited() is None:
            if time.monotonic() >= deadline:
                with contextlib.suppress(ProcessLookupError):  # not reaped yet: the group is still this child's
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
                return
            time.sleep(0.02)


CALLER_CREDENTIALS = (TOKEN_ENV, TOKEN_FILE_ENV, API_KEY_ENV, REQUEST_URL_ENV, REQUEST_TOKEN_ENV)


def _module(name: str) -> list[str]:
    return [sys.executable, "-m", name]


def plan_children(config: Config, nats_url: str, state_dir: Path) -> list[Child]:
    """The service processes for a config: one api, one ingest, one policy service, the schedulers, and the
    workers of each pool.

    The api and ingest share one trace store, ``<state>/traces.db``: ingest writes it, TraceService reads it.
    Store and bus URLs go in each child's environment (``EVALSI_*``, which every service reads for its flag),
    never in its argv.
    """
    # The caller's own credentials (the CLI's, in the shell that runs `evalsi serve`) are no service's: a worker
    # in particular receives no user credentials (§17).
    base = {**{k: v for k, v in os.environ.items() if k not in CALLER_CREDENTIALS}, "PYTHONUNBUFFERED": "1"}
    # The judges and agents requests may name, read by the api (to check) and the workers (to call): a 0600 file
    # of references, so no credential is on a command line or in the state directory.
    base[CONNECTIONS_ENV] = str(config.connections.write(state_dir / "connections.json"))
    access = _access_environment(config, state_dir)
    bus = {"EVALSI_NATS_URL": nats_url, **bus_credentials(config)}
    stores = {
        **bus,
        "EVALSI_METADATA_URL": _resolve_url(config.metadata_url),
        "EVALSI_OBJECTS_URL": _resolve_url(config.objects_url),
        **store_credentials(config),
    }
    logs = state_dir / "logs"
    traces_url = _resolve_url(config.traces_url) if config.traces_url else traces_url_for(state_dir)
    api, ingest = config.api, config.ingest
    taken = {api.http_port, api.grpc_port, ingest.http_port, ingest.grpc_port}

    def metrics(name: str) -> tuple[list[str], tuple[int, str]]:
        port = _free_port(taken)
        return ["--metrics-port", str(port)], (port, f"{name} /metrics")

    # With authentication on, the api's own /metrics is the owner's: scrapers on this machine get a loopback one.
    api_metrics, api_metrics_port = metrics("api") if config.access.enforced else ([], None)
    children = [
        Child(
            "api",
            [
                *_module("evalsi_api.main"),
                "--host",
                api.host,
                "--http-port",
                str(api.http_port),
                "--grpc-port",
                str(api.grpc_port),
                "--datasets-dir",
                str(Path(config.datasets_dir).resolve()),
                *api_metrics,
            ],
            {**base, **stores, "EVALSI_TRACES_URL": traces_url, **access},
            logs / "api.log",
            ports=(
                (api.http_port, "the api's HTTP port (api.http_port, --http-port)"),
                (api.grpc_port, "the api's gRPC port (api.grpc_port, --grpc-port)"),
                *((api_metrics_port,) if api_metrics_port else ()),
            ),
            bus_identity="api",
        ),
    ]
    flags, port = metrics("ingest")
    children.append(
        Child(
            "ingest",
            [
                *_module("evalsi_ingest.main"),
                "--host",
                api.host,
                "--http-port",
                str(ingest.http_port),
                "--grpc-port",
                str(ingest.grpc_port),
                "--grace",
                str(ingest.grace_s),
                *flags,
            ],
            # The bus to publish completions; the metadata store for stored API keys and roles, and the audit log.
            {**base, **stores, "EVALSI_TRACES_URL": traces_url, **access},
            logs / "ingest.log",
            ports=(
                (ingest.http_port, "OTLP/HTTP of evalsi-ingest (ingest.http_port)"),
                (ingest.grpc_port, "OTLP/gRPC of evalsi-ingest (ingest.grpc_port)"),
                port,
            ),
            bus_identity="ingest",
        )
    )
    flags, port = metrics("policy")
    children.append(Child("policy", [*_module("evalsi_policy.main"), *flags, "--reload", "1"],
                          {**base, **stores, "EVALSI_TRACES_URL": traces_url}, logs / "policy.log", ports=(port,),
                          bus_identity="policy"))
    if (sandboxd := sandboxd_plan(config, state_dir)) is not None:  # before the workers, which get its address
        flags, port = metrics("sandboxd")
        children.append(Child("sandboxd", [*sandboxd.argv, *flags], sandboxd_environment({**base, **access}, sandboxd),
                              logs / "sandboxd.log", ports=(port,), exec_only=True))
        base = {**base, SANDBOXD_ENV: sandboxd.address}
    for i in range(config.scheduler.replicas):
        name = f"scheduler-{i}"
        flags, port = metrics(name)
        children.append(
            Child(
                name,
                [*_module("evalsi_scheduler.main"), "--lease-ttl", str(config.scheduler.lease_ttl_s), *flags],
                {**base, **stores},
                logs / f"{name}.log",
                ports=(port,),
                bus_identity="scheduler",
            )
        )
    for worker in config.workers:
        for i in range(worker.replicas):
            name = f"worker-{worker.pool}-{i}"
            flags, port = metrics(name)
            argv = [
                *_module("evalsi_worker.main"),
                "--pool",
                worker.pool,
                "--concurrency",
                str(worker.concurrency),
                *flags,
            ]
            children.append(Child(name, argv, {**base, **stores}, logs / f"{name}.log", ports=(port,),
                                  bus_identity=f"worker-{worker.pool}"))
    return children


def _access_environment(config: Config, state_dir: Path) -> dict[str, str]:
    """What the api and ingest need to authenticate callers as evalsi.yaml says: its auth, rbac and authorization
    sections in a 0600 file of their own, named as their config (they check it again), and --no-auth."""
    environment = {NO_AUTH_ENV: "1"} if config.access.no_auth else {}
    if config.access.sections:
        state_dir.mkdir(parents=True, exist_ok=True)
        path = state_dir / "access.yaml"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            json.dump(dict(config.access.sections), out)  # JSON is YAML
        environment["EVALSI_CONFIG"] = str(path.resolve())
    return environment


def traces_url_for(state_dir: Path) -> str:
    """The trace store ingest writes and the api reads: ``sqlite:///<state>/traces.db`` (absolute)."""
    return "sqlite:///" + str((state_dir / "traces.db").resolve())


def _free_port(taken: set[int]) -> int:
    """A free loopback port for a child's /metrics, /healthz and /readyz, never one in ``taken`` (a port another
    child is about to bind); picked outside the kernel's ephemeral range (``evalsi.ports`` says why)."""
    port = free_port(avoid=taken, hosts=("127.0.0.1",))
    taken.add(port)
    return port


def metrics_url(child: Child) -> str:
    """Where a background service serves /metrics ("" for the api, which serves it on its HTTP port)."""
    if "--metrics-port" not in child.argv:
        return ""
    return f"http://127.0.0.1:{child.argv[child.argv.index('--metrics-port') + 1]}/metrics"


def readyz_url(child: Child, api_host: str) -> str:
    """Where a service answers /readyz: the api on its HTTP port, the others beside their /metrics; "" for a
    child that serves neither (a plain command)."""
    if child.argv[1:3] == ["-m", "evalsi_api.main"]:
        port = child.argv[child.argv.index("--http-port") + 1]
        return f"http://{_url_host(api_host)}:{port}/readyz"
    return metrics_url(child).removesuffix("/metrics") + "/readyz" if metrics_url(child) else ""


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _readyz(url: str) -> str:
    """"" when ``url`` answers 200, else why not: its status and first line (what it still waits for), or that
    nothing answers yet."""
    try:
        # Our own child's readiness on this machine, over the certificate it serves: nothing secret is read.
        context = ssl._create_unverified_context() if url.startswith("https://") else None
        with urllib.request.urlopen(url, timeout=READYZ_TIMEOUT_S, context=context) as answer:
            return "" if answer.status == 200 else f"{url} answered {answer.status}"
    except urllib.error.HTTPError as exc:
        return f"{url} answered {exc.code}" + _why(exc.read(2000))
    except OSError as exc:
        return f"nothing answers {url} yet ({getattr(exc, 'reason', exc)})"


def _why(body: bytes) -> str:
    """The reason a service's /readyz gives (``{"ready": false, "reason": ...}``), else its first line."""
    try:
        reason = json.loads(body).get("reason", "")
    except (ValueError, AttributeError):
        lines = body.decode(errors="replace").strip().splitlines()
        reason = lines[0][:200] if lines else ""
    return f": {reason}" if reason else ""


def check_ports(children: list[Child], host: str) -> None:
    """Refuse (BadInputError, exit 2) when a port a child will listen on is taken, naming port and child.

    The probe binds as the services do (SO_REUSEADDR, so a port in TIME_WAIT counts as free) but without
    SO_REUSEPORT, which would let a second gRPC server share a port silently.
    """
    taken = []
    for child in children:
        for port, what in child.ports:
            where = "127.0.0.1" if what.endswith("/metrics") else host
            if port and not _port_free(where, port):
                taken.append(f"port {port} on {where}, {what}, wanted by {child.name}")
    if taken:
        raise BadInputError(
            f"{'; '.join(taken)}: already in use; stop whatever listens there or configure another port. "
            "Nothing was started."
        )


def _port_free(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


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
    bus_users: BundledBusUsers | None = None  # the bundled nats-server's, made at start
    # Tests turn restarts off to watch another replica take over from a killed one.
    restart: bool = True
    max_restarts: int = MAX_RESTARTS
    restart_window_s: float = RESTART_WINDOW_S
    restart_backoff_s: tuple[float, ...] = RESTART_BACKOFF_S
    # Which processes to run (plan_children); tests substitute a plan to run a child that always crashes.
    plan: Callable[[Config, str, Path], list[Child]] = plan_children
    # Fork the services from this process after importing what they import, once (evalsi.service.forked); only
    # from a single-threaded process holding no gRPC channel or event loop, such as `evalsi serve`, never from a
    # test process. Off: each is a fresh interpreter (exec).
    fork_services: bool = False
    ready: bool = False
    ready_notice_s: float = READY_NOTICE_S
    # The /readyz of every child that serves one, not yet answered 200; the api's always among them.
    _unready: dict[str, str] = field(default_factory=dict)
    _waiting_told: bool = False
    _stopping: bool = False
    _started_at: float = 0.0

    def start(self) -> None:
        """Check every port, then start nats-server and every child; anything started is stopped again when
        a later step fails (or a stop is requested meanwhile)."""
        self._started_at = time.monotonic()
        warning = self.config.access.check(self.config.api.host, "api.host")
        if warning:
            self.echo(f"warning    {warning}")
        nats_url = self.config.nats_url
        if not nats_url:
            # Fresh at every start: a user per service, admitted by nats-server and by nothing else.
            self.bus_users = BundledBusUsers.fresh([w.pool for w in self.config.workers],
                                                   self.state_dir / "nats-credentials")
            # Its ports are chosen now, so the children's plan can name it; never a configured port (the children
            # bind those later), and fixed: a retry elsewhere would leave the children a URL with nothing behind it.
            api, ingest = self.config.api, self.config.ingest
            client, monitor = free_ports(2, avoid={api.http_port, api.grpc_port, ingest.http_port, ingest.grpc_port})
            self.nats = NatsServer(store_dir=str((self.state_dir / "nats").resolve()), die_with_parent=True,
                                   authorization=self.bus_users.authorization(), port=client, monitor_port=monitor)
            nats_url = self.nats.url
        children = self.plan(self.config, nats_url, self.state_dir)
        check_ports(children, self.config.api.host)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if self.bus_users is not None:
            self.bus_users.hand_out(children)
        (self.state_dir / "logs").mkdir(exist_ok=True)
        database = _resolve_url(self.config.metadata_url)
        if database.startswith("sqlite:///"):
            Path(database.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        objects = _resolve_url(self.config.objects_url)
        if "://" not in objects:
            Path(objects).mkdir(parents=True, exist_ok=True)
        api = self.config.api
        self._unready = {"api": f"http://{_url_host(api.host)}:{api.http_port}/readyz"}
        self._unready.update({child.name: url for child in children if (url := readyz_url(child, api.host))})
        if self.config.access.serves_tls:  # the api's port speaks TLS only (auth.tls)
            self._unready["api"] = self._unready["api"].replace("http://", "https://", 1)
        fork = self.fork_services and sys.platform.startswith("linux")
        try:
            if self.nats is not None:
                self.nats.start()
                self.echo(f"nats       {nats_url} (JetStream, store {self.state_dir / 'nats'})")
            for child in children:
                if self._stopping:
                    return
                if fork and child.argv[1:2] == ["-m"] and not child.exec_only:
                    # In plan order, the api first: it starts while the imports only later services need load.
                    preload(service_imports(child.argv[2]))
                    child.fork = True
                self.children.append(child)
                child.start()
        except BaseException:
            self.stop(grace_s=2.0)
            raise
        self._print_plan()

    def _print_plan(self) -> None:
        api, ingest = self.config.api, self.config.ingest
        traces = self.config.traces_url or traces_url_for(self.state_dir)
        secure = "s" if self.config.access.serves_tls else ""
        self.echo(f"http api   http{secure}://{api.host}:{api.http_port}   (/healthz /readyz /metrics)")
        self.echo(f"web ui     http{secure}://{_url_host(api.host)}:{api.http_port}/ui/   (docs/ui.md)")
        self.echo(f"grpc api   grpc{secure}://{api.host}:{api.grpc_port}")
        self.echo(
            f"otlp       http://{api.host}:{ingest.http_port} (OTLP/HTTP) · {api.host}:{ingest.grpc_port} (OTLP/gRPC)"
            f" · traces {mask_url(traces)}"
        )
        self.echo(
            f"state      {mask_url(_resolve_url(self.config.metadata_url))} · objects "
            f"{mask_url(_resolve_url(self.config.objects_url))}"
        )
        for child in self.children:
            metrics = metrics_url(child) or f"http://{api.host}:{api.http_port}/metrics"
            self.echo(f"{child.name:<18} metrics {metrics}   log {child.log_path}")

    def supervise_once(self) -> None:
        """Restart children that exited, after a growing backoff; CrashLoop when one keeps crashing."""
        now = time.monotonic()
        for child in self.children:
            if self._stopping or not self.restart:
                return
            if child.restart_at is not None:
                if now >= child.restart_at:
                    child.restarts += 1
                    child.start()
                continue
            code = child.exited()
            if code is None:
                continue
            ran_for = now - child.started_at
            child.crashes = child.crashes + 1 if ran_for < self.restart_window_s else 1
            if child.crashes > self.max_restarts:
                raise CrashLoop(
                    f"{child.name} exited {child.crashes} times in a row, each within {self.restart_window_s:g} s of "
                    f"starting (last exit code {code}); giving up. Last lines of {child.log_path}:\n"
                    f"{child.log_tail()}"
                )
            delay = self.restart_backoff_s[min(child.crashes - 1, len(self.restart_backoff_s) - 1)]
            self.echo(
                f"{child.name} exited with {code} after {ran_for:.1f} s; restarting in {delay} s "
                f"(log: {child.log_path})"
            )
            child.restart_at = now + delay

    def check_ready(self) -> bool:
        """Print the one "ready" line once every service's /readyz has answered 200 (each has everything it needs
        up: stores open, consumers bound, NATS connected), with the addresses a user points clients at."""
        if self.ready:
            return True
        waiting: dict[str, str] = {}
        for name, url in list(self._unready.items()):
            if waiting and not self._waiting_is_due():
                return False  # one unready service settles it; the rest are asked on a later tick
            reason = _readyz(url)
            if reason:
                waiting[name] = reason
            else:
                del self._unready[name]
        if waiting:
            if self._waiting_is_due():
                self._waiting_told = True
                self.echo(
                    f"not ready after {time.monotonic() - self._started_at:.0f} s: "
                    + "; ".join(f"{name} ({reason})" for name, reason in waiting.items())
                    + f"; still waiting (logs in {self.state_dir / 'logs'})"
                )
            return False
        self.ready = True
        api, ingest = self.config.api, self.config.ingest
        host = _url_host(api.host)
        self.echo(
            f"ready in {time.monotonic() - self._started_at:.1f} s ({len(self.children)} services): "
            f"http://{host}:{api.http_port} (HTTP/JSON) · grpc://{host}:{api.grpc_port} (gRPC) · "
            f"OTLP http://{host}:{ingest.http_port} (HTTP) and {host}:{ingest.grpc_port} (gRPC) · "
            f"metrics http://{host}:{api.http_port}/metrics (the api; each service's above)"
        )
        return True

    def _waiting_is_due(self) -> bool:
        return not self._waiting_told and time.monotonic() - self._started_at >= self.ready_notice_s

    def child(self, name: str) -> Child:
        for child in self.children:
            if child.name == name:
                return child
        raise KeyError(f"no child named {name!r}; children: {', '.join(c.name for c in self.children)}")

    def stop(self, grace_s: float = 10.0) -> None:
        self._stopping = True
        for child in self.children:
            child.terminate()
        deadline = time.monotonic() + grace_s
        for child in self.children:
            child.stop(max(0.1, deadline - time.monotonic()))
        if self.nats is not None:
            self.nats.stop()
        if self.bus_users is not None:
            self.bus_users.remove()

    def run(self) -> None:
        """Start, supervise until SIGTERM, SIGINT or SIGHUP, then stop everything; CrashLoop ends it too.
        Children are stopped whatever ends the run (a failed start, a crash loop, a bug of ours)."""

        def request_stop(signum: int, _frame: object) -> None:
            self._stopping = True

        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, request_stop)
        try:
            self.start()
            while not self._stopping:
                self.supervise_once()
                self.check_ready()
                time.sleep(TICK_S)
        finally:
            self.echo("stopping: services drain, then nats stops")
            self.stop()
            self.echo("stopped")
