"""A worker's results as columns (runs.result_columns): the same rows and the same summaries as the results."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsi.bus.v1alpha1.bus_pb2 import TaskResult
from evalsi.evaluators import Output
from evalsi.evaluators._evaluator import evaluator
from evalsi.runs.result_columns import columns_of, fold_columns, move_results_to_columns, result_rows
from evalsi.runs.summary import SummaryBuilder
from evalsi.stores.sql import SqlMetadataStore
from evalsi.v1alpha1.score_pb2 import (
    ERROR_KIND_EVALUATOR,
    ERROR_KIND_INFRA,
    OUTCOME_ERROR,
    OUTCOME_SCORED,
    OUTCOME_SKIPPED,
    EvaluationResult,
)


@evaluator("t/flag", outputs=[Output("flag", "boolean")])
def flag(record: object) -> bool:
    return True


@evaluator("t/size", outputs=[Output("size", "number")])
def size(record: object) -> float:
    return 1.0


@evaluator("t/pair", outputs=[Output("low", "number"), Output("high", "number")])
def pair(record: object) -> dict[str, float]:
    return {"low": 0.0, "high": 1.0}


BOUND = [flag.bind(alias="f"), size.bind(alias="s"), pair.bind(alias="p")]


def _scored(record_id: str, alias: str, trial: int = 0, **score: object) -> EvaluationResult:
    result = EvaluationResult(record_id=record_id, evaluator=alias, outcome=OUTCOME_SCORED, trial=trial)
    result.scores.add(**score)
    return result


def _one_evaluator(n: int) -> list[EvaluationResult]:
    return [_scored(f"r{i}", "f", name="flag", passed=i % 3 != 0) for i in range(n)]


def _mixed() -> list[EvaluationResult]:
    """Every shape a fold meets: pass/fail and numbers of several evaluators, two trials, a non-ASCII id, several
    scores in one result, skips, errors of each kind, an evaluator the builder does not know."""
    out = [_scored(f"r{i}", "f", name="flag", passed=i % 2 == 0) for i in range(5)]
    out += [_scored("é-1", "f", trial=1, name="flag", passed=True), _scored("ü", "s", name="size", number=2.5)]
    out += [_scored(f"r{i}", "s", trial=i % 2, name="size", number=i / 3) for i in range(4)]
    both = EvaluationResult(record_id="r0", evaluator="p", outcome=OUTCOME_SCORED)
    both.scores.add(name="low", number=0.25)
    both.scores.add(name="high", number=0.75)
    out.append(both)
    out.append(EvaluationResult(record_id="r9", evaluator="f", outcome=OUTCOME_SKIPPED, reason="missing output"))
    out.append(EvaluationResult(record_id="r8", evaluator="s", outcome=OUTCOME_ERROR, error_kind=ERROR_KIND_INFRA,
                                reason="provider 503"))
    out.append(EvaluationResult(record_id="r7", evaluator="s", outcome=OUTCOME_ERROR,
                                error_kind=ERROR_KIND_EVALUATOR, reason="ValueError: bad"))
    out.append(_scored("r1", "unknown", name="x", number=1.0))
    out += [_scored(f"q{i}", "s", name="size", number=float(i)) for i in range(3)]
    return out


def _summaries_by_add(results: list[EvaluationResult]) -> list[bytes]:
    builder = SummaryBuilder(BOUND)
    builder.add(results)
    return [s.SerializeToString(deterministic=True) for s in builder.summaries()]


@pytest.mark.parametrize("results", [_one_evaluator(40), _mixed()], ids=["one-evaluator", "mixed"])
def test_folding_the_columns_gives_the_summaries_of_the_results(results: list[EvaluationResult]) -> None:
    builder = SummaryBuilder(BOUND)
    fold_columns(builder, columns_of(results))
    assert [s.SerializeToString(deterministic=True) for s in builder.summaries()] == _summaries_by_add(results)
    expected = SummaryBuilder(BOUND)
    expected.add(results)
    assert builder.outcome_counts() == expected.outcome_counts()


def test_the_common_fold_takes_the_column_path_and_a_dataset_scope_one_reads_the_results() -> None:
    builder = SummaryBuilder(BOUND)
    assert builder.add_scored("f", "flag", ["a", "b"], [0, 0], [1.0, 0.0])
    assert not builder.add_scored("unknown", "x", ["a"], [0], [1.0])  # add counts it apart; the caller reads it
    assert builder.outcome_counts() == {OUTCOME_SCORED: 2}


def test_a_worker_publishes_columns_and_each_row_is_its_result_as_stored() -> None:
    results = _mixed()
    message = TaskResult(key="k", run_id="run")
    message.results.extend(results)
    move_results_to_columns(message)
    assert not message.results
    rows = result_rows(TaskResult.FromString(message.SerializeToString()).columns)
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [(x.evaluator, x.record_id, x.trial, x.outcome) for x in results]
    assert [EvaluationResult.FromString(r[4]) for r in rows] == results


async def test_rows_are_stored_by_the_results_upsert_rule(tmp_path: Path) -> None:
    store = await SqlMetadataStore.open_sqlite(tmp_path / "m.sqlite")
    try:
        scored = _scored("x1", "f", name="flag", passed=True)
        late_error = EvaluationResult(record_id="x1", evaluator="f", outcome=OUTCOME_ERROR, reason="late")
        # One batch holding a task's result twice (a redelivery) plus a late error for a scored key: one row each,
        # the score kept.
        await store.upsert_result_rows("p", "run", result_rows(columns_of([scored, *_one_evaluator(3), scored])))
        await store.upsert_result_rows("p", "run", result_rows(columns_of([late_error])))
        stored = [r async for page in store.iter_results("p", "run") for r in page]
        assert len(stored) == 4
        assert next(r for r in stored if r.record_id == "x1") == scored
    finally:
        await store.close()
