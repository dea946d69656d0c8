"""The scheduler process: control, results and dead-letter consumers around one Scheduler, plus adoption.

While the metadata store does not answer, the results and dead-letter consumers hold what they have and pull
nothing more (an outage is not a failed delivery). Dead letters of every kind are handled here: a task's become
infrastructure errors, a result's and a control's are folded back as if they had arrived on time, and anything
else (or one that fails again) is kept in the dead-letter stream, counted and logged, never re-published.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys

import nats.errors
from google.protobuf.message import Message
from prometheus_client import Counter

from evalsi.bus import (
    Consumer,
    Delivery,
    Permanent,
    connect,
    ensure_scheduler_consumers,
    ensure_streams,
    publish,
    subjects,
    watch_max_deliveries,
)
from evalsi.bus.codec import DEAD_REASON_HEADER
from evalsi.bus.deadletter import DEAD_MSG_ID_HEADER
from evalsi.bus.streams import ensure_consumer
from evalsi.bus.v1alpha1.bus_pb2 import (
    CONTROL_ACTION_CANCEL,
    CONTROL_ACTION_CREATED,
    CONTROL_ACTION_RESUME,
    RunControl,
    Task,
    TaskResult,
)
from evalsi.errors import BadInputError, InfraError
from evalsi.evaluators import Registry
from evalsi.runs.driver import Scheduler, run_periodically, run_traceparent
from evalsi.runs.flags import RunFlags
from evalsi.service.http import start_service_http
from evalsi.service.logging import LEVELS, configure_logging
from evalsi.stores import open_metadata_store, open_object_store
from evalsi.v1alpha1.run_service_pb2 import RunEvent

log = logging.getLogger("evalsi.scheduler")
# Renamed from "scheduler-deadletters", which rejected every dead letter but a task's: the new durable starts at
# the beginning of the stream, so results dead-lettered by earlier versions are folded back too.
DEADLETTER_CONSUMER = "scheduler-dead-letters"
_OLD_DEADLETTER_CONSUMER = "scheduler-deadletters"
DEAD_LETTERS = Counter(
    "evalsi_scheduler_dead_letters",
    "Dead letters read, by message type and outcome (handled: folded back or recorded; kept: left in the stream)",
    ["type", "outcome"],
)


def build_parser() -> argparse.ArgumentParser:
    env = os.environ.get
    # No abbreviations: a renamed flag in a deployment must fail, not match the prefix of another.
    parser = argparse.ArgumentParser(
        prog="evalsi-scheduler", description="Plan, track and finish runs.", allow_abbrev=False
    )
    parser.add_argument("--nats", default=env("EVALSI_NATS_URL", "nats://127.0.0.1:4222"))
    parser.add_argument("--metadata-url", default=env("EVALSI_METADATA_URL", "sqlite:///.evalsi/state/evalsi.db"))
    parser.add_argument("--objects-url", default=env("EVALSI_OBJECTS_URL", ".evalsi/state/objects"))
    parser.add_argument(
        "--lease-ttl",
        type=float,
        default=float(env("EVALSI_LEASE_TTL", "15")),
        help="Seconds a run's lease lasts without renewal; another replica adopts the run after.",
    )
    parser.add_argument("--metrics-port", type=int, default=int(env("EVALSI_METRICS_PORT", "0")))
    parser.add_argument("--name", default=f"{socket.gethostname()}-{os.getpid()}")
    parser.add_argument("--log-level", default=env("EVALSI_LOG_LEVEL", "info"), choices=LEVELS,
                        help="JSON log lines on stderr at this level and above (default: info)")
    return parser


class _Bus:
    """The scheduler's BusPort over NATS."""

    def __init__(self, js, objects, flags: RunFlags) -> None:  # type: ignore[no-untyped-def]
        self._js, self._objects, self._flags = js, objects, flags

    async def publish_task(self, pool: str, task: Task, msg_id: str) -> None:
        await publish(
            self._js,
            subjects.work(pool),
            task,
            key=msg_id,
            store=self._objects,
            traceparent=run_traceparent(task.run_id, task.key),
        )

    async def publish_event(self, event: RunEvent) -> None:
        await publish(
            self._js,
            subjects.run_events(event.run_id),
            event,
            key=None,
            traceparent=run_traceparent(event.run_id, "events"),
        )

    async def set_run_flag(self, run_id: str, flag: str) -> None:
        try:
            await self._flags.set(run_id, flag)
        except nats.errors.Error as e:
            raise InfraError(f"setting run flag {run_id}={flag}: {type(e).__name__}: {e}") from e


async def serve(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    bus = await connect(args.nats, name=f"evalsi-scheduler-{args.name}")
    await ensure_streams(bus.js)
    await ensure_scheduler_consumers(bus.js)
    await ensure_consumer(bus.js, subjects.DEADLETTER_STREAM, DEADLETTER_CONSUMER, "deadletter.>")
    with contextlib.suppress(nats.errors.Error):  # gone already (or never made): nothing to tidy
        await bus.js.delete_consumer(subjects.DEADLETTER_STREAM, _OLD_DEADLETTER_CONSUMER)
    store = await open_metadata_store(args.metadata_url)
    objects = await open_object_store(args.objects_url)
    flags = await RunFlags.open(bus.js)
    scheduler = Scheduler(
        store,
        objects,
        _Bus(bus.js, objects, flags),
        Registry.from_entry_points(),
        owner=args.name,
        lease_ttl_s=args.lease_ttl,
        tick_s=min(0.5, args.lease_ttl / 6),
    )

    async def on_result(result: TaskResult, _delivery: Delivery) -> None:
        await scheduler.held_while_down(scheduler.on_task_result(result))

    async def on_control(control: RunControl, _delivery: Delivery) -> None:
        action = {
            CONTROL_ACTION_CREATED: scheduler.on_control_created,
            CONTROL_ACTION_RESUME: scheduler.on_control_resume,
            CONTROL_ACTION_CANCEL: scheduler.on_control_cancel,
        }.get(control.action)
        if action is not None:
            await scheduler.held_while_down(action(control.project or "default", control.run_id))

    async def on_dead(message: Message, delivery: Delivery) -> None:
        if isinstance(message, Task):
            reason = delivery.headers.get(DEAD_REASON_HEADER, "delivery attempts exhausted")
            msg_id = delivery.headers.get(DEAD_MSG_ID_HEADER, "")
            await scheduler.held_while_down(scheduler.on_dead_letter(message, reason, msg_id))
        elif isinstance(message, TaskResult):
            await scheduler.held_while_down(scheduler.on_task_result(message))
        elif isinstance(message, RunControl):
            await on_control(message, delivery)
        else:
            raise Permanent(f"no handler for a dead {type(message).DESCRIPTOR.full_name}")
        DEAD_LETTERS.labels(type(message).DESCRIPTOR.name, "handled").inc()

    async def on_kept(message: Message | None, _delivery: Delivery, _reason: str) -> None:
        # Only names this process knows label the metric: a poison message must not mint label values.
        kind = type(message).DESCRIPTOR.name if message is not None else "undecodable"
        DEAD_LETTERS.labels(kind, "kept").inc()

    consumers = [
        Consumer(
            bus.js,
            subjects.RESULTS_STREAM,
            subjects.RESULTS_CONSUMER,
            "results.>",
            on_result,
            message_type=TaskResult,
            batch=32,
            concurrency=8,
            store=objects,
            ensure=False,
            probe=scheduler.available,
        ),
        Consumer(
            bus.js,
            subjects.CONTROL_STREAM,
            subjects.CONTROL_CONSUMER,
            "runs.control.>",
            on_control,
            message_type=RunControl,
            batch=8,
            concurrency=4,
            ensure=False,
            probe=scheduler.available,
        ),
        Consumer(
            bus.js,
            subjects.DEADLETTER_STREAM,
            DEADLETTER_CONSUMER,
            "deadletter.>",
            on_dead,
            message_type=None,
            batch=8,
            concurrency=2,
            store=objects,
            ensure=False,
            probe=scheduler.available,
            on_dead_letter=on_kept,
        ),
    ]
    for consumer in consumers:
        await consumer.start()
    # Tasks and results whose last delivery died unacked go to the dead letters, and from there back here.
    watchers = [
        await watch_max_deliveries(bus.nc, bus.js, stream, "*", store=objects)
        for stream in (subjects.WORK_STREAM, subjects.RESULTS_STREAM)
    ]
    http = await start_service_http("127.0.0.1", args.metrics_port, lambda: (bus.readiness.ready, bus.readiness.reason))
    adoption = asyncio.create_task(run_periodically(max(0.5, args.lease_ttl / 3), scheduler.adopt_orphans, stop))
    log.info("scheduler %s ready", args.name)
    await stop.wait()
    adoption.cancel()
    for watcher in watchers:
        await watcher.stop()
    for consumer in consumers:
        await consumer.stop()
    await scheduler.stop()
    await http.cleanup()
    await store.close()
    await objects.close()
    await bus.close()


def main() -> None:
    args = build_parser().parse_args()
    try:
        configure_logging(args.log_level)
    except BadInputError as exc:  # EVALSI_LOG_LEVEL, which argparse's choices do not check
        print(f"evalsi-scheduler: {exc}", file=sys.stderr)
        sys.exit(2)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args))
    sys.exit(0)


if __name__ == "__main__":
    main()
