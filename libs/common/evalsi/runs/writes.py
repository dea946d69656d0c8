"""Results of tasks that arrive close together, written to the store as one batch (group commit).

A run driver folds each task's results as the bus delivers them, several handlers at a time; a store write per task
(500 results) is too small for a bulk write to pay (docs/benchmarks.md, "The scheduler's results path"). Each caller
adds its results and waits; a writer takes everything waiting, after a few milliseconds unless enough rows are
already there, and writes it, one store call per run. A caller returns only once its results are committed (it
acknowledges its message after that) and gets the write's error if it failed, so a result is never acknowledged
unstored. While a batch is written the next one gathers, so the batches grow with the load. Two writers may write
at once: one alone left Postgres working a batch at a time on one core while results queued (run_million: 106.7 s
with one, 69.5 s with two). Two batches touch one key only for a redelivered result; should Postgres then find a
deadlock, one write fails and its messages are delivered again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from evalsi.stores.metadata import ResultRow, RunStore, TaskEnd
from evalsi.v1alpha1.score_pb2 import EvaluationResult


@dataclass
class _Waiting:
    """One run's writes gathered for the next batch: results as objects (in-process runs) or rows (a worker's
    columns), the tasks they end, and who waits for them (each with the task it ends, if any)."""

    results: list[EvaluationResult] = field(default_factory=list)
    rows: list[ResultRow] = field(default_factory=list)
    ends: list[TaskEnd] = field(default_factory=list)
    waiters: list[tuple[asyncio.Future[bool], str | None]] = field(default_factory=list)


@dataclass
class ResultWrites:
    """Coalesces result writes and task ends on ``store``."""

    store: RunStore
    linger_s: float = 0.003  # how long a small batch waits for more results before it is written
    full_rows: int = 8_000  # a batch this large is written at once
    _waiting: dict[tuple[str, str], _Waiting] = field(default_factory=dict)
    _rows: int = 0
    _full: asyncio.Event = field(default_factory=asyncio.Event)
    writers: int = 2  # batches written at once: Postgres works a batch on one core, this machine has two
    _writers: set[asyncio.Task[None]] = field(default_factory=set)

    async def end_task(
        self, project: str, run_id: str, end: TaskEnd, *, results: Sequence[EvaluationResult] = (),
        rows: Sequence[ResultRow] = (),
    ) -> bool:
        """Store a task's results (as objects, or as rows: runs.result_columns, never re-serialized), then end the
        task (``RunStore.end_tasks``) in the same batch: one statement for the batch's tasks, not one per task.
        True if this call moved the task (one call only, of several for one task in a batch)."""
        return await self._add(project, run_id, results, rows, end)

    async def _add(
        self, project: str, run_id: str, results: Sequence[EvaluationResult], rows: Sequence[ResultRow],
        end: TaskEnd | None,
    ) -> bool:
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        waiting = self._waiting.get((project, run_id))
        if waiting is None:
            waiting = self._waiting[(project, run_id)] = _Waiting()
        waiting.results.extend(results)
        waiting.rows.extend(rows)
        if end is not None:
            waiting.ends.append(end)
        waiting.waiters.append((done, None if end is None else end.key))
        self._rows += len(results) + len(rows) + (end is not None)
        if self._rows >= self.full_rows:
            self._full.set()
        if len(self._writers) < self.writers:
            writer = asyncio.create_task(self._write_while_waiting())
            self._writers.add(writer)
            writer.add_done_callback(self._writers.discard)
        # A caller cancelled meanwhile leaves the write to go on: it is idempotent, and others may wait on it.
        return await asyncio.shield(done)

    async def _write_while_waiting(self) -> None:
        while self._waiting:
            if self._rows < self.full_rows:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._full.wait(), timeout=self.linger_s)
            self._full.clear()
            taken, self._waiting, self._rows = self._waiting, {}, 0
            try:
                for (project, run_id), waiting in taken.items():
                    try:
                        # The results first: a task is ended only once its results are stored.
                        if waiting.results:
                            await self.store.upsert_results(project, run_id, waiting.results)
                        if waiting.rows:
                            await self.store.upsert_result_rows(project, run_id, waiting.rows)
                        moved = await self.store.end_tasks(run_id, waiting.ends) if waiting.ends else set()
                    except Exception as exc:  # each waiter raises it, as its own write would have
                        _settle(waiting.waiters, set(), exc)
                    else:
                        _settle(waiting.waiters, moved, None)
            except BaseException:  # the writer itself is cancelled (shutdown): nobody may wait forever
                for waiting in [*taken.values(), *self._waiting.values()]:
                    for done, _key in waiting.waiters:
                        done.cancel()
                raise


def _settle(waiters: list[tuple[asyncio.Future[bool], str | None]], moved: set[str], error: Exception | None) -> None:
    """Answer each waiter; of several ending one task, the first learns that it moved."""
    for done, key in waiters:
        if done.done():
            continue
        if error is not None:
            done.set_exception(error)
        elif key in moved:
            moved.discard(key)
            done.set_result(True)
        else:
            done.set_result(False)
