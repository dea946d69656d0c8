"""The ``evalsi-ingest`` process: OTLP/HTTP and OTLP/gRPC receivers, one handler, the trace store, SIGTERM.

    evalsi-ingest --http-port 4318 --grpc-port 4317 --traces-url sqlite:///.evalsi/state/traces.db \
        [--nats nats://127.0.0.1:4222] [--replica 0 --replicas 1]

With ``--nats``, completed traces are published on ``traces.completed.<project>`` for the policy service, and
several replicas share the load: replica i completes the traces of partition i (crc32 of the trace id modulo
``--replicas``); spans of other partitions are stored and their owner is told over the bus. Without it,
ingest stands alone (traces are stored and completed, nobody is told).

Every flag has an ``EVALSI_*`` variable (``--help`` names them); a flag wins. Only loopback addresses are
accepted for ``--host`` until authentication exists. Port 0 picks a free port; the addresses bound are printed
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
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evalsi.bus import connect, ensure_streams
from evalsi.errors import BadInputError, InfraError
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
from evalsi.service.http import start_service_http
from evalsi.service.logging import configure_logging
from evalsi.stores.traces import open_trace_store

log = logging.getLogger("evalsi.ingest")
LOOPBACK = ("127.0.0.1", "::1", "localhost")


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    http_port: int = 4318
    grpc_port: int = 4317
    traces_url: str = "sqlite:///.evalsi/state/traces.db"
    default_project: str = "default"
    max_body_bytes: int = DEFAULT_MAX_BODY
    completion: CompletionConfig = field(default_factory=CompletionConfig)
    log_level: str = "info"
    redact: str = ""  # a rules file (YAML or JSON); empty: no redaction
    nats: str = ""  # empty: standalone, completed traces are not published
    replica: int = 0
    replicas: int = 1
    metrics_port: int = 0  # /healthz, /readyz, /metrics; with --processes N, process i serves on port + i
    # Containers must listen beyond loopback; only where the network itself is the boundary (compose, a pod).
    allow_non_loopback: bool = False
    processes: int = 1  # receivers sharing this replica's ports (SO_REUSEPORT), one partition each

    def redactor(self) -> Redactor | None:
        """The redaction rules, or None; raises BadInputError naming the file and the rule at fault."""
        return Redactor.load(self.redact) if self.redact else None

    def validate(self) -> None:
        if not self.allow_non_loopback and self.host not in LOOPBACK and not self.host.startswith("127."):
            raise BadInputError(f"--host {self.host}: authentication does not exist yet, so evalsi-ingest listens "
                                "only on loopback (127.0.0.1, ::1 or localhost); on a private network (a container "
                                "network) pass --allow-non-loopback")
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


def build_parser() -> argparse.ArgumentParser:
    env = os.environ.get
    parser = argparse.ArgumentParser(prog="evalsi-ingest", description="Receive OTLP traces and store them.",
                                     allow_abbrev=False)
    parser.add_argument("--host", default=env("EVALSI_INGEST_HOST", "127.0.0.1"),
                        help="loopback address to listen on (EVALSI_INGEST_HOST)")
    parser.add_argument("--allow-non-loopback", action="store_true",
                        default=env("EVALSI_INGEST_ALLOW_NON_LOOPBACK", "") in ("1", "true", "yes"),
                        help="accept a non-loopback --host (EVALSI_INGEST_ALLOW_NON_LOOPBACK=1): there is no "
                        "authentication yet, so only where the network is private (a container network)")
    parser.add_argument("--http-port", type=int, default=int(env("EVALSI_OTLP_HTTP_PORT", "4318")),
                        help="OTLP/HTTP port (EVALSI_OTLP_HTTP_PORT); 0 picks a free one")
    parser.add_argument("--grpc-port", type=int, default=int(env("EVALSI_OTLP_GRPC_PORT", "4317")),
                        help="OTLP/gRPC port (EVALSI_OTLP_GRPC_PORT); 0 picks a free one")
    parser.add_argument("--traces-url", default=env("EVALSI_TRACES_URL", "sqlite:///.evalsi/state/traces.db"),
                        help="trace store URL (EVALSI_TRACES_URL): sqlite:///<path>")
    parser.add_argument("--default-project", default=env("EVALSI_DEFAULT_PROJECT", DEFAULT_PROJECT),
                        help="project of spans with neither the x-evalsi-project header nor evalsi.project")
    parser.add_argument("--max-body-bytes", type=int, default=int(env("EVALSI_OTLP_MAX_BODY_BYTES",
                                                                      str(DEFAULT_MAX_BODY))),
                        help="largest request accepted, after decompression (EVALSI_OTLP_MAX_BODY_BYTES)")
    parser.add_argument("--grace", type=float, default=float(env("EVALSI_TRACE_GRACE_S", "5")),
                        help="seconds after the root span arrives before a trace is complete (EVALSI_TRACE_GRACE_S)")
    parser.add_argument("--max-wait", type=float, default=float(env("EVALSI_TRACE_MAX_WAIT_S", "300")),
                        help="seconds after which a trace whose root never came is complete (EVALSI_TRACE_MAX_WAIT_S)")
    parser.add_argument("--redact", default=env("EVALSI_INGEST_REDACT", ""), metavar="FILE",
                        help="per-project redaction rules, YAML or JSON (EVALSI_INGEST_REDACT); applied before "
                        "anything is stored")
    parser.add_argument("--nats", default=env("EVALSI_INGEST_NATS_URL", ""), metavar="URL",
                        help="NATS server (EVALSI_INGEST_NATS_URL): publish completed traces for the policies; "
                        "empty: standalone")
    parser.add_argument("--replica", type=int, default=int(env("EVALSI_INGEST_REPLICA", "0")),
                        help="this replica's index, 0 to --replicas - 1 (EVALSI_INGEST_REPLICA)")
    parser.add_argument("--replicas", type=int, default=int(env("EVALSI_INGEST_REPLICAS", "1")),
                        help="how many ingest replicas share the traces, by trace id (EVALSI_INGEST_REPLICAS)")
    parser.add_argument("--processes", type=int, default=int(env("EVALSI_INGEST_PROCESSES", "1")),
                        help="receiver processes sharing the ports, a core each (EVALSI_INGEST_PROCESSES)")
    parser.add_argument("--metrics-port", type=int, default=int(env("EVALSI_INGEST_METRICS_PORT", "0")),
                        help="port for /healthz, /readyz and /metrics (EVALSI_INGEST_METRICS_PORT; 0: none); "
                        "with --processes N, process i serves on this port + i")
    parser.add_argument("--log-level", default=env("EVALSI_LOG_LEVEL", "info"))
    return parser


def settings_from_args(argv: Sequence[str] | None = None) -> Settings:
    args = build_parser().parse_args(argv)
    return Settings(
        host=args.host,
        http_port=args.http_port,
        grpc_port=args.grpc_port,
        traces_url=args.traces_url,
        default_project=args.default_project,
        max_body_bytes=args.max_body_bytes,
        completion=CompletionConfig(grace_s=args.grace, max_wait_s=args.max_wait),
        log_level=args.log_level,
        redact=args.redact,
        nats=args.nats,
        replica=args.replica,
        replicas=args.replicas,
        metrics_port=args.metrics_port,
        allow_non_loopback=args.allow_non_loopback,
        processes=args.processes,
    )


async def serve(settings: Settings, *, stop: asyncio.Event | None = None,
                member: ProcessMember | None = None) -> None:
    """Open the store (and the bus), start both receivers, complete traces; on ``stop`` (SIGTERM) drain and close."""
    if stop is None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
    redactor = settings.redactor()
    store = await open_trace_store(settings.traces_url)
    assembler = TraceAssembler(settings.completion)
    partitioning = member.partitioning if member is not None else Partitioning(settings.replica, settings.replicas)
    bus = notices = metrics = None
    http_runner = grpc_server = None
    try:
        publisher = None
        if settings.nats:
            bus = await connect(settings.nats, name=f"evalsi-ingest-{settings.replica}")
            await ensure_streams(bus.js)
            publisher = BusCompletionPublisher(bus.js)
            if settings.replicas > 1:
                notices = await notice_consumer(bus.js, assembler, settings.replica).start()
        if member is not None:
            await member.start(assembler)
        completer = Completer(assembler, store, publisher)
        sink = AssemblingSink(store, assembler, partitioning=partitioning,
                              notices=member or (BusNoticeSender(bus.js) if bus is not None and settings.replicas > 1
                                                 else None))
        handler = ExportHandler(sink, default_project=settings.default_project, redactor=redactor)
        index = member.partitioning.replica if member is not None else 0
        if settings.metrics_port:
            collector = IngestCollector(handler, assembler, completer, process=str(index))
            metrics = await start_service_http(
                "127.0.0.1", settings.metrics_port + index,
                lambda: (bus is None or bus.readiness.ready, "" if bus is None else bus.readiness.reason),
                ingest_registry(collector))
        receiver = OtlpHttpReceiver(handler, max_body_bytes=settings.max_body_bytes)
        http_runner, http_port = await start_http_receiver(
            receiver, settings.host, settings.http_port, sock=member.http_socket if member is not None else None)
        grpc_server, grpc_port = await start_grpc_receiver(handler, settings.host, settings.grpc_port,
                                                           reuse_port=member is not None,
                                                           max_body_bytes=settings.max_body_bytes)
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
        await run_completion_loop(completer, stop)
        # Stop taking spans first, let requests in flight finish, then record and publish what completed.
        await _stop_receivers(grpc_server, http_runner)
        grpc_server = http_runner = None
        try:
            await completer.tick()
        except InfraError as exc:
            log.warning("stopping with %d completed traces unpublished: %s", completer.waiting, exc)
        log.info("stopped: %d spans accepted, %d rejected", handler.stats.accepted, handler.stats.rejected)
    finally:
        await _stop_receivers(grpc_server, http_runner)
        if metrics is not None:
            await metrics.cleanup()
        if member is not None:
            await member.stop()
        if notices is not None:
            await notices.stop()
        if bus is not None:
            await bus.close()
        await store.close()


async def _stop_receivers(grpc_server: Any, http_runner: Any) -> None:
    if grpc_server is not None:
        await grpc_server.stop(grace=5)
    if http_runner is not None:
        await http_runner.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        settings = settings_from_args(argv)
        settings.validate()
        configure_logging(settings.log_level)  # inside: an unknown --log-level is a usage error, exit 2
    except BadInputError as exc:
        print(f"evalsi-ingest: {exc}", file=sys.stderr)
        return 2
    try:
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
