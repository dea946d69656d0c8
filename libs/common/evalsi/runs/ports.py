"""The ports a run driver talks to: a bus (tasks out, events out, run flags) and a store (runs, tasks, results,
usage, leases: ``evalsi.stores.RunStore``, declared with the metadata store) with the run's records behind it.

The served scheduler plugs NATS and SQL + an object store in; an embedded run plugs in-process ones
(``evalsi.bus.memory``, ``evalsi.stores.memory``). The driver never sees which.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from evalsi.bus.v1alpha1.bus_pb2 import Task
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import Run
from evalsi.v1alpha1.run_service_pb2 import RunEvent


class BusPort(Protocol):
    """Where tasks and run events go."""

    async def publish_task(self, pool: str, task: Task, msg_id: str) -> None:
        """Publish ``task`` to ``pool``; ``msg_id`` (``<task key>#<attempt>``) is deterministic, so a task
        published twice (a driver re-driving after a crash) is delivered once."""
        ...

    async def publish_event(self, event: RunEvent) -> None: ...

    async def set_run_flag(self, run_id: str, flag: str) -> None:
        """``running`` | ``cancelled`` | ``done``: what workers check before starting a task of the run."""
        ...


class RunRecords(Protocol):
    """A run's records and generated outputs, by reference: tasks carry a reference a worker resolves
    (``Executor.fetch``) to a serialized ``TaskRecords``, never the records of a whole dataset."""

    async def record_count(self, run: Run) -> int: ...

    async def shard_ref(self, run: Run, start: int, stop: int) -> str:
        """A reference to the run's records ``[start, stop)`` (dataset order), for a task to carry."""
        ...

    async def shard_records(self, run: Run, start: int, stop: int) -> list[Record]:
        """The run's records ``[start, stop)`` themselves (reduce tasks, dead letters)."""
        ...

    async def put_outputs(self, run: Run, records: Sequence[Record]) -> str:
        """Store one generation task's records with their outputs; returns their reference."""
        ...

    async def outputs(self, ref: str) -> list[Record]:
        """Records stored by ``put_outputs`` (or a shard), by their reference."""
        ...
