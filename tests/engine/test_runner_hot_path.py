"""The runner's hot path: cheap evaluators on the loop, results built in place, usage summed only when costed.

Every result must be the same message whichever way it was made: a ``cheap`` evaluator (called on the event
loop) against the same function run on worker threads, with and without a deadline, across chunk boundaries,
interleaved with judges and dataset metrics.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from evalsi.bus.v1alpha1.bus_pb2 import TaskResult
from evalsi.errors import BadInputError, InfraError, SkipRecord
from evalsi.evaluators import EvalContext, Output, evaluator
from evalsi.evaluators.runner import RunnerOptions, run_evaluators
from evalsi.records import make_record
from evalsi.v1alpha1.record_pb2 import Usage
from evalsi.v1alpha1.score_pb2 import (
    ERROR_KIND_EVALUATOR,
    ERROR_KIND_INFRA,
    OUTCOME_CANCELLED,
    OUTCOME_ERROR,
    OUTCOME_SCORED,
    OUTCOME_SKIPPED,
    Score,
)


def _ctx(_bound):
    return EvalContext()


def _grade(record, *, strict: bool = False):
    """Every kind of answer an evaluator gives, chosen by the output text."""
    text = record.output.text
    if text == "skip":
        raise SkipRecord("asked to skip")
    if text == "boom":
        raise ZeroDivisionError("bad evaluator code")
    if text == "infra":
        raise InfraError("sandbox unavailable")
    if text == "score":
        return Score(passed=False, explanation="a Score, unnamed")
    if text == "named":
        return Score(name="passed", passed=True, explanation="a Score, named")
    if text == "bad-name":
        return Score(name="nope", passed=True)
    if text == "no-value":
        return Score(explanation="no value")
    if text == "label":
        return "a label"
    return (text == record.reference.text) if strict else (text.casefold() == record.reference.text.casefold())


cheap_grade = evaluator("t/cheap-grade", requires=["output", "reference"], cheap=True)(_grade)
threaded_grade = evaluator("t/cheap-grade", requires=["output", "reference"])(_grade)


@evaluator("t/two", requires=["output"], outputs=[Output("length", "number"), Output("short", "boolean")], cheap=True)
def two(record):
    return {"length": len(record.output.text), "short": len(record.output.text) < 4}


@evaluator("t/judged", requires=["output"])
async def judged(record):
    await asyncio.sleep(0)
    score = Score(passed=True)
    score.cost.input_tokens, score.cost.output_tokens, score.cost.cost_usd = 10, 2, 0.25
    return score


@evaluator("t/judged-twice", requires=["output"], outputs=[Output("first"), Output("second")])
async def judged_twice(record):
    first, second = Score(passed=True), Score(passed=False)
    first.cost.input_tokens = second.cost.output_tokens = 100
    return {"first": first, "second": second}


@evaluator("t/judged-session", scope="session")
def judged_session(records):
    score = Score(passed=True)
    score.cost.input_tokens = 1000
    return score


@evaluator("t/mean-length", scope="dataset", outputs=[Output("mean", "number")],
           mapper=lambda record: len(record.output.text))
def mean_length(values):
    return sum(values) / len(values)


TEXTS = ["Paris", "paris", "Rome", "skip", "boom", "infra", "score", "named", "bad-name", "no-value", "label", ""]


def _records():
    records = [make_record(id=f"r{i}", output=text or None, reference="Paris") for i, text in enumerate(TEXTS)]
    records.append(make_record(id="no-reference", output="Paris"))
    for trial, record in enumerate(records):
        record.provenance.trial = trial % 3
    return records


def _bytes(results):
    return [result.SerializeToString(deterministic=True) for result in results]


@pytest.mark.parametrize("timeout_s", [None, 30.0], ids=["no-deadline", "deadline"])
@pytest.mark.parametrize("chunk_size", [5, 2048])
async def test_a_cheap_evaluator_gives_the_results_of_the_same_function_on_threads(timeout_s, chunk_size) -> None:
    options = RunnerOptions(call_timeout_s=timeout_s, chunk_size=chunk_size)
    records = _records()

    async def run(grade):
        bound = [grade.bind(alias="lenient"), two.bind(), judged.bind(), grade.bind({"strict": True}, alias="strict"),
                 mean_length.bind()]
        return await run_evaluators(records, bound, _ctx, options=options)

    cheap, threaded = await run(cheap_grade), await run(threaded_grade)
    # Durations differ run to run (span, session, dataset and async calls carry one); nothing else may.
    for result in [*cheap, *threaded]:
        result.ClearField("duration")
    assert _bytes(cheap) == _bytes(threaded)
    by_key = {(r.evaluator, r.record_id): r for r in cheap}
    assert [(r.evaluator, r.record_id) for r in cheap[:3]] == [("lenient", "r0"), ("lenient", "r1"), ("lenient", "r2")]
    assert by_key["lenient", "r1"].scores[0].passed and not by_key["strict", "r1"].scores[0].passed
    assert by_key["strict", "r1"].outcome == OUTCOME_SCORED and by_key["strict", "r1"].trial == 1
    assert (by_key["lenient", "r3"].outcome, by_key["lenient", "r3"].reason) == (OUTCOME_SKIPPED, "asked to skip")
    assert by_key["lenient", "r4"].error_kind == ERROR_KIND_EVALUATOR
    assert by_key["lenient", "r4"].reason == "ZeroDivisionError: bad evaluator code"
    assert by_key["lenient", "r5"].error_kind == ERROR_KIND_INFRA
    unnamed = by_key["lenient", "r6"].scores[0]
    assert (unnamed.name, unnamed.passed, unnamed.explanation) == ("passed", False, "a Score, unnamed")
    assert by_key["lenient", "r7"].scores[0].explanation == "a Score, named"
    assert "declared outputs: passed" in by_key["lenient", "r8"].reason and not by_key["lenient", "r8"].scores
    assert "without a value" in by_key["lenient", "r9"].reason
    assert by_key["lenient", "r10"].scores[0].label == "a label"
    assert (by_key["lenient", "r11"].outcome, by_key["lenient", "r11"].reason) == (OUTCOME_SKIPPED, "missing output")
    assert by_key["lenient", "no-reference"].reason == "missing reference"
    assert [(s.name, s.number or s.passed) for s in by_key["two", "r0"].scores] == [("length", 5.0), ("short", False)]
    assert by_key["mean-length", "*"].outcome == OUTCOME_SCORED


async def test_an_evaluators_score_is_copied_never_renamed_in_place() -> None:
    shared = Score(passed=True)

    @evaluator("t/shared", requires=["output"], cheap=True)
    def same_score(record):
        return shared

    results = await run_evaluators([make_record(id="a", output="x")], [same_score.bind()], _ctx)
    assert results[0].scores[0].name == "passed" and shared.name == ""


async def test_results_are_written_into_the_given_container_after_what_it_holds() -> None:
    holder = TaskResult()
    holder.results.add(record_id="earlier")
    records = [make_record(id=f"r{i}", output="Paris", reference="Paris") for i in range(3)]
    results = await run_evaluators(records, [cheap_grade.bind(), judged.bind()], _ctx, into=holder.results)
    assert [r.record_id for r in holder.results] == ["earlier", "r0", "r1", "r2", "r0", "r1", "r2"]
    assert [r.evaluator for r in holder.results][1:] == ["cheap-grade"] * 3 + ["judged"] * 3
    results[0].reason = "the same message"
    assert holder.results[1].reason == "the same message"


async def test_usage_sums_the_costs_scores_carry_and_nothing_when_none_does() -> None:
    records = [make_record(id=f"r{i}", output="Paris", reference="Paris") for i in range(4)]
    usage = Usage(input_tokens=1)
    await run_evaluators(records, [cheap_grade.bind(), judged.bind()], _ctx, usage=usage)
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (41, 8, 48)
    assert usage.cost_usd == pytest.approx(1.0)
    # Several scores through normalization (one result each), and a session's score committed from its copy.
    several, session = Usage(), Usage()
    await run_evaluators(records, [cheap_grade.bind(), judged_twice.bind()], _ctx, usage=several)
    await run_evaluators(records, [judged_session.bind()], _ctx, usage=session)
    assert (several.input_tokens, several.output_tokens, session.input_tokens) == (400, 400, 4000)
    untouched = Usage()
    await run_evaluators(records, [cheap_grade.bind()], _ctx, usage=untouched)
    assert untouched == Usage()


async def test_a_cheap_call_past_the_deadline_is_the_deadline_error_and_the_rest_is_evaluated() -> None:
    @evaluator("t/slow-on", requires=["output"], cheap=True)
    def slow_on(record):
        if record.output.text == "slow":
            time.sleep(0.3)
        if record.output.text == "slow-boom":
            time.sleep(0.3)
            raise ValueError("late and wrong")
        return True

    records = [make_record(id=f"r{i}", output=t) for i, t in enumerate(["ok", "slow", "ok", "slow-boom", "ok"])]
    results = await run_evaluators(records, [slow_on.bind()], _ctx, options=RunnerOptions(call_timeout_s=0.2))
    assert [(r.outcome, r.error_kind) for r in results] == [
        (OUTCOME_SCORED, 0), (OUTCOME_ERROR, ERROR_KIND_EVALUATOR), (OUTCOME_SCORED, 0),
        (OUTCOME_ERROR, ERROR_KIND_EVALUATOR), (OUTCOME_SCORED, 0),
    ]
    for overdue in (results[1], results[3]):
        assert overdue.reason == "deadline: the evaluator call did not finish within 0.2s and was abandoned"
        assert not overdue.scores and overdue.duration.ToNanoseconds() == 200_000_000


async def test_cancel_during_cheap_chunks_cancels_the_chunks_not_started() -> None:
    cancel = asyncio.Event()

    @evaluator("t/cancels", requires=["output"], cheap=True)
    def cancels(record):
        if record.id == "r3":
            cancel.set()
        return True

    records = [make_record(id=f"r{i}", output="x") for i in range(10)]
    progress: list[int] = []
    results = await run_evaluators(records, [cancels.bind()], _ctx, options=RunnerOptions(chunk_size=4),
                                   cancel=cancel, progress=progress.append)
    assert [r.outcome for r in results] == [OUTCOME_SCORED] * 4 + [OUTCOME_CANCELLED] * 6
    assert results[9].reason == "cancelled before it ran" and results[9].record_id == "r9"
    assert progress == [4]


async def test_bad_input_from_a_cheap_evaluator_ends_the_evaluation() -> None:
    @evaluator("t/refuses", requires=["output"], cheap=True)
    def refuses(record):
        raise BadInputError("param 'x' is wrong")

    with pytest.raises(BadInputError, match="param 'x' is wrong"):
        await run_evaluators([make_record(id="a", output="x")], [refuses.bind()], _ctx)


async def test_cheap_calls_do_not_leave_the_event_loop_thread() -> None:
    import threading

    threads: set[int] = set()

    @evaluator("t/where", requires=["output"], cheap=True)
    def where(record):
        threads.add(threading.get_ident())
        return True

    await run_evaluators([make_record(id=f"r{i}", output="x") for i in range(5)], [where.bind()], _ctx,
                         options=RunnerOptions(call_timeout_s=5.0))
    assert threads == {threading.get_ident()}


async def test_long_cheap_chunks_let_the_loop_serve_its_other_tasks() -> None:
    @evaluator("t/slowish", requires=["output"], cheap=True)
    def slowish(record):
        time.sleep(0.005)  # a long text: 60 calls hold the loop 300 ms in all
        return True

    ticks: list[float] = []
    evaluating = True

    async def heartbeat() -> None:
        while evaluating:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.001)

    beating = asyncio.create_task(heartbeat())
    await asyncio.sleep(0)
    records = [make_record(id=f"r{i}", output="x") for i in range(60)]
    started = time.monotonic()
    results = await run_evaluators(records, [slowish.bind()], _ctx)  # one chunk of 60 calls
    evaluating = False
    await beating
    assert all(r.outcome == OUTCOME_SCORED for r in results)
    during = [tick for tick in ticks if tick > started]
    # The loop turns every 20 ms (the heartbeat's own 1 ms sleep makes it beat every other turn), not once at the end.
    assert len(during) >= 4, during


def test_only_synchronous_record_scope_evaluators_can_be_cheap() -> None:
    with pytest.raises(ValueError, match="only record-scope"):
        evaluator("t/bad", scope="session", cheap=True)
    with pytest.raises(ValueError, match="async evaluator cannot be declared cheap"):

        @evaluator("t/bad-async", cheap=True)
        async def bad(record):
            return True
