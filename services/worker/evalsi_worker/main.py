"""The worker process: assembled from explicit parts, drained on SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import time

from prometheus_client import Counter, Histogram

from evalsi.bus import (
    Consumer,
    ConsumerSettings,
    Delivery,
    Permanent,
    Retryable,
    connect,
    ensure_streams,
    publish,
    subjects,
)
from evalsi.bus.requests import serve_requests
from evalsi.bus.streams import ensure_consumer
from evalsi.bus.v1alpha1.bus_pb2 import TASK_STATUS_CANCELLED, Task
from evalsi.connections import Connections
from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.judges import RateLimiter
from evalsi.judges.cache import SharedJudgeCache
from evalsi.judges.kv_buckets import NatsKVBucketStore
from evalsi.judges.panel import JudgeSet
from evalsi.limits import DEFAULT_CALL_TIMEOUT_S
from evalsi.runs.execute import Executor, RetryTask, result_for
from evalsi.runs.flags import RunFlags
from evalsi.service.http import start_service_http
from evalsi.service.logging import LEVELS, configure_logging
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest

log = logging.getLogger("evalsi.worker")
TASKS = Counter("evalsi_worker_tasks_total", "Tasks handled", ["pool", "stage", "status"])
TASK_SECONDS = Histogram("evalsi_worker_task_seconds", "Time to execute a task", ["pool", "stage"])


async def _wait_for_cancel(flags: RunFlags, run_id: str, every_s: float = 1.0) -> None:
    """Returns once the run is flagged cancelled (checked every second while a task runs)."""
    while await flags.get(run_id) != "cancelled":
        await asyncio.sleep(every_s)


def _positive_seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {value!r}") from None
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {value!r}")
    return seconds


def build_parser() -> argparse.ArgumentParser:
    env = os.environ.get
    # No abbreviations: a renamed flag in a deployment must fail, not match the prefix of another.
    parser = argparse.ArgumentParser(
        prog="evalsi-worker", description="Run targets and evaluators for one pool.", allow_abbrev=False
    )
    parser.add_argument("--pool", default=env("EVALSI_POOL", "cpu"), choices=subjects.POOLS)
    parser.add_argument("--nats", default=env("EVALSI_NATS_URL", "nats://127.0.0.1:4222"))
    parser.add_argument(
        "--objects-url",
        default=env("EVALSI_OBJECTS_URL", ""),
        help="Object store for payloads passed by reference (directory or s3:// URL).",
    )
    parser.add_argument(
        "--metadata-url",
        default=env("EVALSI_METADATA_URL", ""),
        help="Accepted for symmetry with the other services; workers keep no metadata.",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=int(env("EVALSI_CONCURRENCY", "16")),
        help="Concurrent target and judge calls within a task.",
    )
    parser.add_argument("--tasks", type=int, default=int(env("EVALSI_TASKS", "4")), help="Tasks in flight at once.")
    parser.add_argument(
        "--call-timeout",
        type=_positive_seconds,
        default=env("EVALSI_CALL_TIMEOUT", str(DEFAULT_CALL_TIMEOUT_S)),
        help="Seconds one evaluator call may take before it is abandoned and reported as an evaluator error "
        f"(default {DEFAULT_CALL_TIMEOUT_S:g}).",
    )
    parser.add_argument(
        "--ack-wait",
        type=float,
        default=float(env("EVALSI_ACK_WAIT", "30")),
        help="Seconds before an unacknowledged task is redelivered (in-progress acks keep long tasks alive).",
    )
    parser.add_argument("--max-deliver", type=int, default=5, help="Deliveries before a task is dead-lettered.")
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=int(env("EVALSI_METRICS_PORT", "0")),
        help="Port for /healthz, /readyz and /metrics (0: none).",
    )
    parser.add_argument("--name", default=f"{socket.gethostname()}-{os.getpid()}")
    parser.add_argument("--log-level", default=env("EVALSI_LOG_LEVEL", "info"), choices=LEVELS,
                        help="JSON log lines on stderr at this level and above (default: info)")
    return parser


async def serve(args: argparse.Namespace) -> None:
    connections = Connections.from_environ()  # a bad file stops the worker before it takes any work
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    bus = await connect(args.nats, name=f"evalsi-worker-{args.pool}-{args.name}")
    await ensure_streams(bus.js)
    settings = ConsumerSettings(ack_wait_s=args.ack_wait, max_deliver=args.max_deliver)
    await ensure_consumer(
        bus.js, subjects.WORK_STREAM, subjects.work_consumer(args.pool), subjects.work(args.pool), settings
    )
    objects = None
    if args.objects_url:
        from evalsi.stores import open_object_store

        objects = await open_object_store(args.objects_url)
    flags = await RunFlags.open(bus.js)
    registry = Registry.from_entry_points()
    http = await start_service_http("127.0.0.1", args.metrics_port, lambda: (bus.readiness.ready, bus.readiness.reason))
    # Every worker of every pool draws on the same per-model quotas: token buckets in NATS KV, on the wall
    # clock the workers share.
    limiter = RateLimiter(store=await NatsKVBucketStore.open(bus.js), clock=time.time)
    # With a shared object store, judge answers are cached there for every worker; else on this machine.
    shared = SharedJudgeCache(objects) if objects is not None else None
    async with JudgeSet({}, limiter=limiter, shared_cache=shared) as judges:
        executor = Executor(
            registry,
            judges,
            concurrency=args.concurrency,
            call_timeout_s=args.call_timeout,
            fetch=objects.get if objects is not None else None,
            worker=args.name,
            # Judges and targets only by name, from this process's configuration (EVALSI_CONNECTIONS_FILE).
            connections=connections,
        )

        async def handle(task: Task, delivery: Delivery) -> None:
            stage = str(task.stage)
            cancelled = result_for(task, TASK_STATUS_CANCELLED, args.name)
            if await flags.get(task.run_id) == "cancelled":
                result = cancelled
            else:
                watch = asyncio.create_task(_wait_for_cancel(flags, task.run_id))
                final = delivery.num_delivered >= args.max_deliver
                work = asyncio.create_task(executor.execute(task, final_attempt=final))
                try:
                    with TASK_SECONDS.labels(args.pool, stage).time():
                        await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
                    if work.done():
                        result = work.result()
                    else:  # the run was cancelled mid-task: drop the partial work, a resume redoes the task
                        work.cancel()
                        result = cancelled
                except BadInputError as exc:  # a task no retry can fix: dead-letter it, the scheduler reports it
                    raise Permanent(str(exc)) from exc
                except RetryTask as exc:  # back on the queue with a backoff; the last attempt reports errors
                    raise Retryable(str(exc)) from exc
                finally:
                    watch.cancel()
            result.delivery = delivery.num_delivered
            # The task's message id keys the result, so a redelivered task's second result is dropped.
            await publish(
                bus.js,
                subjects.results(task.run_id),
                result,
                key=delivery.msg_id or task.key,
                store=objects,
                traceparent=delivery.traceparent,
                tracestate=delivery.tracestate,
            )
            TASKS.labels(args.pool, stage, str(result.status)).inc()

        consumer = Consumer(
            bus.js,
            subjects.WORK_STREAM,
            subjects.work_consumer(args.pool),
            subjects.work(args.pool),
            handle,
            message_type=Task,
            batch=args.tasks,
            concurrency=args.tasks,
            ack_wait=args.ack_wait,
            max_deliver=args.max_deliver,
            heartbeat_s=args.ack_wait / 3,
            store=objects,
            ensure=False,
        )
        await consumer.start()

        async def answer(request: EvaluateRequest, _delivery: Delivery):  # type: ignore[no-untyped-def]
            return await executor.evaluate_request(request)

        requests = await serve_requests(
            bus.nc,
            subjects.evaluate(args.pool),
            subjects.evaluate_queue(args.pool),
            answer,
            request_type=EvaluateRequest,
            concurrency=args.concurrency * 4,
            store=objects,
        )
        log.info("worker %s serving pool %s", args.name, args.pool)
        await stop.wait()
        log.info("draining: finishing tasks in flight, returning the rest")
        await requests.stop()
        await consumer.stop()
    await http.cleanup()
    if objects is not None:
        await objects.close()
    await bus.close()


def main() -> None:
    args = build_parser().parse_args()
    try:
        configure_logging(args.log_level)
    except BadInputError as exc:  # EVALSI_LOG_LEVEL, which argparse's choices do not check
        print(f"evalsi-worker: {exc}", file=sys.stderr)
        sys.exit(2)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(args))
    except BadInputError as exc:  # its connections file (EVALSI_CONNECTIONS_FILE)
        print(f"evalsi-worker: {exc}", file=sys.stderr)
        sys.exit(2)
    sys.exit(0)


if __name__ == "__main__":
    main()
