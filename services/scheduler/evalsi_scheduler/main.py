"""The scheduler process: control, results and dead-letter consumers around one RunDriver, plus adoption.

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
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial

import nats.errors
from google.protobuf.message import Message
from nats.js import JetStreamContext
from prometheus_client import Counter

# Loaded at start: the first summary of a run would otherwise import scipy.special on the event loop (about a
# second of CPU, with every delivery of that moment waiting).
import evalsi.stats.summary  # noqa: F401
from evalsi.bus import (
    BusBroker,
    BusConnection,
    Delivery,
    ObjectStore,
    Permanent,
    connect,
    ensure_scheduler_consumers,
    ensure_streams,
    publish,
    subjects,
    subscriptions,
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
from evalsi.datasets.run_records import StoredRunRecords
from evalsi.errors import InfraError
from evalsi.evaluators import Registry
from evalsi.plugins import PLUGINS_DIR, describe_plugins
from evalsi.projects import DEFAULT_PROJECT
from evalsi.runs.driver import RunDriver
from evalsi.runs.flags import RunFlags
from evalsi.runs.tasks import run_traceparent
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
)
from evalsi.service.settings import build_parser as build_settings_parser
from evalsi.stores import open_metadata_store, open_object_store
from evalsi.v1alpha1.run_service_pb2 import RunEvent

log = logging.getLogger("evalsi.scheduler")
# Renamed from "scheduler-deadletters", which rejected every dead letter but a task's: the new durable starts at
# the beginning of the stream, so results dead-lettered by earlier versions are folded back too.
DEADLETTER_CONSUMER = subscriptions.SCHEDULER_DEADLETTERS
_OLD_DEADLETTER_CONSUMER = "scheduler-deadletters"
DEAD_LETTERS = Counter(
    "evalsi_scheduler_dead_letters",
    "Dead letters read, by message type and outcome (handled: folded back or recorded; kept: left in the stream)",
    ["type", "outcome"],
)


def _name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


OPTIONS = (
    NATS,
    NATS_CREDENTIALS,
    METADATA_URL,
    OBJECTS_URL,
    Option("--lease-ttl", float, 15.0, "seconds a run's lease lasts without renewal; another replica adopts the "
           "run after", config="scheduler.lease_ttl_s"),
    METRICS_PORT,
    Option("--name", default=_name(), help="this replica's name, the owner of the runs it leases"),
    PLUGINS_DIR,
    *LOGGING,
)
DESCRIPTION = "Plan, track and finish runs."


def build_parser(environ: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    return build_settings_parser("scheduler", OPTIONS, description=DESCRIPTION,
                                 environ=os.environ if environ is None else environ)


class _Bus:
    """The scheduler's BusPort over NATS."""

    def __init__(self, js: JetStreamContext, objects: ObjectStore, flags: RunFlags) -> None:
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


async def run_periodically(every_s: float, job: Callable[[], Awaitable[None]], stop: asyncio.Event) -> None:
    """Run ``job`` every ``every_s`` seconds until ``stop`` is set; a failing pass is logged, not fatal."""
    while not stop.is_set():
        started = time.monotonic()
        try:
            await job()
        except (InfraError, TimeoutError, OSError) as exc:  # a store is down: a line each time, not a traceback
            log.warning("periodic job failed: %s: %s", type(exc).__name__, exc)
        except Exception:
            log.exception("periodic job failed")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=max(0.0, every_s - (time.monotonic() - started)))


async def assemble(args: argparse.Namespace, life: Lifecycle) -> None:
    """The scheduler's parts in start order; the lifecycle stops them in reverse (consumers before the stores)."""
    await serve_health(life, args.metrics_port)
    bus = await life.enter("nats", connect(args.nats, name=f"evalsi-scheduler-{args.name}",
                                   credentials=nats_credentials(args.nats_credentials)), BusConnection.close,
                           ready=lambda: (bus.readiness.ready, bus.readiness.reason))
    await ensure_streams(bus.js)
    await ensure_scheduler_consumers(bus.js)
    await ensure_consumer(bus.js, subjects.DEADLETTER_STREAM, DEADLETTER_CONSUMER, "deadletter.>")
    with contextlib.suppress(nats.errors.Error):  # gone already (or never made): nothing to tidy
        await bus.js.delete_consumer(subjects.DEADLETTER_STREAM, _OLD_DEADLETTER_CONSUMER)
    store = await life.enter("metadata store", open_metadata_store(args.metadata_url), lambda s: s.close())
    objects = await life.enter("object store", open_object_store(args.objects_url), lambda o: o.close())
    flags = await RunFlags.open(bus.js)
    registry = Registry.from_entry_points()
    if args.plugins_dir:  # their evaluators' scopes and pools plan the runs; workers run them
        await asyncio.to_thread(describe_plugins, registry, args.plugins_dir)
    scheduler = RunDriver(
        store,
        StoredRunRecords(objects),
        _Bus(bus.js, objects, flags),
        registry,
        owner=args.name,
        lease_ttl_s=args.lease_ttl,
        # Results folded here wake a run's driver; the tick renews its lease and catches what another replica folded.
        tick_s=min(2.0, args.lease_ttl / 6),
        pass_every_s=0.25,  # progress four times a second at most; a run's end is seen within it
    )
    life.on_stop("scheduler", scheduler.stop)

    async def on_result(result: TaskResult, _delivery: Delivery) -> None:
        await scheduler.held_while_down(scheduler.on_task_result(result))

    async def on_control(control: RunControl, _delivery: Delivery) -> None:
        action = {
            CONTROL_ACTION_CREATED: scheduler.on_control_created,
            CONTROL_ACTION_RESUME: scheduler.on_control_resume,
            CONTROL_ACTION_CANCEL: scheduler.on_control_cancel,
        }.get(control.action)
        if action is not None:
            await scheduler.held_while_down(action(control.project or DEFAULT_PROJECT, control.run_id))

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

    consumers = BusBroker(bus, store=objects)
    consumers.subscribe(subscriptions.results(), on_result, probe=scheduler.available)
    consumers.subscribe(subscriptions.control(), on_control, probe=scheduler.available)
    consumers.subscribe(subscriptions.dead_letters(), on_dead, probe=scheduler.available, on_dead_letter=on_kept)
    await life.enter_part("bus subscribers", consumers)
    # Tasks and results whose last delivery died unacked go to the dead letters, and from there back here.
    for stream in (subjects.WORK_STREAM, subjects.RESULTS_STREAM):
        await life.enter(f"max-deliveries watcher {stream}",
                         watch_max_deliveries(bus.nc, bus.js, stream, "*", store=objects), lambda w: w.stop())
    await life.spawn("adoption", run_periodically(max(0.5, args.lease_ttl / 3), scheduler.adopt_orphans,
                                                  life.stopping))
    log.info("scheduler ready", extra=ids(scheduler=args.name))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_flags("scheduler", OPTIONS, argv, description=DESCRIPTION)
    return run_service("scheduler", partial(assemble, args), args.log_level, args.log_format)


if __name__ == "__main__":
    sys.exit(main())
