"""Ingest's edges on the bus: completed traces out to the policies, span notices between replicas.

- ``BusCompletionPublisher``: ``TraceCompleted`` on ``traces.completed.<project>`` with the message id
  ``<project>/<trace>/<revision>``, so a completion published twice is stored once.
- ``BusNoticeSender``: ``TracesObserved`` on ``traces.observed.<partition>`` for the partition's owner.
- ``consume_notices``: the owner's durable consumer on its partition, feeding its assembler.
"""

from __future__ import annotations

from collections.abc import Sequence

from nats.js.client import JetStreamContext

from evalsi.bus import BusBroker, BusConnection, Delivery, publish, subjects, subscriptions
from evalsi.bus.v1alpha1.bus_pb2 import ObservedTrace, TraceCompleted, TracesObserved

from .completion import TraceAssembler


def completion_key(completed: TraceCompleted) -> str:
    key = f"{completed.project}/{completed.trace_id}/{completed.revision}"
    return key if completed.reason in ("", "spans") else f"{key}/{completed.reason}"


class BusCompletionPublisher:
    def __init__(self, js: JetStreamContext) -> None:
        self._js = js

    async def publish(self, completed: TraceCompleted) -> None:
        await publish(self._js, subjects.traces_completed(completed.project), completed,
                      key=completion_key(completed))


class BusNoticeSender:
    def __init__(self, js: JetStreamContext) -> None:
        self._js = js

    async def send(self, partition: int, traces: Sequence[ObservedTrace]) -> None:
        await publish(self._js, subjects.traces_observed(partition), TracesObserved(traces=traces), key=None)


def notice_consumer(bus: BusConnection, assembler: TraceAssembler, partition: int) -> BusBroker:
    """The durable consumer of one partition's notices; only the replica owning the partition runs it."""

    async def handle(message: TracesObserved, _delivery: Delivery) -> None:
        for trace in message.traces:
            assembler.note(trace.project, trace.trace_id, has_root=trace.has_root, foreign=True)

    broker = BusBroker(bus)
    broker.subscribe(subscriptions.trace_notices(partition), handle)
    return broker
