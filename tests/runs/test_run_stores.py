"""The in-memory run store keeps the SQL store's rules where the run driver relies on them: the same calls give the
same answers on both (compare-and-set runs, task moves, results where a score is never replaced by a late error,
results read back in one order, usage, leases)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from evalsi.bus.v1alpha1.bus_pb2 import STAGE_EVALUATE, STAGE_GENERATE
from evalsi.records import make_record
from evalsi.stores.memory import MemoryRecords, MemoryRunStore
from evalsi.stores.metadata import TaskRow
from evalsi.stores.sql import SqlMetadataStore
from evalsi.v1alpha1.run_pb2 import RUN_STATE_CANCELLED, RUN_STATE_PENDING, RUN_STATE_RUNNING, Run
from evalsi.v1alpha1.score_pb2 import OUTCOME_CANCELLED, OUTCOME_ERROR, OUTCOME_SCORED, EvaluationResult


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    if request.param == "memory":
        yield MemoryRunStore()
        return
    sql = await SqlMetadataStore.open_sqlite(tmp_path / "runs.db")
    try:
        yield sql
    finally:
        await sql.close()


def result(record: str, evaluator: str, outcome: int, trial: int = 0) -> EvaluationResult:
    return EvaluationResult(record_id=record, evaluator=evaluator, outcome=outcome, trial=trial)


async def test_a_run_changes_only_from_the_states_named(store: Any) -> None:
    run = Run(id="r1", project="p", state=RUN_STATE_PENDING)
    await store.create_run(run)
    run.state = RUN_STATE_RUNNING
    assert await store.update_run(run, only_from=(RUN_STATE_PENDING,))
    run.state = RUN_STATE_CANCELLED
    assert not await store.update_run(run, only_from=(RUN_STATE_PENDING,))
    stored = await store.get_run("p", "r1")
    assert stored.state == RUN_STATE_RUNNING
    assert await store.runs_in_states((RUN_STATE_RUNNING,)) == [("p", "r1")]


async def test_a_score_is_never_replaced_by_a_late_error_and_results_come_back_in_one_order(store: Any) -> None:
    await store.create_run(Run(id="r1", project="p", state=RUN_STATE_RUNNING))
    await store.upsert_results("p", "r1", [result("b", "em", OUTCOME_SCORED), result("a", "em", OUTCOME_ERROR),
                                           result("a", "em", OUTCOME_SCORED, trial=1)])
    await store.upsert_results("p", "r1", [result("b", "em", OUTCOME_CANCELLED), result("a", "em", OUTCOME_SCORED),
                                           result("c", "acc", OUTCOME_SCORED)])
    rows = [r async for batch in store.iter_results("p", "r1", batch_size=2) for r in batch]
    assert [(r.evaluator, r.record_id, r.trial, r.outcome) for r in rows] == [
        ("acc", "c", 0, OUTCOME_SCORED), ("em", "a", 0, OUTCOME_SCORED), ("em", "a", 1, OUTCOME_SCORED),
        ("em", "b", 0, OUTCOME_SCORED),
    ]
    assert await store.count_results("p", "r1") == {OUTCOME_SCORED: 4}


async def test_tasks_move_only_from_the_states_named_and_carry_their_usage(store: Any) -> None:
    await store.create_run(Run(id="r1", project="p", state=RUN_STATE_RUNNING))
    rows = [TaskRow("r1", "k/gen", STAGE_GENERATE, 0, 0, "pending"), TaskRow("r1", "k/ev", STAGE_EVALUATE, 0, 0,
                                                                              "pending")]
    assert await store.add_tasks("p", rows) == 2
    assert await store.add_tasks("p", rows[:1]) == 0  # a key is added once
    assert await store.set_task_state("r1", "k/gen", "done", output_ref="out", usage=(10, 2, 0.5))
    assert not await store.set_task_state("r1", "k/gen", "failed")  # no longer pending
    assert await store.set_task_state("r1", "k/ev", "cancelled")
    assert await store.set_task_state("r1", "k/ev", "done", only_from=("pending", "cancelled"), usage=(1, 1, 0.25))
    counts = await store.task_counts("r1")
    assert (counts["done"], counts["pending"], counts["failed"], counts["cancelled"]) == (2, 0, 0, 0)
    assert await store.task_usage("r1") == (11, 3, 0.75)
    (generated,) = await store.list_tasks("r1", states=("done",), stage=STAGE_GENERATE)
    assert generated.output_ref == "out"


async def test_a_lease_is_held_by_one_owner_until_released(store: Any) -> None:
    assert await store.acquire_lease("run:r1", "a", 30)
    assert not await store.acquire_lease("run:r1", "b", 30)
    assert await store.acquire_lease("run:r1", "a", 30)  # renewed by its owner
    await store.release_lease("run:r1", "a")
    assert await store.acquire_lease("run:r1", "b", 30)


async def test_records_by_reference_resolve_to_the_shard_and_the_outputs_stored() -> None:
    records = MemoryRecords()
    run = Run(id="r1")
    records.add_run("r1", [make_record(id=f"s{i}", input="q") for i in range(5)])
    assert await records.record_count(run) == 5
    ref = await records.shard_ref(run, 1, 3)
    assert [r.id for r in await records.outputs(ref)] == ["s1", "s2"] == [
        r.id for r in await records.shard_records(run, 1, 3)]
    out = await records.put_outputs(run, [make_record(id="s1", input="q", output="A")])
    assert [r.output.text for r in await records.outputs(out)] == ["A"]
