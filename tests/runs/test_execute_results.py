"""A worker's task result: evaluations written into it in order (as the columns it travels as), then the target's
failures; its usage; retries; and evaluators bound once per list of refs, never mixed up between tasks naming
different params."""

from __future__ import annotations

import pytest

from evalsi.bus.v1alpha1.bus_pb2 import STAGE_EVALUATE, Task
from evalsi.errors import InfraError
from evalsi.evaluators import EvalContext, Pack, Registry, evaluator
from evalsi.evaluators.runner import run_evaluators
from evalsi.judges.panel import JudgeSet
from evalsi.records import make_record, to_value
from evalsi.runs.binding import resolve_evaluators
from evalsi.runs.execute import Executor, RetryTask
from evalsi.runs.outcome import TARGET_FAILURE_KEY
from evalsi.runs.result_columns import task_results
from evalsi.v1alpha1.evaluator_pb2 import EvaluatorRef
from evalsi.v1alpha1.score_pb2 import ERROR_KIND_INFRA, OUTCOME_ERROR, OUTCOME_SCORED, Score


@evaluator("t/priced", requires=["output"])
async def priced(record):
    if record.output.text == "down":
        raise InfraError("provider down")
    score = Score(passed=True)
    score.cost.input_tokens, score.cost.output_tokens, score.cost.cost_usd = 7, 3, 0.5
    return score


def _registry() -> Registry:
    return Registry([*Registry.from_entry_points().packs.values(), Pack("t", (priced,))])


def _task(records, refs) -> Task:  # type: ignore[no-untyped-def]
    task = Task(key="k", run_id="run", project="p", stage=STAGE_EVALUATE)
    task.records.extend(records)
    task.evaluators.extend(refs)
    return task


def _records():  # type: ignore[no-untyped-def]
    records = [make_record(id=f"r{i}", output=text, reference="Paris")
               for i, text in enumerate(["Paris", "paris", "Rome", "PARIS"])]
    records[2].metadata[TARGET_FAILURE_KEY].CopyFrom(to_value({"kind": "infra", "reason": "target: 503"}))
    return records


async def test_a_task_result_holds_the_runner_results_then_the_failed_records_with_their_usage() -> None:
    refs = [EvaluatorRef(ref="builtin/exact-match", alias="lenient"), EvaluatorRef(ref="t/priced"),
            EvaluatorRef(ref="builtin/exact-match", alias="strict", params={"normalize": False})]
    records = _records()
    async with JudgeSet({}) as judges:
        out = await Executor(_registry(), judges).execute(_task(records, refs))
        assert not out.results and len(out.columns.data) == 12  # written as columns, none as messages
        results = task_results(out)
        evaluable = [r for r in records if TARGET_FAILURE_KEY not in r.metadata]
        alone = await run_evaluators(evaluable, resolve_evaluators(refs, _registry()), lambda _: EvalContext())
    for result in [*results, *alone]:
        result.ClearField("duration")  # the async calls' durations differ run to run
    assert results[:9] == alone
    assert [(r.evaluator, r.record_id, r.outcome) for r in results[9:]] == [
        ("lenient", "r2", OUTCOME_ERROR), ("priced", "r2", OUTCOME_ERROR), ("strict", "r2", OUTCOME_ERROR)]
    assert [r.scores[0].passed for r in results if r.evaluator == "strict" and r.outcome == OUTCOME_SCORED] == [
        True, False, False]
    assert (out.usage.input_tokens, out.usage.output_tokens, out.usage.total_tokens) == (21, 9, 30)
    assert out.usage.cost_usd == pytest.approx(1.5)


async def test_tasks_naming_other_params_get_their_own_binding() -> None:
    records = [make_record(id="a", output="paris", reference="Paris")]
    async with JudgeSet({}) as judges:
        executor = Executor(_registry(), judges)
        for normalize in (True, False, True):
            ref = EvaluatorRef(ref="builtin/exact-match", params={"normalize": normalize})
            (result,) = task_results(await executor.execute(_task(records, [ref])))
            assert result.scores[0].passed is normalize


async def test_infrastructure_errors_retry_the_task_until_its_last_attempt() -> None:
    task = _task([make_record(id="a", output="down"), make_record(id="b", output="up")], [EvaluatorRef(ref="t/priced")])
    async with JudgeSet({}) as judges:
        executor = Executor(_registry(), judges)
        with pytest.raises(RetryTask, match="1 evaluations failed on infrastructure"):
            await executor.execute(task, final_attempt=False)
        out = await executor.execute(task, final_attempt=True)
    assert [(r.outcome, r.error_kind) for r in task_results(out)] == [
        (OUTCOME_ERROR, ERROR_KIND_INFRA), (OUTCOME_SCORED, 0)]
    assert out.usage.input_tokens == 7
