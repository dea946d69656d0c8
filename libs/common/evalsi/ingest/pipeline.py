"""The ingest pipeline's composition: the store, then the assembler, behind the one ``SpanSink`` interface.

Spans are stored before the assembler hears of them, so a trace it completes is always readable. With several
replicas each trace has one owner (its partition: crc32 of the trace id modulo the replica count); a replica
that receives spans of a trace it does not own stores them and tells the owner over the bus
(``traces.observed.<partition>``). The completion loop asks the assembler (a pure component) which traces are
complete, records that in the store and publishes them for the policies (``traces.completed.<project>``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from evalsi.bus.v1alpha1.bus_pb2 import ObservedTrace, TraceCompleted
from evalsi.errors import InfraError
from evalsi.stores.traces.protocol import CompletionStore, SpanSink, SummaryRows
from evalsi.stores.traces.summaries import SpanRow, span_row
from evalsi.traces.model import MappedSpan

from .completion import CompletedTrace, TraceAssembler, traces_of

log = logging.getLogger("evalsi.ingest")


class NoticeSender(Protocol):
    """Tells the replica owning ``partition`` that spans of these traces arrived here."""

    async def send(self, partition: int, traces: Sequence[ObservedTrace]) -> None: ...


@runtime_checkable
class RowNoticeSender(Protocol):
    """A ``NoticeSender`` that also carries the spans' summary rows to the owner (``evalsi-ingest --processes``)."""

    async def send(self, partition: int, traces: Sequence[ObservedTrace]) -> None: ...

    async def send_rows(self, partition: int, project: str, traces: dict[str, bool],
                        rows: Sequence[SpanRow]) -> None: ...


class CompletionPublisher(Protocol):
    """Hands a completed trace to the policies (the bus in server mode)."""

    async def publish(self, completed: TraceCompleted) -> None: ...


def partition_of(trace_id: str, partitions: int) -> int:
    """The partition of a trace: the same in every replica and process (crc32, not Python's salted hash)."""
    return zlib.crc32(trace_id.lower().encode()) % partitions


@dataclass(frozen=True)
class Partitioning:
    """Replica ``replica`` of ``replicas`` completes the traces of partition ``replica``; any replica stores spans."""

    replica: int = 0
    replicas: int = 1

    def __post_init__(self) -> None:
        if self.replicas < 1 or not 0 <= self.replica < self.replicas:
            raise ValueError(f"replica {self.replica} of {self.replicas}: needs 0 <= replica < replicas")

    def owner(self, trace_id: str) -> int:
        return 0 if self.replicas == 1 else partition_of(trace_id, self.replicas)


class AssemblingSink:
    """Stores spans, then tells the assembler which traces they belong to (or the replica that owns them)."""

    def __init__(self, store: SpanSink, assembler: TraceAssembler, *, partitioning: Partitioning | None = None,
                 notices: NoticeSender | None = None) -> None:
        self.store = store
        self.assembler = assembler
        self.partitioning = partitioning or Partitioning()
        if self.partitioning.replicas > 1 and notices is None:
            raise ValueError("several replicas need a notice sender (the bus) to reach each other")
        self.notices = notices
        # Processes of one replica whose store takes summary rows: each trace is summed by its owner alone, from
        # the rows the others send it, instead of by every process that stored spans of it and then, at
        # completion, read back from the store (most of a ClickHouse store's reads: half the traces reach the
        # process that does not own them). Replicas over the bus still send notices only.
        self.rows = (self.partitioning.replicas > 1 and isinstance(store, SummaryRows)
                     and isinstance(notices, RowNoticeSender))
        if self.rows:
            assert isinstance(store, SummaryRows)
            partitioning = self.partitioning
            store.summarize_only(lambda trace_id: partitioning.owner(trace_id) == partitioning.replica)

    async def consume(self, project: str, spans: Sequence[MappedSpan]) -> None:
        await self.store.consume(project, spans)
        if self.partitioning.replicas == 1:
            self.assembler.observe(project, spans)
            return
        foreign: dict[int, dict[str, bool]] = {}
        owner_of: dict[str, int] = {}  # the foreign traces' owners
        for trace_id, has_root in traces_of(spans).items():  # one crc32 and one note per trace, not per span
            owner = self.partitioning.owner(trace_id)
            if owner == self.partitioning.replica:
                self.assembler.note(project, trace_id, has_root=has_root)
            else:
                foreign.setdefault(owner, {})[trace_id] = has_root
                owner_of[trace_id] = owner
        if not foreign:
            return
        assert self.notices is not None
        # A failed notice fails the export, so the client retries: spans upsert, so nothing doubles.
        if self.rows:
            assert isinstance(self.notices, RowNoticeSender)
            rows: dict[int, list[SpanRow]] = {owner: [] for owner in foreign}
            for span in spans:  # one walk of the spans for every other process, not one walk each
                owner = owner_of.get(span.trace_id, -1)
                if owner >= 0:
                    rows[owner].append(span_row(span))
            for owner, traces in foreign.items():
                await self.notices.send_rows(owner, project, traces, rows[owner])
            return
        for owner, traces in foreign.items():
            await self.notices.send(owner, [ObservedTrace(project=project, trace_id=trace_id, has_root=root)
                                            for trace_id, root in traces.items()])


@dataclass
class _Outgoing:
    trace: CompletedTrace
    span_count: int | None = None  # set once the store has recorded the completion


class Completer:
    """The completion loop's one step: due traces are marked completed in the store, then published.

    Completed traces wait in an outbox until both are done, so a store or bus outage delays them, never loses
    them. The revision published is the trace's span count: late spans raise it (and so re-trigger evaluation
    under a new message id); a republished completion keeps it (and the bus drops the duplicate).
    """

    def __init__(self, assembler: TraceAssembler, store: CompletionStore,
                 publisher: CompletionPublisher | None = None, clock: Callable[[], float] = time.time) -> None:
        self.assembler = assembler
        self.store = store
        self.publisher = publisher
        self._clock = clock
        self._outbox: list[_Outgoing] = []
        self.completed = 0  # traces marked complete and published since start (late re-completions included)

    @property
    def waiting(self) -> int:
        return len(self._outbox)

    async def tick(self) -> list[CompletedTrace]:
        """Move due traces along; returns those fully done in this tick. Raises InfraError, keeping the rest."""
        self._outbox.extend(_Outgoing(trace) for trace in self.assembler.pop_completed())
        by_project: dict[str, list[_Outgoing]] = {}
        for item in self._outbox:
            if item.span_count is None:
                by_project.setdefault(item.trace.project, []).append(item)
        for project, items in by_project.items():
            counts = await self.store.mark_completed(project, [item.trace.trace_id for item in items],
                                                     local=[item.trace.trace_id for item in items if item.trace.local])
            for item in items:
                item.span_count = counts.get(item.trace.trace_id, 0)
        done: list[CompletedTrace] = []
        while self._outbox:  # in order, so a trace is published only after those completed before it
            item = self._outbox[0]
            if self.publisher is not None:
                await self.publisher.publish(TraceCompleted(
                    project=item.trace.project, trace_id=item.trace.trace_id, revision=item.span_count or 0,
                    root_seen=item.trace.root_seen, completed_at=self._clock(), reason="spans"))
            done.append(self._outbox.pop(0).trace)
            self.completed += 1
        return done


async def run_completion_loop(completer: Completer, stop: asyncio.Event, interval_s: float = 0.5) -> None:
    while not stop.is_set():
        try:
            await completer.tick()
        except InfraError as exc:  # the store or the bus is down: try again next tick, the outbox forgets nothing
            log.warning("completing traces failed (%d waiting): %s", completer.waiting, exc)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_s)
