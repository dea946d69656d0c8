"""The ``evalsi-ingest`` process: OTLP/HTTP and OTLP/gRPC receivers, one handler, the trace store, SIGTERM.

    evalsi-ingest --http-port 4318 --grpc-port 4317 --traces-url sqlite:///.evalsi/state/traces.db \
        [--nats nats://127.0.0.1:4222] [--replica 0 --replicas 1]

With ``--nats``, completed traces are published on ``traces.completed.<project>`` for the policy service, and
several replicas share the load: replica i completes the traces of partition i (crc32 of the trace id modulo
``--replicas``); spans of other partitions are stored and their owner is told over the bus. Without it,
ingest stands alone (traces are stored and completed, nobody is told).

Every flag has an ``EVALSI_INGEST_*`` variable (shared ones ``EVALSI_*``; ``--help`` names them) and some an
evalsi.yaml key (``--config``); a flag wins over its variable, which wins over the file. With evalsi.yaml's ``auth``
section every export passes the gate (the project from the credential; ``evalsi.gate.otlp``) and ``auth.tls``
serves both ports over TLS; a non-loopback ``--host`` is refused without it, unless ``--no-auth``
(``EVALSI_NO_AUTH=1``) or ``auth: {mode: none}`` say to serve unauthenticated (a warning at every start).
Port 0 picks a free port; the addresses bound are printed
as one JSON line on stdout (``{"event": "listening", ...}``) once both receivers accept spans.
Exit codes: 0 after a clean stop, 1 on an internal error, 2 on bad flags or configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from evalsi.bus import BusConnection, connect, ensure_streams
from evalsi.errors import BadInputError, InfraError
from evalsi.gate.exposure import AccessSettings
from evalsi.ingest import (
    DEFAULT_MAX_BODY,
    AssemblingSink,
    Completer,
    CompletionConfig,
    ExportHandler,
    OtlpHttpReceiver,
    Partitioning,
    Redactor,
    TraceAssembler,
    run_completion_loop,
    start_grpc_receiver,
    start_http_receiver,
)
from evalsi.ingest.metrics import IngestCollector, ingest_registry
from evalsi.ingest.processes import ProcessMember, run_processes
from evalsi.ingest.publishing import BusCompletionPublisher, BusNoticeSender, notice_consumer
from evalsi.masking import mask_url
from evalsi.projects import DEFAULT_PROJECT, check_project
from evalsi.service.kit import STOP_DEADLINE_S, freeze_imports, serve_health
from evalsi.service.lifecycle import Lifecycle
from evalsi.service.logging import configure_logging
from evalsi.service.settings import (
    LOGGING,
    METADATA_URL,
    METRICS_PORT,
    NATS,
    NATS_CREDENTIALS,
    TRACES_URL,
    Option,
    nats_credentials,
    option,
    parse,
)
from evalsi.service.settings import build_parser as build_settings_parser
from evalsi.stores.traces import open_trace_store
from evalsi.stores.traces.protocol import SummaryRows
from evalsi.yaml_files import read_yaml_file

from .access import open_gate

log = logging.getLogger("evalsi.ingest")


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    http_port: int = 4318
    grpc_port: int = 4317
    traces_url: str = "sqlite:///.evalsi/state/traces.db"
    default_project: str = DEFAULT_PROJECT
    max_body_bytes: int = DEFAULT_MAX_BODY
    completion: CompletionConfig = field(default_factory=CompletionConfig)
    log_level: str = "info"
    log_format: str = "json"
    redact: str = ""  # a rules file (YAML or JSON); empty: no redaction
    nats: str = ""  # empty: standalone, completed traces are not published
    metadata_url: str = ""  # empty: the gate knows evalsi.yaml's keys and roles only
    nats_credentials: str = ""  # a file of this service's NATS user (--nats-credentials)
    replica: int = 0
    replicas: int = 1
    metrics_port: int = 0  # /healthz, /readyz, /metrics; with --processes N, process i serves on port + i
    processes: int = 1  # receivers sharing this replica's ports (SO_REUSEPORT), one partition each
    # evalsi.yaml's auth, rbac and authorization sections, and --no-auth.
    access: AccessSettings = field(default_factory=AccessSettings)

    def redactor(self) -> Redactor | None:
        """The redaction rules, or None; raises BadInputError naming the file and the rule at fault."""
        return Redactor.load(self.redact) if self.redact else None

    def validate(self) -> None:
        self.access.check(self.host)  # refuses a non-loopback --host without an auth section
        for flag, port in (("--http-port", self.http_port), ("--grpc-port", self.grpc_port)):
            if not 0 <= port <= 65535:
                raise BadInputError(f"{flag} {port}: a port is 0 (any free port) to 65535")
        if self.http_port and self.http_port == self.grpc_port:
            raise BadInputError(f"--http-port and --grpc-port are both {self.http_port}: they need their own ports")
        if self.max_body_bytes < 1024:
            raise BadInputError(f"--max-body-bytes {self.max_body_bytes}: must be at least 1024")
        check_project(self.default_project, "--default-project")
        if not 0 <= self.replica < self.replicas:
            raise BadInputError(f"--replica {self.replica} --replicas {self.replicas}: needs 0 <= replica < replicas")
        if self.processes < 1 or (self.processes > 1 and self.replicas > 1):
            raise BadInputError(f"--processes {self.processes}: 1 or more, and only 1 with --replicas above 1")
        if self.replicas > 1 and not self.nats:
            raise BadInputError(f"--replicas {self.replicas}: replicas reach each other over the bus; give --nats")
        try:
            self.completion.validate()
        except ValueError as exc:
            raise BadInputError(f"--grace/--max-wait: {exc}") from exc
        self.redactor()


OPTIONS = (
    Option("--host", default="127.0.0.1", help="address to listen on; beyond loopback only with an auth section "
           "(or --no-auth)"),
    Option("--no-auth", switch=True, default=False, shared=True,
           help="authenticate nobody although evalsi.yaml has an auth section; logs a warning at every start"),
    Option("--http-port", int, 4318, "OTLP/HTTP port; 0 picks a free one", config="ingest.http_port"),
    Option("--grpc-port", int, 4317, "OTLP/gRPC port; 0 picks a free one", config="ingest.grpc_port"),
    TRACES_URL,
    Option("--default-project", default=DEFAULT_PROJECT,
           help="project of spans with neither the x-evalsi-project header nor evalsi.project"),
    Option("--max-body-bytes", int, DEFAULT_MAX_BODY, "largest request accepted, after decompression"),
    Option("--grace", float, 5.0, "seconds after the root span arrives before a trace is complete",
           config="ingest.grace_s"),
    Option("--max-wait", float, 300.0, "seconds after which a trace whose root never came is complete"),
    Option("--redact", default="", metavar="FILE",
           help="per-project redaction rules, YAML or JSON; applied before anything is stored"),
    option(NATS, default="", help="NATS server: publish completed traces for the policies; empty: standalone"),
    option(METADATA_URL, default="", help="metadata store (the api's): API keys created through AuthService, stored "
           "roles and bindings, and refused exports in the audit log; empty: evalsi.yaml's keys and roles only"),
    NATS_CREDENTIALS,
    Option("--replica", int, 0, "this replica's index, 0 to --replicas - 1"),
    Option("--replicas", int, 1, "how many ingest replicas share the traces, by trace id"),
    Option("--processes", int, 1, "receiver processes sharing the ports, a core each"),
    option(METRICS_PORT, help="port for /healthz, /readyz and /metrics (0: none); with --processes N, process i "
           "serves on this port + i"),
    *LOGGING,
)
DESCRIPTION = "Receive OTLP traces and store them."


def build_parser(environ: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    return build_settings_parser("ingest", OPTIONS, description=DESCRIPTION,
                                 environ=os.environ if environ is None else environ)


def settings_from_args(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    args = parse("ingest", OPTIONS, argv, description=DESCRIPTION, environ=os.environ if environ is None else environ)
    return Settings(
        host=args.host,
        http_port=args.http_port,
        grpc_port=args.grpc_port,
        traces_url=args.traces_url,
        default_project=args.default_project,
        max_body_bytes=args.max_body_bytes,
        completion=CompletionConfig(grace_s=args.grace, max_wait_s=args.max_wait),
        log_level=args.log_level,
        log_format=args.log_format,
        redact=args.redact,
        nats=args.nats,
        metadata_url=args.metadata_url,
        nats_credentials=args.nats_credentials,
        replica=args.replica,
        replicas=args.replicas,
        metrics_port=args.metrics_port,
        processes=args.processes,
        access=AccessSettings.from_document(read_yaml_file(args.config) if args.config else {},
                                            no_auth=args.no_auth, where=args.config or ""),
    )


async def serve(settings: Settings, *, stop: asyncio.Event | None = None,
                member: ProcessMember | None = None) -> None:
    """Run until SIGTERM (or ``stop``): open the store (and the bus), start both receivers, complete traces; then
    drain and close. Run by signals (a process), a stop that hangs is diagnosed and ended (``Lifecycle``)."""
    deadline = STOP_DEADLINE_S if stop is None else None
    await Lifecycle("evalsi-ingest", stop_deadline_s=deadline).run(partial(assemble, settings, member), stop=stop)


async def assemble(settings: Settings, member: ProcessMember | None, life: Lifecycle) -> None:
    """The parts in start order. Stopping reverses it: the receivers stop taking spans first (requests in flight
    finish), then what completed is recorded and published, then the bus and the store close."""
    redactor = settings.redactor()
    warning = settings.access.check(settings.host)
    if warning:  # auth: {mode: none} or --no-auth: said at every start
        log.warning(warning)
    # With --metadata-url, keys created through AuthService and stored roles too, and refusals audited.
    gate = await open_gate(settings.access, settings.metadata_url, life)
    tls = settings.access.tls()
    open_on_purpose = bool(settings.access.unauthenticated_reason())
    index = member.partitioning.replica if member is not None else 0
    bus: BusConnection | None = None

    def bus_ready() -> tuple[bool, str]:
        return (True, "") if bus is None else (bus.readiness.ready, bus.readiness.reason)

    assembler = TraceAssembler(settings.completion)
    store = await life.enter("trace store", open_trace_store(settings.traces_url), lambda s: s.close())
    partitioning = member.partitioning if member is not None else Partitioning(settings.replica, settings.replicas)
    publisher = None
    if settings.nats:
        bus = await life.enter("nats", connect(settings.nats, name=f"evalsi-ingest-{settings.replica}",
                                              credentials=nats_credentials(settings.nats_credentials)),
                               BusConnection.close, ready=bus_ready)
        await ensure_streams(bus.js)
        publisher = BusCompletionPublisher(bus.js)
        if settings.replicas > 1:
            await life.enter("notices", notice_consumer(bus, assembler, settings.replica).start(),
                             lambda notices: notices.stop())
    if member is not None:
        rows_store = store if isinstance(store, SummaryRows) else None  # summary rows from the other processes
        await life.enter("process links", member.start(assembler, rows_store), lambda _: member.stop())
    completer = Completer(assembler, store, publisher)
    sink = AssemblingSink(store, assembler, partitioning=partitioning,
                          notices=member or (BusNoticeSender(bus.js) if bus is not None and settings.replicas > 1
                                             else None))
    handler = ExportHandler(sink, default_project=settings.default_project, redactor=redactor)
    if settings.metrics_port:  # with its counters, so after the handler and the completer (the receivers follow)
        registry = ingest_registry(IngestCollector(handler, assembler, completer, process=str(index)))
        await serve_health(life, settings.metrics_port + index, registry)
    await life.spawn("completion", run_completion_loop(completer, life.stopping),
                     stop=partial(_final_completion, completer, handler))
    receiver = OtlpHttpReceiver(handler, max_body_bytes=settings.max_body_bytes, gate=gate)
    _, http_port = await life.enter(
        "otlp/http", start_http_receiver(receiver, settings.host, settings.http_port,
                                         sock=member.http_socket if member is not None else None,
                                         ssl_context=tls.ssl_context() if tls is not None else None,
                                         open_on_purpose=open_on_purpose),
        lambda started: started[0].cleanup())
    _, grpc_port = await life.enter(
        "otlp/grpc", start_grpc_receiver(handler, settings.host, settings.grpc_port, reuse_port=member is not None,
                                         max_body_bytes=settings.max_body_bytes, gate=gate, tls=tls,
                                         open_on_purpose=open_on_purpose),
        lambda started: started[0].stop(grace=5))
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    listening = {"event": "listening", "otlp_http": f"http://{host}:{http_port}",
                 "otlp_grpc": f"{host}:{grpc_port}", "traces_url": mask_url(settings.traces_url),
                 "replica": f"{settings.replica}/{settings.replicas}"}
    if member is not None:
        member.listening(listening)
    else:
        print(json.dumps(listening), flush=True)
    # Everything allocated by now (modules, the receivers) lives as long as the process: frozen out of the
    # collector, which otherwise walks it all at every full collection (~55 ms each; in the ingest benchmark
    # full collections fell from 0.38 s to 0.11 s of a process's ~6 s).
    gc.freeze()


async def _final_completion(completer: Completer, handler: ExportHandler, loop: asyncio.Task[None]) -> None:
    """After the receivers stopped: the loop has seen ``stopping``; record and publish what completed since."""
    await loop
    try:
        await completer.tick()
    except InfraError as exc:
        log.warning("stopping with %d completed traces unpublished: %s", completer.waiting, exc)
    log.info("stopped: %d spans accepted, %d rejected", handler.stats.accepted, handler.stats.rejected)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        settings = settings_from_args(argv)
        settings.validate()
        # Inside: an unknown --log-level is a usage error, exit 2.
        configure_logging(settings.log_level, settings.log_format)
    except BadInputError as exc:
        print(f"evalsi-ingest: {exc}", file=sys.stderr)
        return 2
    try:
        freeze_imports()
        if settings.processes > 1:
            return run_processes(settings, serve, settings.processes)
        asyncio.run(serve(settings))
    except BadInputError as exc:
        print(f"evalsi-ingest: {exc}", file=sys.stderr)
        return 2
    except InfraError as exc:
        print(f"evalsi-ingest: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
