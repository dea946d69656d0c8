"""The worker process: assembled from explicit parts, drained on SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from functools import partial

from prometheus_client import Counter, Histogram

from evalsi.bus import (
    BusBroker,
    BusConnection,
    ConsumerSettings,
    Delivery,
    Permanent,
    Retryable,
    connect,
    ensure_streams,
    publish,
    subjects,
    subscriptions,
)
from evalsi.bus.requests import serve_requests
from evalsi.bus.streams import ensure_consumer
from evalsi.bus.v1alpha1.bus_pb2 import TASK_STATUS_CANCELLED, Task, TaskResult
from evalsi.connections import Connections
from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.judges import RateLimiter
from evalsi.judges.cache import SharedJudgeCache
from evalsi.judges.kv_buckets import NatsKVBucketStore
from evalsi.judges.panel import JudgeSet
from evalsi.limits import DEFAULT_CALL_TIMEOUT_S
from evalsi.plugins import PLUGINS_DIR, load_plugins
from evalsi.runs.execute import Executor, RetryTask, result_for
from evalsi.runs.flags import RunFlags
from evalsi.runs.result_columns import move_results_to_columns
from evalsi.sandbox.client import SANDBOXD_ENV
from evalsi.sandbox.sandboxd_opener import SANDBOXD_AUTHORIZATION_ENV, SandboxdOpener
from evalsi.service.kit import parse_flags, run_service, serve_health
from evalsi.service.lifecycle import Lifecycle
from evalsi.service.logging import ids
from evalsi.service.settings import (
    LOGGING,
    METADATA_URL,
    METRICS_PORT,
    NATS,
    NATS_CREDENTIALS,
    OBJECTS_URL,
    Option,
    nats_credentials,
    option,
)
from evalsi.service.settings import build_parser as build_settings_parser
from evalsi.stores import open_object_store
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest, EvaluateResponse
from evalsi_worker.cancels import CancelWatch

log = logging.getLogger("evalsi.worker")
TASKS = Counter("evalsi_worker_tasks_total", "Tasks handled", ["pool", "stage", "status"])
TASK_SECONDS = Histogram("evalsi_worker_task_seconds", "Time to execute a task", ["pool", "stage"])


def _positive_seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {value!r}") from None
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {value!r}")
    return seconds


OPTIONS = (
    Option("--pool", default="cpu", help="the pool whose tasks and Evaluate requests this worker takes",
           choices=subjects.POOLS),
    NATS,
    NATS_CREDENTIALS,
    option(OBJECTS_URL, default="", help="object store for payloads passed by reference (a directory or s3:// URL)"),
    option(METADATA_URL, default="", help="accepted for symmetry with the other services; workers keep no metadata"),
    Option("--concurrency", int, 16, "concurrent target and judge calls within a task"),
    Option("--tasks", int, 4, "tasks in flight at once"),
    Option("--call-timeout", _positive_seconds, DEFAULT_CALL_TIMEOUT_S, "seconds one evaluator call may take "
           "before it is abandoned and reported as an evaluator error"),
    Option("--ack-wait", float, 30.0, "seconds before an unacknowledged task is redelivered (in-progress acks keep "
           "long tasks alive)"),
    Option("--max-deliver", int, 5, "deliveries before a task is dead-lettered"),
    PLUGINS_DIR,
    METRICS_PORT,
    Option("--name", default=f"{socket.gethostname()}-{os.getpid()}", help="this worker's name in its results"),
    *LOGGING,
)
DESCRIPTION = "Run targets and evaluators for one pool."


def build_parser(environ: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    return build_settings_parser("worker", OPTIONS, description=DESCRIPTION,
                                 environ=os.environ if environ is None else environ)


def sandbox_opener(environ: Mapping[str, str], life: Lifecycle) -> SandboxdOpener | None:
    """Where this worker's code evaluators (the ``sandbox`` pool's) open sandboxes: the evalsi-sandboxd that
    ``evalsi serve`` or compose names in $EVALSI_SANDBOXD; without it (None), this process's own ladder, which
    fails closed just the same when no rung meets a run's minimum."""
    address = environ.get(SANDBOXD_ENV, "")
    if not address:
        return None
    opener = SandboxdOpener(address, authorization=environ.get(SANDBOXD_AUTHORIZATION_ENV, ""))
    life.on_stop("sandboxd clients", opener.close)
    return opener


async def assemble(args: argparse.Namespace, life: Lifecycle) -> None:
    """The worker's parts in start order; at SIGTERM the request server and the task consumer stop first
    (finishing what is in flight, returning the rest), then the judges, the stores and the bus."""
    connections = Connections.from_environ()  # a bad file stops the worker before it takes any work
    await serve_health(life, args.metrics_port)
    bus = await life.enter("nats", connect(args.nats, name=f"evalsi-worker-{args.pool}-{args.name}",
                                   credentials=nats_credentials(args.nats_credentials)),
                           BusConnection.close, ready=lambda: (bus.readiness.ready, bus.readiness.reason))
    await ensure_streams(bus.js)
    settings = ConsumerSettings(ack_wait_s=args.ack_wait, max_deliver=args.max_deliver)
    await ensure_consumer(
        bus.js, subjects.WORK_STREAM, subjects.work_consumer(args.pool), subjects.work(args.pool), settings
    )
    objects = None
    if args.objects_url:
        objects = await life.enter("object store", open_object_store(args.objects_url), lambda o: o.close())
    flags = await RunFlags.open(bus.js)
    # One read a second of a run's flag while its tasks are in flight here, however many they are.
    cancels = CancelWatch(flags.get)
    life.on_stop("run cancel watch", cancels.close)  # after the task consumer: its handlers are done by then
    registry = Registry.from_entry_points()
    if args.plugins_dir:  # server configuration only: no request names a plugin or its path
        plugins = await asyncio.to_thread(load_plugins, registry, args.plugins_dir)
        life.on_stop("plugins", lambda: asyncio.to_thread(plugins.close))
    # Every worker of every pool draws on the same per-model quotas: token buckets in NATS KV, on the wall
    # clock the workers share.
    limiter = RateLimiter(store=await NatsKVBucketStore.open(bus.js), clock=time.time)
    # With a shared object store, judge answers are cached there for every worker; else on this machine.
    shared = SharedJudgeCache(objects) if objects is not None else None
    judges = await life.enter_context("judges", JudgeSet({}, limiter=limiter, shared_cache=shared))
    executor = Executor(
        registry,
        judges,
        concurrency=args.concurrency,
        call_timeout_s=args.call_timeout,
        fetch=objects.get if objects is not None else None,
        worker=args.name,
        # Judges and targets only by name, from this process's configuration (EVALSI_CONNECTIONS_FILE).
        connections=connections,
        sandbox=sandbox_opener(os.environ, life),
    )

    async def handle(task: Task, delivery: Delivery) -> None:
        stage = str(task.stage)
        async with cancels.watching(task.run_id) as run_cancelled:
            if run_cancelled.is_set():
                result = result_for(task, TASK_STATUS_CANCELLED, args.name)
            else:
                result = await run_unless_cancelled(task, delivery, run_cancelled)
        result.delivery = delivery.num_delivered
        # As columns: the scheduler, one for every worker, then neither reads nor re-serializes each result.
        move_results_to_columns(result)
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

    async def run_unless_cancelled(task: Task, delivery: Delivery, run_cancelled: asyncio.Event) -> TaskResult:
        watch = asyncio.create_task(run_cancelled.wait())
        final = delivery.num_delivered >= args.max_deliver
        work = asyncio.create_task(executor.execute(task, final_attempt=final))
        try:
            with TASK_SECONDS.labels(args.pool, str(task.stage)).time():
                await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
            if work.done():
                return work.result()
            # The run was cancelled mid-task: drop the partial work, a resume redoes the task.
            work.cancel()
            log.info("task cancelled with its run", extra=ids(run_id=task.run_id, task_key=task.key))
            return result_for(task, TASK_STATUS_CANCELLED, args.name)
        except BadInputError as exc:  # a task no retry can fix: dead-letter it, the scheduler reports it
            raise Permanent(str(exc)) from exc
        except RetryTask as exc:  # back on the queue with a backoff; the last attempt reports errors
            raise Retryable(str(exc)) from exc
        finally:
            watch.cancel()

    consumer = BusBroker(bus, store=objects)
    consumer.subscribe(subscriptions.work(args.pool, concurrency=args.tasks, ack_wait_s=args.ack_wait,
                                          max_deliver=args.max_deliver), handle)
    await life.enter_part("task consumer", consumer)

    async def answer(request: EvaluateRequest, _delivery: Delivery) -> EvaluateResponse:
        return await executor.evaluate_request(request)

    await life.enter(
        "evaluate requests",
        serve_requests(
            bus.nc,
            subjects.evaluate(args.pool),
            subjects.evaluate_queue(args.pool),
            answer,
            request_type=EvaluateRequest,
            concurrency=args.concurrency * 4,
            store=objects,
        ),
        lambda requests: requests.stop(),
    )
    log.info("worker serving its pool", extra={"worker": args.name, "pool": args.pool})


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_flags("worker", OPTIONS, argv, description=DESCRIPTION)
    return run_service("worker", partial(assemble, args), args.log_level, args.log_format)


if __name__ == "__main__":
    sys.exit(main())
