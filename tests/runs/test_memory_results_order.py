"""The in-process store reads a run's results in the order of their keys (evaluator, record id, trial), the order
every store reads them in, whatever order they were written in (its sort is three stable sorts, one per element)."""

from __future__ import annotations

import random

from evalsi.stores.memory import MemoryRunStore, _key_order
from evalsi.v1alpha1.score_pb2 import OUTCOME_ERROR, OUTCOME_SCORED, EvaluationResult


def test_the_key_order_is_the_order_of_the_keys() -> None:
    rng = random.Random(3)
    ids = ["r1", "r10", "r2", "é", "日本", "a" * 300, "", "R1", "r1 "]
    keys = {(rng.choice(["exact-match", "b", "a-long-alias", "é"]), rng.choice(ids) + str(rng.randrange(50)),
             rng.choice([0, 1, 2, 200, 2**31 - 1])) for _ in range(5000)}
    assert _key_order(keys) == sorted(keys)


async def test_rows_written_in_any_order_are_read_in_key_order() -> None:
    rng = random.Random(5)
    results = [EvaluationResult(evaluator=rng.choice(["x", "y"]), record_id=f"r{i}", trial=rng.randrange(3),
                                outcome=rng.choice([OUTCOME_SCORED, OUTCOME_ERROR])) for i in range(3000)]
    rows = [(r.evaluator, r.record_id, r.trial, r.outcome, r.SerializeToString()) for r in results]
    rng.shuffle(rows)
    store = MemoryRunStore()
    await store.upsert_result_rows("p", "run", rows[:1000])
    await store.upsert_result_rows("p", "run", rows[1000:])
    await store.upsert_result_rows("p", "run", rows[:10])  # again: the same results, replaced by themselves
    want = sorted(results, key=lambda r: (r.evaluator, r.record_id, r.trial))
    got = [EvaluationResult.FromString(data) for batch in store.take_result_rows("run") for data in batch]
    assert got == want
    assert await store.count_results("p", "run") == {}  # taken: nothing left
