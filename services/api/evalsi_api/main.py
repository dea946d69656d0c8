"""The ``evalsi-api`` process: flags and environment, the real stores and bus, both listeners, SIGTERM.

    evalsi-api --http-port 8080 --grpc-port 8081 --nats nats://127.0.0.1:4222 \\
        --metadata-url sqlite:///.evalsi/state/evalsi.db --objects-url .evalsi/state/objects --datasets-dir .

Every flag has an ``EVALSI_API_*`` environment variable (shared ones ``EVALSI_*``; ``--help`` names them) and
some an evalsi.yaml key (``--config``); a flag wins over its variable, which wins over the file.
Who may call is evalsi.yaml's ``auth``, ``rbac`` and ``authorization`` sections (``--config``; docs/auth.md): with
``auth`` every call passes the gate (``evalsi.gate``), and ``auth.tls`` serves both ports over TLS. A non-loopback
``--host`` is refused without an ``auth`` section; ``--no-auth`` (``EVALSI_NO_AUTH=1``) or ``auth: {mode: none}``
serve unauthenticated on purpose (compose.yaml, inside a container whose ports are published on 127.0.0.1 only)
and log a warning at every start.
Exit codes: 0 after a clean stop, 1 on an internal error, 2 on bad flags or configuration.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import structlog

from evalsi import bus
from evalsi.api import (
    ApiMetrics,
    ApiServer,
    CaseHandlers,
    CatalogHandlers,
    EvaluationHandlers,
    HandlerLimits,
    LocalEvaluation,
    MonitorHandlers,
    Readiness,
    RunHandlers,
    ServerConfig,
    TraceHandlers,
    build_table,
    load_run_dataset,
)
from evalsi.api.live_packs import LivePacks
from evalsi.bus.credentials import NatsCredentials
from evalsi.bus.shared_broker import SharedConnectionBroker, faststream_log
from evalsi.bus.v1alpha1.bus_pb2 import CONTROL_ACTION_CREATED, RunControl, TraceCompleted
from evalsi.connections import Connections
from evalsi.errors import BadInputError, InfraError
from evalsi.evaluators import Registry
from evalsi.gate.exposure import AccessSettings
from evalsi.ingest.publishing import BusCompletionPublisher
from evalsi.plugins import PLUGINS_DIR, describe_plugins
from evalsi.runs.dry_run import served_dry_run
from evalsi.runs.plan import planned_task_count
from evalsi.runs.spec import validate_eval_run
from evalsi.service.kit import STOP_DEADLINE_S, run_service, serve_health
from evalsi.service.lifecycle import Lifecycle
from evalsi.service.logging import LEVELS
from evalsi.service.settings import (
    DATASETS_DIR,
    LOGGING,
    METADATA_URL,
    METRICS_PORT,
    NATS,
    NATS_CREDENTIALS,
    OBJECTS_URL,
    TRACES_URL,
    Option,
    nats_credentials,
    option,
    parse,
)
from evalsi.stores import open_metadata_store, open_object_store
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest, EvaluateResponse
from evalsi.v1alpha1.run_service_pb2 import RunEvent
from evalsi.yaml_files import read_yaml_file

from .access import open_access

log = structlog.get_logger("evalsi.api")

# The most capable pool answers a request whose evaluators span several, when it is split.
POOL_ORDER = ("cpu", "judge", "gpu", "sandbox", "harness")


@dataclass(frozen=True)
class Settings:
    """Everything the process is configured with."""

    server: ServerConfig = field(default_factory=ServerConfig)
    limits: HandlerLimits = field(default_factory=HandlerLimits)
    nats_url: str = "nats://127.0.0.1:4222"
    nats_credentials: str = ""  # a file of the api's NATS user (--nats-credentials)
    metadata_url: str = "sqlite:///.evalsi/state/evalsi.db"
    objects_url: str = ".evalsi/state/objects"
    datasets_dir: Path = Path(".")
    evaluate_timeout_s: float = 60.0
    log_level: str = "info"
    log_format: str = "json"
    # A loopback listener of /metrics without authentication (0: none).
    metrics_port: int = 0
    # The trace store evalsi-ingest writes; empty: TraceService answers that none is configured.
    traces_url: str = ""
    # The judges and agents requests may name (EVALSI_CONNECTIONS_FILE); none when unset.
    connections: Connections = field(default_factory=Connections)
    # evalsi.yaml's auth, rbac and authorization sections, and --no-auth.
    access: AccessSettings = field(default_factory=AccessSettings)
    # Subprocess evaluator plugins (--plugins-dir): described here so their refs resolve; workers run them.
    plugins_dir: str = ""

    def validate(self) -> None:
        self.access.check(self.server.host)  # refuses a non-loopback --host without an auth section
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

OPTIONS = (
    Option("--host", default="127.0.0.1", help="listen address; beyond loopback only with an auth section (or "
           "--no-auth)", config="api.host"),
    Option("--http-port", int, 8080, "HTTP/JSON port (0 picks a free one)", config="api.http_port"),
    Option("--grpc-port", int, 8081, "gRPC port (0 picks a free one)", config="api.grpc_port"),
    NATS,
    NATS_CREDENTIALS,
    METADATA_URL,
    OBJECTS_URL,
    DATASETS_DIR,
    Option("--max-request-bytes", int, 16 * 1024 * 1024, "largest request accepted"),
    Option("--max-sync-records", int, 1000, "records per synchronous Evaluate call"),
    Option("--grace-period", float, 10.0, "seconds in-flight calls get after SIGTERM"),
    Option("--evaluate-timeout", float, 60.0, "seconds to wait for a worker's answer"),
    option(TRACES_URL, default="", help="trace store evalsi-ingest writes (sqlite:///PATH, clickhouse://HOST:PORT/DB); "
           "empty: none"),
    Option("--no-auth", switch=True, default=False, shared=True,
           help="authenticate nobody although evalsi.yaml has an auth section; logs a warning at every start"),
    option(METRICS_PORT, help="a loopback port serving /metrics (and /healthz, /readyz) without authentication, "
           "for a scraper on this machine (0: none; the HTTP port's /metrics is the owner's when auth is on)"),
    PLUGINS_DIR,
    *LOGGING,
)


def parse_settings(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Flags over environment over evalsi.yaml over defaults; a bad value is a usage error naming its source."""
    env = os.environ if environ is None else environ
    args = parse("api", OPTIONS, argv, description="The Evals.si public API: gRPC and HTTP/JSON for every public RPC.",
                 environ=env)
    level = args.log_level.lower()
    if level not in LEVELS:
        raise BadInputError(f"--log-level {args.log_level}: use {', '.join(LEVELS)}")
    return Settings(
        server=ServerConfig(
            host=args.host,
            http_port=args.http_port,
            grpc_port=args.grpc_port,
            max_request_bytes=args.max_request_bytes,
            grace_period_s=args.grace_period,
        ),
        limits=HandlerLimits(max_sync_records=args.max_sync_records),
        nats_url=args.nats,
        nats_credentials=args.nats_credentials,
        metadata_url=args.metadata_url,
        objects_url=args.objects_url,
        datasets_dir=Path(args.datasets_dir).expanduser().resolve(),
        evaluate_timeout_s=args.evaluate_timeout,
        log_level=level,
        log_format=args.log_format,
        metrics_port=args.metrics_port,
        traces_url=args.traces_url,
        plugins_dir=args.plugins_dir,
        connections=Connections.from_environ(env),
        access=AccessSettings.from_document(read_yaml_file(args.config) if args.config else {},
                                            no_auth=args.no_auth, where=args.config or ""),
    )


# --- the bus -------------------------------------------------------------------------------------


class BusLink:
    """The API's side of the bus: control publishes, Evaluate requests, run-event subscriptions (WatchRun's, as
    FastStream subscribers of one call each on a broker over the api's connection).

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
        credentials: NatsCredentials | None = None,
    ) -> None:
        self._url = url
        self._credentials = credentials
        # Carries an Evaluate request (or its answer) over the bus's payload limit, as tasks travel.
        self._objects = objects
        self._readiness = readiness
        self._registry = registry
        self._timeout = evaluate_timeout_s
        self.connection: bus.BusConnection | None = None
        self._broker: SharedConnectionBroker | None = None

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

        connection = await bus.connect(self._url, name="evalsi-api", on_state=on_state, credentials=self._credentials)
        try:
            await bus.ensure_streams(connection.js)
        except InfraError as exc:  # the schedulers may own stream limits; publishing still says what fails
            log.warning("could not ensure the bus streams", error=str(exc))
        broker = SharedConnectionBroker(connection.nc, apply_types=False, logger=faststream_log())
        await broker.start()
        self.connection, self._broker = connection, broker
        on_state(connection.readiness)

    async def close(self) -> None:
        if self._broker is not None:
            broker, self._broker = self._broker, None
            await broker.stop()  # ends the WatchRun subscriptions still open
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

        def ask(pool: str, part: EvaluateRequest) -> Awaitable[EvaluateResponse]:
            return bus.request(
                connection.nc, bus.subjects.evaluate(pool), part, EvaluateResponse, timeout, store=self._objects
            )

        if len(parts) == 1:  # the usual case, awaited here: gather would wrap it in a task of its own
            ((pool, part),) = parts.items()
            return await ask(pool, part)
        answers = await asyncio.gather(*(ask(pool, part) for pool, part in parts.items()))
        joined = EvaluateResponse(request_id=request.request_id)
        for answer in answers:
            joined.results.extend(answer.results)
            joined.summaries.extend(answer.summaries)
        return joined

    async def watch(self, run_id: str) -> AsyncIterator[RunEvent]:
        """The run's events published from now on (a core subscription on the EVENTS stream's subject).

        A subscriber of this call alone: not persistent, so the broker forgets it once the call ends."""
        self._connected()
        if self._broker is None:
            raise InfraError("not connected to NATS yet; /readyz says why")
        subscriber = self._broker.subscriber(bus.subjects.run_events(run_id), persistent=False)
        await subscriber.start()
        try:
            async for message in subscriber:
                msg = message.raw_message
                try:
                    yield bus.decode(msg.data, msg.headers, RunEvent)
                except bus.Permanent as exc:
                    log.warning("undecodable run event skipped", run_id=run_id, error=str(exc))
        finally:
            with contextlib.suppress(Exception):
                await subscriber.stop()


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
    """Run until SIGTERM (or ``stop``): open the stores, start both listeners, connect the bus; then drain and
    close."""
    await Lifecycle("evalsi-api").run(partial(assemble, settings), stop=stop)


async def assemble(settings: Settings, life: Lifecycle) -> None:
    """The parts in start order; stopping reverses it: the listeners drain before the bus and the stores close."""
    warning = settings.access.check(settings.server.host)
    if warning:  # auth: {mode: none} or --no-auth: said at every start
        log.warning(warning, host=settings.server.host)
    # The api serves /readyz on its own port from these conditions; "started" is the lifecycle's own.
    readiness = Readiness(["metadata_store", "object_store", "nats", "started"])
    registry = Registry.from_entry_points()
    if settings.plugins_dir:
        await asyncio.to_thread(describe_plugins, registry, settings.plugins_dir)
    # A pack the evaluators: section names must be installed here: a typo would otherwise allow or enable nothing.
    unknown = settings.connections.packs.unknown_packs(registry.packs)
    if unknown:
        raise BadInputError("; ".join(unknown))
    store = await life.enter("metadata store", open_metadata_store(settings.metadata_url), lambda s: s.close())
    traces = None
    if settings.traces_url:
        from evalsi.stores.traces import open_trace_store

        traces = await life.enter("trace store", open_trace_store(settings.traces_url), lambda t: t.close())
    readiness.set_ready("metadata_store")
    objects = await life.enter("object store", open_object_store(settings.objects_url), lambda o: o.close())
    readiness.set_ready("object_store")
    link = BusLink(
        settings.nats_url,
        readiness,
        registry=registry,
        evaluate_timeout_s=settings.evaluate_timeout_s,
        objects=objects,
        credentials=nats_credentials(settings.nats_credentials),
    )
    life.on_stop("nats", link.close)
    metrics = ApiMetrics()  # the listeners' and the audit log's, on one /metrics
    access = await open_access(settings.access, store, registry, life, metrics=metrics.registry)
    # The packs each project enabled and may use: evalsi.yaml's evaluators: with what the API stored over it.
    packs = await life.enter("packs", LivePacks(settings.connections.packs, store).start(), lambda p: p.close())
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
        describe_plan=partial(served_dry_run, registry=registry),
        listen_host=settings.server.host,
        registry=registry,
        packs=packs,
    )
    table = build_table(
        evaluation=EvaluationHandlers(link.evaluate, registry=registry, limits=settings.limits,
                                      connections=settings.connections,
                                      local=LocalEvaluation(registry, timeout_s=settings.evaluate_timeout_s),
                                      metrics=metrics, packs=packs),
        runs=runs,
        catalog=CatalogHandlers(registry, packs),
        traces=TraceHandlers(traces, limits=settings.limits, retrigger=link.retrigger),
        monitor=MonitorHandlers(store, traces, registry=registry, limits=settings.limits,
                                connections=settings.connections, alerts=store, packs=packs),
        auth=access.auth_handlers,
        cases=CaseHandlers(store, limits=settings.limits),
    )
    server = ApiServer(table, settings.server, readiness=readiness, metrics=metrics, gate=access.gate,
                       tls=access.tls, login=access.login,
                       open_on_purpose=bool(settings.access.unauthenticated_reason()))
    await life.enter("listeners", server.start(), lambda _: server.stop())
    # §17: /metrics is the owner's, or unauthenticated on a separate listener on loopback.
    await serve_health(life, settings.metrics_port, metrics.registry)
    # In the background: the listeners answer /healthz (and an honest /readyz) while NATS is still coming up.
    await life.spawn("nats connect", link.connect())
    readiness.set_ready("started")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        settings = parse_settings(argv)
        settings.validate()
    except BadInputError as exc:
        print(f"evalsi-api: {exc}", file=sys.stderr)
        return 2
    return run_service("api", partial(assemble, settings), settings.log_level, settings.log_format,
                       stop_deadline_s=settings.server.grace_period_s + STOP_DEADLINE_S)


if __name__ == "__main__":
    sys.exit(main())
