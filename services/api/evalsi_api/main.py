"""The ``evalsi-api`` process: flags and environment, the real stores and bus, both listeners, SIGTERM.

    evalsi-api --http-port 8080 --grpc-port 8081 --nats nats://127.0.0.1:4222 \\
        --metadata-url sqlite:///.evalsi/state/evalsi.db --objects-url .evalsi/state/objects --datasets-dir .

Every flag has an ``EVALSI_*`` environment variable (``--help`` names them); a flag wins over its variable.
A non-loopback ``--host`` is refused unless ``--allow-non-loopback`` (``EVALSI_API_ALLOW_NON_LOOPBACK=1``) is
given, because nothing authenticates callers yet: compose.yaml uses it inside a container whose ports are
published on 127.0.0.1 only.
Exit codes: 0 after a clean stop, 1 on an internal error, 2 on bad flags or configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import structlog

from evalsi import bus
from evalsi.api import (
    ApiServer,
    CatalogHandlers,
    EvaluationHandlers,
    HandlerLimits,
    MonitorHandlers,
    Readiness,
    RunHandlers,
    ServerConfig,
    TraceHandlers,
    build_table,
    load_run_dataset,
)
from evalsi.bus.v1alpha1.bus_pb2 import CONTROL_ACTION_CREATED, RunControl, TraceCompleted
from evalsi.connections import Connections
from evalsi.errors import BadInputError, InfraError
from evalsi.evaluators import Registry
from evalsi.hosts import is_loopback
from evalsi.ingest.publishing import BusCompletionPublisher
from evalsi.runs.driver import planned_task_count
from evalsi.runs.spec import validate_eval_run
from evalsi.service.logging import configure_logging
from evalsi.stores import open_metadata_store, open_object_store
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest, EvaluateResponse
from evalsi.v1alpha1.run_service_pb2 import RunEvent

log = structlog.get_logger("evalsi.api")

# The most capable pool answers a request whose evaluators span several, when it is split.
POOL_ORDER = ("cpu", "judge", "gpu", "sandbox", "harness")


@dataclass(frozen=True)
class Settings:
    """Everything the process is configured with."""

    server: ServerConfig = field(default_factory=ServerConfig)
    limits: HandlerLimits = field(default_factory=HandlerLimits)
    nats_url: str = "nats://127.0.0.1:4222"
    metadata_url: str = "sqlite:///.evalsi/state/evalsi.db"
    objects_url: str = ".evalsi/state/objects"
    datasets_dir: Path = Path(".")
    evaluate_timeout_s: float = 60.0
    log_level: str = "info"
    # The trace store evalsi-ingest writes; empty: TraceService answers that none is configured.
    traces_url: str = ""
    # The judges and agents requests may name (EVALSI_CONNECTIONS_FILE); none when unset.
    connections: Connections = field(default_factory=Connections)

    def validate(self) -> None:
        if not self.server.allow_non_loopback and not is_loopback(self.server.host):
            raise BadInputError(
                f"--host {self.server.host}: authentication does not exist yet, so evalsi-api listens only on "
                "loopback (127.0.0.1, ::1 or localhost); put an authenticating proxy in front to expose it, "
                "and pass --allow-non-loopback (EVALSI_API_ALLOW_NON_LOOPBACK=1) only then"
            )
        self.server.validate()
        self.limits.validate()
        if not self.datasets_dir.is_dir():
            raise BadInputError(f"--datasets-dir {self.datasets_dir}: not a directory")
        if self.evaluate_timeout_s <= 0:
            raise BadInputError(f"--evaluate-timeout {self.evaluate_timeout_s}: must be positive")
        if self.traces_url.startswith("clickhouse://"):
            from evalsi.stores.traces.clickhouse import parse_clickhouse_url

            try:
                parse_clickhouse_url(self.traces_url)
            except BadInputError as exc:
                raise BadInputError(f"--traces-url: {exc}") from None
        elif self.traces_url and (not self.traces_url.startswith("sqlite:///") or self.traces_url == "sqlite:///"):
            raise BadInputError(
                f"--traces-url {self.traces_url}: use sqlite:///relative.db, sqlite:////absolute/path.db or "
                "clickhouse://host:9000/database"
            )


# --- flags ---------------------------------------------------------------------------------------

_FLAGS: list[tuple[str, str, type, Any, str]] = [
    # flag, environment variable, type, default, help
    ("--host", "EVALSI_API_HOST", str, "127.0.0.1", "listen address; loopback only until authentication exists"),
    ("--http-port", "EVALSI_API_HTTP_PORT", int, 8080, "HTTP/JSON port (0 picks a free one)"),
    ("--grpc-port", "EVALSI_API_GRPC_PORT", int, 8081, "gRPC port (0 picks a free one)"),
    ("--nats", "EVALSI_NATS_URL", str, "nats://127.0.0.1:4222", "NATS server URL"),
    ("--metadata-url", "EVALSI_METADATA_URL", str, "sqlite:///.evalsi/state/evalsi.db", "metadata store URL"),
    ("--objects-url", "EVALSI_OBJECTS_URL", str, ".evalsi/state/objects", "object store URL or directory"),
    ("--datasets-dir", "EVALSI_DATASETS_DIR", str, ".", "directory run datasets are read from (and confined to)"),
    ("--max-request-bytes", "EVALSI_API_MAX_REQUEST_BYTES", int, 16 * 1024 * 1024, "largest request accepted"),
    ("--max-sync-records", "EVALSI_API_MAX_SYNC_RECORDS", int, 1000, "records per synchronous Evaluate call"),
    ("--grace-period", "EVALSI_API_GRACE_PERIOD", float, 10.0, "seconds in-flight calls get after SIGTERM"),
    ("--evaluate-timeout", "EVALSI_API_EVALUATE_TIMEOUT", float, 60.0, "seconds to wait for a worker's answer"),
    ("--log-level", "EVALSI_LOG_LEVEL", str, "info", "debug, info, warning or error"),
    (
        "--traces-url",
        "EVALSI_TRACES_URL",
        str,
        "",
        "trace store evalsi-ingest writes (sqlite:///PATH, clickhouse://HOST:PORT/DB); empty: none",
    ),
]
# A switch, not a typed value: the flag turns it on; so does its variable set to 1/true/yes/on.
_ALLOW_NON_LOOPBACK = ("--allow-non-loopback", "EVALSI_API_ALLOW_NON_LOOPBACK")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")
NO_AUTH_WARNING = (
    "listening on a non-loopback address WITHOUT AUTHENTICATION: anyone who can reach this port can create, "
    "read and cancel runs; publish the port on loopback only (127.0.0.1:PORT:PORT) or put an authenticating "
    "proxy in front"
)


def parse_settings(argv: Sequence[str] | None = None, environ: dict[str, str] | None = None) -> Settings:
    """Flags over environment over defaults; a bad value is a usage error naming the flag or variable."""
    env = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(
        prog="evalsi-api",
        description="The Evals.si public API: gRPC and HTTP/JSON for every public RPC.",
        allow_abbrev=False,  # a renamed flag must fail, not match the prefix of another
    )
    for flag, variable, kind, default, text in _FLAGS:
        raw = env.get(variable)
        value = default
        if raw is not None:
            try:
                value = kind(raw)
            except ValueError:
                raise BadInputError(f"{variable}={raw!r}: expected {kind.__name__}") from None
        parser.add_argument(flag, type=kind, default=value, help=f"{text} (${variable}; default {default})")
    flag, variable = _ALLOW_NON_LOOPBACK
    raw = env.get(variable)
    if raw is not None and raw.strip().lower() not in (*_TRUE, *_FALSE):
        raise BadInputError(f"{variable}={raw!r}: expected 1 or 0 (true/false, yes/no, on/off)")
    parser.add_argument(
        flag,
        action="store_true",
        default=raw is not None and raw.strip().lower() in _TRUE,
        help=f"permit a non-loopback --host although nothing authenticates callers; logs a warning (${variable})",
    )
    args = parser.parse_args(argv)
    level = args.log_level.lower()
    if level not in ("debug", "info", "warning", "error"):
        raise BadInputError(f"--log-level {args.log_level}: use debug, info, warning or error")
    return Settings(
        server=ServerConfig(
            host=args.host,
            http_port=args.http_port,
            grpc_port=args.grpc_port,
            max_request_bytes=args.max_request_bytes,
            grace_period_s=args.grace_period,
            allow_non_loopback=args.allow_non_loopback,
        ),
        limits=HandlerLimits(max_sync_records=args.max_sync_records),
        nats_url=args.nats,
        metadata_url=args.metadata_url,
        objects_url=args.objects_url,
        datasets_dir=Path(args.datasets_dir).expanduser().resolve(),
        evaluate_timeout_s=args.evaluate_timeout,
        log_level=level,
        traces_url=args.traces_url,
        connections=Connections.from_environ(env),
    )


# --- the bus -------------------------------------------------------------------------------------


class BusLink:
    """The API's side of the bus: control publishes, Evaluate requests, run-event subscriptions.

    The connection is made in the background, so the listeners serve ``/healthz`` (and an honest
    ``/readyz``) while NATS is still coming up; a call that needs the bus before then is UNAVAILABLE.
    """

    def __init__(
        self,
        url: str,
        readiness: Readiness,
        *,
        registry: Registry,
        evaluate_timeout_s: float,
        objects: bus.ObjectStore | None = None,
    ) -> None:
        self._url = url
        # Carries an Evaluate request (or its answer) over the bus's payload limit, as tasks travel.
        self._objects = objects
        self._readiness = readiness
        self._registry = registry
        self._timeout = evaluate_timeout_s
        self.connection: bus.BusConnection | None = None

    async def connect(self) -> None:
        def on_state(state: Any) -> None:
            # Ready only once requests can use the connection: bus.connect reports the first connect before it
            # returns, and ensuring the streams takes a while after that.
            if state.ready and self.connection is not None:
                self._readiness.set_ready("nats")
            elif state.ready:
                self._readiness.set_not_ready("nats", "connected to NATS, ensuring the streams")
            else:
                self._readiness.set_not_ready("nats", state.reason)

        connection = await bus.connect(self._url, name="evalsi-api", on_state=on_state)
        try:
            await bus.ensure_streams(connection.js)
        except InfraError as exc:  # the schedulers may own stream limits; publishing still says what fails
            log.warning("could not ensure the bus streams", error=str(exc))
        self.connection = connection
        on_state(connection.readiness)

    async def close(self) -> None:
        if self.connection is not None:
            connection, self.connection = self.connection, None
            await connection.close()

    def _connected(self) -> bus.BusConnection:
        if self.connection is None:
            raise InfraError("not connected to NATS yet; /readyz says why")
        return self.connection

    async def control(self, message: RunControl) -> None:
        connection = self._connected()
        # CREATED is published once per run (a retry is a duplicate); cancel and resume may recur.
        key = f"{message.run_id}:created" if message.action == CONTROL_ACTION_CREATED else None
        await bus.publish(connection.js, bus.subjects.run_control(message.run_id), message, key=key)

    async def retrigger(self, project: str, trace_id: str, revision: int) -> None:
        """Ask the policies to evaluate a completed trace again (negative feedback arrived after completion)."""
        completed = TraceCompleted(project=project, trace_id=trace_id, revision=revision, root_seen=True,
                                   completed_at=time.time(), reason="feedback")
        await BusCompletionPublisher(self._connected().js).publish(completed)

    async def evaluate(self, request: EvaluateRequest, timeout_s: float | None = None) -> EvaluateResponse:
        """Ask the pool(s) the evaluators run in; a request spanning pools is split and the answers joined.

        The workers work under the caller's deadline, or ``--evaluate-timeout`` when that is sooner or none is set.
        """
        connection = self._connected()
        parts = split_by_pool(request, self._registry)
        timeout = self._timeout if timeout_s is None else min(timeout_s, self._timeout)
        answers = await asyncio.gather(
            *(
                bus.request(
                    connection.nc, bus.subjects.evaluate(pool), part, EvaluateResponse, timeout, store=self._objects
                )
                for pool, part in parts.items()
            )
        )
        if len(answers) == 1:
            return answers[0]
        joined = EvaluateResponse(request_id=request.request_id)
        for answer in answers:
            joined.results.extend(answer.results)
            joined.summaries.extend(answer.summaries)
        return joined

    async def watch(self, run_id: str) -> AsyncIterator[RunEvent]:
        """The run's events published from now on (a core subscription on the EVENTS stream's subject)."""
        connection = self._connected()
        subscription = await connection.nc.subscribe(bus.subjects.run_events(run_id))
        try:
            async for msg in subscription.messages:
                try:
                    yield bus.decode(msg.data, msg.headers, RunEvent)
                except bus.Permanent as exc:
                    log.warning("undecodable run event skipped", run_id=run_id, error=str(exc))
        finally:
            with contextlib.suppress(Exception):
                await subscription.unsubscribe()


def split_by_pool(request: EvaluateRequest, registry: Registry) -> dict[str, EvaluateRequest]:
    """The request per worker pool of its evaluators (the request itself when they share one)."""
    by_pool: dict[str, list[int]] = {}
    for index, ref in enumerate(request.evaluators):
        pool = registry.resolve(ref.ref).pool
        by_pool.setdefault(pool if pool in POOL_ORDER else "cpu", []).append(index)
    if len(by_pool) <= 1:
        return {next(iter(by_pool), "cpu"): request}
    parts: dict[str, EvaluateRequest] = {}
    for pool in sorted(by_pool, key=POOL_ORDER.index):
        part = EvaluateRequest()
        part.CopyFrom(request)
        del part.evaluators[:]
        part.evaluators.extend(request.evaluators[i] for i in by_pool[pool])
        parts[pool] = part
    return parts


# --- assembly ------------------------------------------------------------------------------------


async def serve(settings: Settings, *, stop: asyncio.Event | None = None) -> None:
    """Open the stores, start both listeners, connect the bus; on ``stop`` (SIGTERM) drain and close."""
    stop = stop or _stop_on_signals()
    if not is_loopback(settings.server.host):  # validate() let it through: --allow-non-loopback was given
        log.warning(NO_AUTH_WARNING, host=settings.server.host)
    readiness = Readiness(["metadata_store", "object_store", "nats"])
    registry = Registry.from_entry_points()
    store = await open_metadata_store(settings.metadata_url)
    objects = None
    link = None
    server = None
    connecting = None
    traces = None
    try:
        if settings.traces_url:
            from evalsi.stores.traces import open_trace_store

            traces = await open_trace_store(settings.traces_url)
        readiness.set_ready("metadata_store")
        objects = await open_object_store(settings.objects_url)
        readiness.set_ready("object_store")
        link = BusLink(
            settings.nats_url,
            readiness,
            registry=registry,
            evaluate_timeout_s=settings.evaluate_timeout_s,
            objects=objects,
        )
        runs = RunHandlers(
            store=store,
            objects=objects,
            control=link.control,
            watch=link.watch,
            validate_run=partial(validate_eval_run, registry=registry, datasets_dir=settings.datasets_dir),
            load_records=partial(load_run_dataset, datasets_dir=settings.datasets_dir),
            limits=settings.limits,
            connections=settings.connections,
            count_tasks=partial(planned_task_count, registry=registry),
        )
        table = build_table(
            evaluation=EvaluationHandlers(link.evaluate, registry=registry, limits=settings.limits,
                                          connections=settings.connections),
            runs=runs,
            catalog=CatalogHandlers(registry),
            traces=TraceHandlers(traces, limits=settings.limits, retrigger=link.retrigger),
            monitor=MonitorHandlers(store, traces, registry=registry, limits=settings.limits,
                                    connections=settings.connections),
        )
        server = ApiServer(table, settings.server, readiness=readiness)
        await server.start()
        connecting = asyncio.create_task(link.connect())
        await stop.wait()
        log.info("stopping on signal")
    finally:
        if server is not None:
            await server.stop()
        if connecting is not None and not connecting.done():
            connecting.cancel()
            with contextlib.suppress(BaseException):
                await connecting
        if link is not None:
            await link.close()
        if objects is not None:
            await objects.close()
        if traces is not None:
            await traces.close()
        await store.close()


def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return stop


def main(argv: Sequence[str] | None = None) -> int:
    try:
        settings = parse_settings(argv)
        settings.validate()
    except BadInputError as exc:
        print(f"evalsi-api: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level)
    try:
        asyncio.run(serve(settings))
    except BadInputError as exc:
        log.error("bad configuration", error=str(exc))
        print(f"evalsi-api: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        log.error("evalsi-api failed", exc_info=exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
