"""ResultWrites: results of tasks that arrive together go to the store in one write per run, each caller returns only
once its results are stored, and a failed write fails every caller whose results it carried."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from evalsi.errors import InfraError
from evalsi.runs.writes import ResultWrites
from evalsi.stores import TaskEnd, TaskRow
from evalsi.stores.sql import SqlMetadataStore
from evalsi.v1alpha1.run_pb2 import RUN_STATE_RUNNING, Run
from evalsi.v1alpha1.score_pb2 import OUTCOME_ERROR, OUTCOME_SCORED, EvaluationResult


class CountedStore:
    """The real SQLite store, with its upsert calls counted."""

    def __init__(self, store: SqlMetadataStore) -> None:
        self.store = store
        self.calls: list[tuple[str, int]] = []

    async def upsert_results(self, project: str, run_id: str, results: Sequence[EvaluationResult]) -> None:
        self.calls.append((run_id, len(results)))
        await self.store.upsert_results(project, run_id, results)

    async def end_tasks(self, run_id: str, ends: Sequence[TaskEnd]) -> set[str]:
        return await self.store.end_tasks(run_id, ends)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlMetadataStore]:
    sql = await SqlMetadataStore.open_sqlite(tmp_path / "runs.db")
    for run_id in ("a", "b"):
        await sql.create_run(Run(id=run_id, project="p", state=RUN_STATE_RUNNING))
    try:
        yield sql
    finally:
        await sql.close()


def _results(prefix: str, n: int, outcome: int = OUTCOME_SCORED) -> list[EvaluationResult]:
    return [EvaluationResult(record_id=f"{prefix}{i}", evaluator="em", outcome=outcome) for i in range(n)]


async def _write(writes: ResultWrites, project: str, run_id: str, results: list[EvaluationResult]) -> bool:
    """A task's results, the task itself unknown to the store (what is tested here is how results batch)."""
    end = TaskEnd(key=f"{run_id}-{results[0].record_id}-{len(results)}-{results[0].outcome}", state="done")
    return await writes.end_task(project, run_id, end, results=results)


async def _stored(store: SqlMetadataStore, run_id: str) -> list[tuple[str, int]]:
    return [(r.record_id, r.outcome) async for batch in store.iter_results("p", run_id) for r in batch]


async def test_results_arriving_together_are_one_write_per_run_and_stored_when_each_call_returns(
    store: SqlMetadataStore,
) -> None:
    counted = CountedStore(store)
    writes = ResultWrites(counted, linger_s=0.05)
    await asyncio.gather(
        _write(writes, "p", "a", _results("x", 3)),
        _write(writes, "p", "a", _results("y", 2)),
        _write(writes, "p", "b", _results("z", 4)),
    )
    assert sorted(counted.calls) == [("a", 5), ("b", 4)]
    assert len(await _stored(store, "a")) == 5 and len(await _stored(store, "b")) == 4


async def test_a_full_batch_does_not_wait_and_later_results_form_the_next_batch(store: SqlMetadataStore) -> None:
    counted = CountedStore(store)
    writes = ResultWrites(counted, linger_s=30.0, full_rows=5)
    await asyncio.wait_for(asyncio.gather(_write(writes, "p", "a", _results("x", 3)),
                                          _write(writes, "p", "a", _results("y", 3))), timeout=10)
    assert counted.calls == [("a", 6)]


async def test_a_late_error_in_a_later_batch_never_replaces_a_score(store: SqlMetadataStore) -> None:
    writes = ResultWrites(store, linger_s=0.0)
    await _write(writes, "p", "a", _results("x", 2))
    await _write(writes, "p", "a", _results("x", 2, outcome=OUTCOME_ERROR))
    await asyncio.gather(_write(writes, "p", "a", _results("x", 1, outcome=OUTCOME_ERROR)),
                         _write(writes, "p", "a", _results("x", 1)))
    assert await _stored(store, "a") == [("x0", OUTCOME_SCORED), ("x1", OUTCOME_SCORED)]


async def test_a_failed_write_fails_every_caller_it_carried(store: SqlMetadataStore) -> None:
    writes = ResultWrites(store, linger_s=0.05)
    await store.close()  # the store does not answer
    outcomes = await asyncio.gather(_write(writes, "p", "a", _results("x", 1)),
                                    _write(writes, "p", "a", _results("y", 1)), return_exceptions=True)
    assert all(isinstance(outcome, InfraError) for outcome in outcomes)


async def test_tasks_ended_together_are_stored_after_their_results_and_each_moves_once(
    store: SqlMetadataStore,
) -> None:
    await store.add_tasks("p", [TaskRow(run_id="a", key=k, stage=2, shard=0, trial=0, state="pending")
                                for k in ("t1", "t2")])
    writes = ResultWrites(store, linger_s=0.05)
    moved = await asyncio.gather(
        writes.end_task("p", "a", TaskEnd("t1", "done"), results=_results("x", 2)),
        writes.end_task("p", "a", TaskEnd("t1", "done"), results=_results("x", 2)),  # redelivered in the batch
        writes.end_task("p", "a", TaskEnd("t2", "failed", error="infra")),
    )
    assert moved == [True, False, True]  # the first caller of a task folds its results, the copy does not
    assert len(await _stored(store, "a")) == 2
    assert {row.key: row.state for row in await store.list_tasks("a")} == {"t1": "done", "t2": "failed"}
    assert not await writes.end_task("p", "a", TaskEnd("t1", "done"), results=_results("x", 2))  # ended before
