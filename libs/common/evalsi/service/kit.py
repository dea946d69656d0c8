"""The service kit: what every ``evalsi-*`` process is built from.

    OPTIONS = (NATS, METADATA_URL, METRICS_PORT, Option("--lease-ttl", float, 15.0, "..."), *LOGGING)

    def main(argv=None) -> int:
        args = parse_flags("scheduler", OPTIONS, argv, description="...")
        return run_service("scheduler", partial(assemble, args), args.log_level, args.log_format)

    async def assemble(args, life: Lifecycle) -> None:
        await serve_health(life, args.metrics_port)          # first: /healthz answers while the rest starts
        bus = await life.enter("nats", connect(args.nats), BusConnection.close, ready=...)
        ...

Settings (``evalsi.service.settings``): flags over ``EVALSI_<SERVICE>_<KEY>`` (``EVALSI_<KEY>`` for shared
keys) over evalsi.yaml over defaults. Lifecycle (``evalsi.service.lifecycle``): ordered start, drain on SIGTERM,
reverse stop, nothing leaked when a start fails, a fatal error re-raised. Exit codes: 0 after a clean stop,
1 on an internal or infrastructure error, 2 on bad flags or configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import gc
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence

from prometheus_client import REGISTRY, CollectorRegistry

from evalsi.errors import BadInputError
from evalsi.service.http import start_service_http
from evalsi.service.lifecycle import Lifecycle
from evalsi.service.logging import configure_logging
from evalsi.service.settings import Option, parse

log = logging.getLogger("evalsi.service")

Assemble = Callable[[Lifecycle], Awaitable[None]]


def parse_flags(service: str, options: Sequence[Option], argv: Sequence[str] | None, *, description: str,
                environ: Mapping[str, str] | None = None) -> argparse.Namespace:
    """The service's settings; a bad variable or evalsi.yaml value exits 2 naming it (argparse does for flags)."""
    try:
        return parse(service, options, argv, description=description,
                     environ=os.environ if environ is None else environ)
    except BadInputError as exc:
        print(f"evalsi-{service}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


async def serve_health(life: Lifecycle, port: int, registry: CollectorRegistry = REGISTRY,
                       host: str = "127.0.0.1") -> None:
    """/healthz, /readyz (the lifecycle's readiness) and /metrics on ``port``; 0 serves none."""
    await life.enter("health", start_service_http(host, port, life.ready, registry), lambda runner: runner.cleanup())


STOP_DEADLINE_S = 30.0  # Kubernetes' default termination grace period


def freeze_imports() -> None:
    """Move everything imported so far out of the collector's sight: a full collection of a service's ~124,000
    import-time objects took ~0.5 s at load (an Evaluate call's p100), and none of them is ever garbage."""
    gc.collect()
    gc.freeze()


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop when it is installed (the ``fast`` extra), else None: asyncio's own.

    An optional fast path, not a dependency (DESIGN.md's list does not name it): the services' hot loops are
    grpc.aio's and nats-py's callbacks and socket writes, and on uvloop an Evaluate's NATS request/reply cost 20%
    less CPU (621 -> 495 us a round trip, caller and responder, paired rounds in one process) and the gRPC
    Evaluate's p50 fell 13% (docs/benchmarks.md). Everything works the same on either loop.
    """
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run_service(service: str, assemble: Assemble, log_level: str, log_format: str, *,
                stop_deadline_s: float = STOP_DEADLINE_S) -> int:
    """Configure logging, run the lifecycle until SIGTERM or SIGINT (or a fatal error); the exit code.

    ``kill -USR1`` prints every thread's stack to stderr; a stop still running ``stop_deadline_s`` after it began
    prints them and exits 1 (``Lifecycle``).
    """
    try:
        configure_logging(log_level, log_format)
    except BadInputError as exc:
        print(f"evalsi-{service}: {exc}", file=sys.stderr)
        return 2
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    freeze_imports()
    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            runner.run(Lifecycle(f"evalsi-{service}", stop_deadline_s=stop_deadline_s).run(assemble))
    except KeyboardInterrupt:  # a second Ctrl-C while stopping
        return 0
    except BadInputError as exc:  # configuration only found bad at start (a file, a URL)
        log.error("bad configuration", extra={"error": str(exc)})
        print(f"evalsi-{service}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        log.error("evalsi-%s failed", service, exc_info=exc)
        print(f"evalsi-{service}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0
