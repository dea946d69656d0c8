"""The run store and record access in memory: what a run driver needs (``evalsi.runs.ports``) within one process.

Same semantics as the SQL store where the driver relies on them: compare-and-set run updates, task state moves
only from the given states, results upserted by (evaluator, record, trial) where a scored or skipped result is
never replaced by a later error or cancellation, results read back in (evaluator, record_id, trial) order.

One addition a process can afford: usage metered as calls answer (``meter``), so a task still running counts what
its calls have used so far, and a budget cuts in per call rather than when a whole task reports.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from operator import itemgetter

from evalsi.bus.v1alpha1.bus_pb2 import Task, TaskRecords
from evalsi.datasets.wire import varint
from evalsi.errors import BadInputError
from evalsi.stores.metadata import TASK_STATES, ResultRow, TaskEnd, TaskRow, check_task_states
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateResponse
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import Run
from evalsi.v1alpha1.score_pb2 import OUTCOME_SCORED, OUTCOME_SKIPPED, EvaluationResult

_FINAL = (OUTCOME_SCORED, OUTCOME_SKIPPED)
_REPORTED = ("done", "failed")  # task states whose usage is the task's own report
_ResultKey = tuple[str, str, int]
# A stored result: the message an in-process evaluation made, or (outcome, its bytes) as a row of columns arrived
# (runs.result_columns): kept as bytes, parsed many at a time only when read as messages.
_Stored = EvaluationResult | tuple[int, bytes]
_RESULTS = b"\x0a"  # EvaluateResponse.results: the holder rows are parsed into, all at once


def _outcome(stored: _Stored) -> int:
    return stored[0] if isinstance(stored, tuple) else stored.outcome


def _messages(stored: Sequence[_Stored]) -> list[EvaluationResult]:
    """Stored results as messages: rows parsed in one go (a parse per row costs several times more)."""
    if all(item.__class__ is EvaluationResult for item in stored):
        return list(stored)  # type: ignore[arg-type]
    holder = EvaluateResponse()
    holder.MergeFromString(b"".join([_RESULTS + varint(len(row)) + row for row in _row_bytes(stored)]))
    return list(holder.results)


def _key_order(keys: Iterable[_ResultKey]) -> list[_ResultKey]:
    """``sorted(keys)`` (evaluator, record id, trial), as three stable sorts on one element each: a sort of strs or
    of ints alone takes a fast path that tuples do not, several times faster for a run's results."""
    ordered = sorted(keys, key=itemgetter(2))
    ordered.sort(key=itemgetter(1))
    ordered.sort(key=itemgetter(0))
    return ordered


def _row_bytes(stored: Sequence[_Stored]) -> list[bytes]:
    return [item[1] if isinstance(item, tuple) else item.SerializeToString() for item in stored]



@dataclass
class _Task:
    row: TaskRow
    usage: tuple[int, int, float] = (0, 0, 0.0)  # as the task reported it when it finished
    metered: tuple[int, int, float] = (0, 0, 0.0)  # as its calls answered, while it ran

    def used(self) -> tuple[int, int, float]:
        """A finished task's report, else what its calls used (a cancelled task reports nothing, but its calls
        were made)."""
        return self.usage if self.row.state in _REPORTED else self.metered


@dataclass
class MemoryRunStore:
    """Runs, tasks, results, usage and leases of one process's runs."""

    _runs: dict[tuple[str, str], Run] = field(default_factory=dict)
    _results: dict[str, dict[_ResultKey, _Stored]] = field(default_factory=dict)
    _tasks: dict[str, dict[str, _Task]] = field(default_factory=dict)
    _leases: dict[str, tuple[str, float]] = field(default_factory=dict)
    # Each run's results in reading order, kept until a result is upserted: a run's results are read back whole
    # twice at its end (summaries, then the document), and sorting them is most of what reading costs.
    _ordered: dict[str, list[_Stored]] = field(default_factory=dict)

    async def ping(self) -> bool:
        return True

    async def create_run(self, run: Run) -> None:
        stored = Run()
        stored.CopyFrom(run)
        stored.ClearField("results")
        self._runs[(run.project, run.id)] = stored

    async def get_run(self, project: str, run_id: str) -> Run | None:
        stored = self._runs.get((project, run_id))
        if stored is None:
            return None
        copy = Run()
        copy.CopyFrom(stored)
        return copy

    async def update_run(self, run: Run, *, only_from: Sequence[int] = ()) -> bool:
        stored = self._runs.get((run.project, run.id))
        if stored is None:
            raise BadInputError(f"no run {run.id!r} in project {run.project!r} to update; create it first")
        if only_from and stored.state not in only_from:
            return False
        await self.create_run(run)
        return True

    async def runs_in_states(self, states: Sequence[int]) -> list[tuple[str, str]]:
        return [key for key, run in self._runs.items() if run.state in states]

    async def upsert_results(self, project: str, run_id: str, results: Sequence[EvaluationResult]) -> None:
        stored = self._results.setdefault(run_id, {})
        self._ordered.pop(run_id, None)
        for result in results:
            key = (result.evaluator, result.record_id, result.trial)
            kept = stored.get(key)
            if kept is not None and _outcome(kept) in _FINAL and result.outcome not in _FINAL:
                continue  # a result the evaluator produced is a fact; a late error never replaces it
            stored[key] = result

    async def upsert_result_rows(self, project: str, run_id: str, rows: Sequence[ResultRow]) -> None:
        stored = self._results.setdefault(run_id, {})
        self._ordered.pop(run_id, None)
        batch = {(evaluator, record_id, trial): (outcome, data) for evaluator, record_id, trial, outcome, data in rows}
        if len(batch) == len(rows) and stored.keys().isdisjoint(batch):
            # The usual batch: results of a task's first completion, none stored yet: one insert, no row-by-row rule.
            stored.update(batch)
            return
        for evaluator, record_id, trial, outcome, data in rows:
            key = (evaluator, record_id, trial)
            kept = stored.get(key)
            if kept is not None and _outcome(kept) in _FINAL and outcome not in _FINAL:
                continue
            stored[key] = (outcome, data)

    async def iter_results(
        self, project: str, run_id: str, *, batch_size: int = 5000
    ) -> AsyncIterator[list[EvaluationResult]]:
        ordered = self._ordered.get(run_id)
        if ordered is None:
            stored = self._results.get(run_id, {})
            ordered = self._ordered[run_id] = [stored[key] for key in _key_order(stored)]
        for start in range(0, len(ordered), batch_size):
            yield _messages(ordered[start : start + batch_size])

    def take_results(self, run_id: str, *, batch_size: int = 5000) -> Iterator[list[EvaluationResult]]:
        """A finished run's results in reading order, each batch let go of once it is handed over: the caller
        copying them into a document never holds the store's index of every result beside its copy."""
        for batch in self._take(run_id, batch_size):
            yield _messages(batch)

    def take_result_rows(self, run_id: str, *, batch_size: int = 5000) -> Iterator[list[bytes]]:
        """``take_results`` as each result's serialized bytes (a document parses them all at once)."""
        for batch in self._take(run_id, batch_size):
            yield _row_bytes(batch)

    def _take(self, run_id: str, batch_size: int) -> Iterator[list[_Stored]]:
        ordered = self._ordered.pop(run_id, None)
        stored = self._results.pop(run_id, {})
        if ordered is None:
            ordered = [stored[key] for key in _key_order(stored)]
        stored.clear()
        ordered.reverse()  # taken from the end: each batch leaves the list as it goes
        while ordered:
            batch = ordered[-batch_size:]
            del ordered[-batch_size:]
            batch.reverse()
            yield batch

    async def count_results(self, project: str, run_id: str) -> dict[int, int]:
        return dict(Counter(map(_outcome, self._results.get(run_id, {}).values())))

    async def add_tasks(self, project: str, tasks: Sequence[TaskRow]) -> int:
        check_task_states(sorted({t.state for t in tasks}), what="add_tasks")
        rows = self._tasks.setdefault(tasks[0].run_id, {}) if tasks else {}
        added = 0
        for task in tasks:
            if task.key not in rows:  # the first row of a key wins, as in SQL's ON CONFLICT DO NOTHING
                rows[task.key] = _Task(task)
                added += 1
        return added

    async def end_tasks(self, run_id: str, ends: Sequence[TaskEnd]) -> set[str]:
        moved: set[str] = set()
        seen: set[str] = set()
        for end in ends:
            if end.key in seen:
                continue
            seen.add(end.key)
            only_from = ("pending", "cancelled") if end.state == "done" else ("pending",)
            if await self.set_task_state(run_id, end.key, end.state, error=end.error, only_from=only_from,
                                         usage=end.usage):
                moved.add(end.key)
        return moved

    async def set_task_state(
        self,
        run_id: str,
        key: str,
        state: str,
        *,
        output_ref: str = "",
        error: str = "",
        only_from: Sequence[str] = ("pending",),
        attempts: int | None = None,
        usage: tuple[int, int, float] | None = None,
    ) -> bool:
        (state,) = check_task_states((state,), what="set_task_state")
        task = self._tasks.get(run_id, {}).get(key)
        if task is None or (only_from and task.row.state not in check_task_states(only_from, what="only_from")):
            return False
        task.row = replace(
            task.row,
            state=state,
            output_ref=output_ref,
            error=error,
            attempts=task.row.attempts if attempts is None else int(attempts),
        )
        if usage is not None:
            task.usage = (int(usage[0]), int(usage[1]), float(usage[2]))
        return True

    async def list_tasks(self, run_id: str, *, states: Sequence[str] = (), stage: int = 0) -> list[TaskRow]:
        states = check_task_states(states, what="list_tasks")
        rows = sorted(self._tasks.get(run_id, {}).items())
        return [
            t.row for _, t in rows if (not states or t.row.state in states) and (not stage or t.row.stage == stage)
        ]

    async def task_counts(self, run_id: str) -> dict[str, int]:
        counts = dict.fromkeys(TASK_STATES, 0)
        for task in self._tasks.get(run_id, {}).values():
            counts[task.row.state] += 1
        return counts

    async def task_usage(self, run_id: str) -> tuple[int, int, float]:
        return self.usage_now(run_id)

    def usage_now(self, run_id: str) -> tuple[int, int, float]:
        """Tokens in, tokens out and cost of the run's tasks: each finished one's report, each other one's calls."""
        usages = [t.used() for t in self._tasks.get(run_id, {}).values()]
        return sum(u[0] for u in usages), sum(u[1] for u in usages), sum(u[2] for u in usages)

    def meter(self, run_id: str, key: str, usage: tuple[int, int, float]) -> None:
        """Add one answered call's usage to the running task ``key``."""
        task = self._tasks.get(run_id, {}).get(key)
        if task is not None:
            m = task.metered
            task.metered = (m[0] + int(usage[0]), m[1] + int(usage[1]), m[2] + float(usage[2]))

    async def acquire_lease(self, name: str, owner: str, ttl_s: float) -> bool:
        holder = self._leases.get(name)
        now = time.monotonic()
        if holder is not None and holder[0] != owner and holder[1] > now:
            return False
        self._leases[name] = (owner, now + ttl_s)
        return True

    async def release_lease(self, name: str, owner: str) -> None:
        if self._leases.get(name, ("", 0.0))[0] == owner:
            del self._leases[name]


@dataclass
class MemoryRecords:
    """A run's records and generated outputs as serialized ``TaskRecords`` under references, the way an object store
    keeps them for the served scheduler, so the same ``Executor`` resolves them (``fetch``); and a second result
    set that comparative evaluators compare with, looked up by (record id, trial) for each task (``counterparts``)."""

    _datasets: dict[str, Sequence[Record]] = field(default_factory=dict)
    _objects: dict[str, bytes] = field(default_factory=dict)
    _shards: dict[str, Sequence[Record]] = field(default_factory=dict)
    _next: itertools.count = field(default_factory=itertools.count)
    _others: dict[str, dict[tuple[str, int], Record]] = field(default_factory=dict)

    def add_run(self, run_id: str, records: Sequence[Record], *, compare_with: Sequence[Record] | None = None) -> None:
        self._datasets[run_id] = records
        if compare_with is not None:
            self._others[run_id] = {(r.id, r.provenance.trial): r for r in compare_with}

    def forget(self, run_id: str) -> None:
        """Let go of a finished run's records and outputs (an in-process run's parts refer to one another, so what
        they hold would otherwise wait for the cyclic collector)."""
        self._datasets.pop(run_id, None)
        self._others.pop(run_id, None)
        prefix = f"{run_id}/"
        for held in (self._shards, self._objects):
            for ref in [ref for ref in held if ref.startswith(prefix)]:
                del held[ref]

    def counterparts(self, task: Task, records: Sequence[Record]) -> list[list[Record]]:
        """The other result set's records paired with ``records`` (those it has), or none without a second set."""
        others = self._others.get(task.run_id)
        if others is None:
            return []
        keys = ((r.id, r.provenance.trial) for r in records)
        return [[others[key] for key in keys if key in others]]

    async def fetch(self, ref: str) -> bytes:
        shard = self._shards.get(ref)
        if shard is not None:
            return TaskRecords(records=shard).SerializeToString()
        return self._objects[ref]

    def shard(self, ref: str) -> Sequence[Record] | None:
        """The dataset's records behind a shard reference, as they are (no serialized copy): an in-process executor
        reads them, and evaluators never change a record."""
        return self._shards.get(ref)

    async def record_count(self, run: Run) -> int:
        return len(self._datasets[run.id])

    async def shard_ref(self, run: Run, start: int, stop: int) -> str:
        ref = f"{run.id}/records/{start}-{stop}"
        if ref not in self._shards:
            self._shards[ref] = self._datasets[run.id][start:stop]
        return ref

    async def shard_records(self, run: Run, start: int, stop: int) -> list[Record]:
        return list(self._datasets[run.id][start:stop])

    async def put_outputs(self, run: Run, records: Sequence[Record]) -> str:
        ref = f"{run.id}/outputs/{next(self._next)}"
        self._objects[ref] = TaskRecords(records=records).SerializeToString()
        return ref

    async def outputs(self, ref: str) -> list[Record]:
        return list(TaskRecords.FromString(await self.fetch(ref)).records)  # copies: callers may change them
