"""The batched runner: outcomes, skips, errors, scopes and concurrency."""

from __future__ import annotations

import asyncio
import time

from evalsi.errors import InfraError, SkipRecord
from evalsi.evaluators import EvalContext, Output, evaluator
from evalsi.evaluators.runner import DATASET_RECORD_ID, RunnerOptions, run_evaluators
from evalsi.records import make_record
from evalsi.v1alpha1.record_pb2 import Step
from evalsi.v1alpha1.score_pb2 import (
    ERROR_KIND_EVALUATOR,
    ERROR_KIND_INFRA,
    OUTCOME_ERROR,
    OUTCOME_SCORED,
    OUTCOME_SKIPPED,
)


def _ctx(_bound):
    return EvalContext()


@evaluator("t/equal", requires=["output", "reference"])
def equal(record) -> bool:
    if record.output.text == "skip":
        raise SkipRecord("asked to skip")
    if record.output.text == "boom":
        raise ZeroDivisionError("bad evaluator code")
    if record.output.text == "infra":
        raise InfraError("sandbox unavailable")
    return record.output.text == record.reference.text


async def test_outcomes_scored_skipped_and_both_error_kinds() -> None:
    records = [
        make_record(id="a", output="x", reference="x"),
        make_record(id="b", output="x"),
        make_record(id="c", output="skip", reference="x"),
        make_record(id="d", output="boom", reference="x"),
        make_record(id="e", output="infra", reference="x"),
    ]
    results = await run_evaluators(records, [equal.bind()], _ctx)
    by_id = {r.record_id: r for r in results}
    assert by_id["a"].outcome == OUTCOME_SCORED and by_id["a"].scores[0].passed
    assert by_id["b"].outcome == OUTCOME_SKIPPED and by_id["b"].reason == "missing reference"
    assert by_id["c"].outcome == OUTCOME_SKIPPED and by_id["c"].reason == "asked to skip"
    assert by_id["d"].outcome == OUTCOME_ERROR and by_id["d"].error_kind == ERROR_KIND_EVALUATOR
    assert "ZeroDivisionError: bad evaluator code" in by_id["d"].reason
    assert by_id["e"].outcome == OUTCOME_ERROR and by_id["e"].error_kind == ERROR_KIND_INFRA
    assert all(r.evaluator == "equal" and r.evaluator_ref == "t/equal@0.1.0" for r in results)


async def test_judge_requirement_without_judge_is_judge_pending() -> None:
    @evaluator("t/needs-judge", requires=["output", "judge"])
    async def needs_judge(record, ctx) -> bool:
        return True

    results = await run_evaluators([make_record(id="a", output="x")], [needs_judge.bind()], _ctx)
    assert results[0].outcome == OUTCOME_SKIPPED and results[0].reason.startswith("judge_pending")


async def test_one_slow_async_call_does_not_stall_the_others() -> None:
    finished: list[str] = []

    @evaluator("t/slow", requires=["output"])
    async def slow(record) -> bool:
        await asyncio.sleep(1.0 if record.id == "slow" else 0.01)
        finished.append(record.id)
        return True

    records = [make_record(id="slow", output="x")] + [make_record(id=f"r{i}", output="x") for i in range(40)]
    started = time.perf_counter()
    results = await run_evaluators(records, [slow.bind()], _ctx, options=RunnerOptions(concurrency=4))
    elapsed = time.perf_counter() - started
    assert all(r.outcome == OUTCOME_SCORED for r in results)
    # 40 fast calls on the 3 free workers finish long before the slow one.
    assert finished[-1] == "slow"
    assert elapsed < 1.5


async def test_concurrency_is_bounded() -> None:
    active = peak = 0

    @evaluator("t/count", requires=["output"])
    async def count(record) -> bool:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.005)
        active -= 1
        return True

    records = [make_record(id=str(i), output="x") for i in range(50)]
    await run_evaluators(records, [count.bind()], _ctx, options=RunnerOptions(concurrency=5))
    assert peak == 5


async def test_span_session_dataset_and_comparative_scopes() -> None:
    @evaluator("t/tool-ok", scope="span")
    def tool_ok(step: Step) -> bool:
        return step.status != 2

    @evaluator("t/turns", scope="session", outputs=[Output("turns", "number")])
    def turns(records) -> float:
        return float(len(records))

    @evaluator(
        "t/accuracy",
        scope="dataset",
        requires=["reference"],
        outputs=[Output("accuracy", "number", 0, 1)],
        mapper=lambda r: r.output.text == r.reference.text,
    )
    def accuracy(values) -> float:
        return sum(values) / len(values)

    @evaluator("t/longer", scope="comparative", requires=["output"])
    def longer(records) -> bool:
        return len(records[0].output.text) > len(records[1].output.text)

    records = []
    for i in range(6):
        record = make_record(
            id=f"r{i}",
            output="a" * i,
            reference=["", "z", "z"][i] if i < 3 else None,
            metadata={"session_id": f"s{i % 2}"},
        )
        step = record.trajectory.steps.add(span_id=f"sp{i}")
        step.status = 2 if i == 0 else 1
        records.append(record)
    baseline = [make_record(id=f"r{i}", output="aa") for i in range(5)]
    results = await run_evaluators(
        records, [tool_ok.bind(), turns.bind(), accuracy.bind(), longer.bind()], _ctx, compare_with=[baseline]
    )
    spans = [r for r in results if r.evaluator == "tool-ok"]
    assert [r.record_id for r in spans] == [f"r{i}/sp{i}" for i in range(6)]
    assert [r.scores[0].passed for r in spans] == [False] + [True] * 5
    sessions = {r.record_id: r.scores[0].number for r in results if r.evaluator == "turns"}
    assert sessions == {"s0": 3.0, "s1": 3.0}
    (dataset,) = [r for r in results if r.evaluator == "accuracy"]
    assert dataset.record_id == DATASET_RECORD_ID
    assert dataset.scores[0].number == 1 / 3  # r0..r2 have references; only r0 matches
    assert dataset.scores[0].metadata["n"].number_value == 3
    assert dataset.scores[0].metadata["skipped"].number_value == 3
    comparative = {r.record_id: r for r in results if r.evaluator == "longer"}
    assert comparative["r5"].outcome == OUTCOME_SKIPPED and "counterpart" in comparative["r5"].reason
    assert [comparative[f"r{i}"].scores[0].passed for i in range(5)] == [False, False, False, True, True]


async def test_cancel_lets_calls_in_flight_finish_and_marks_the_rest_cancelled() -> None:
    from evalsi.v1alpha1.score_pb2 import OUTCOME_CANCELLED

    cancel = asyncio.Event()

    @evaluator("t/slow-judge", requires=["output"])
    async def slow_judge(record) -> bool:
        if record.id == "r2":
            cancel.set()
        await asyncio.sleep(0.01)
        return True

    records = [make_record(id=f"r{i}", output="x") for i in range(20)]
    results = await run_evaluators(
        records,
        [slow_judge.bind(), equal.bind()],
        _ctx,
        options=RunnerOptions(concurrency=2, chunk_size=5),
        cancel=cancel,
    )
    judged = [r for r in results if r.evaluator == "slow-judge"]
    assert [r.outcome for r in judged[:3]] == [OUTCOME_SCORED] * 3  # r0..r2 were in flight and finished
    assert all(r.outcome == OUTCOME_CANCELLED and r.reason for r in judged[4:])
    assert len(results) == 40 and not any(r.outcome == 0 for r in results)


def test_an_empty_content_message_counts_as_missing() -> None:
    import evalsi
    from evalsi.v1alpha1.record_pb2 import Content, Record

    record = Record(id="a", reference=Content(text="x"))
    record.output.CopyFrom(Content())  # present on the wire, but holding nothing
    summary = evalsi.evaluate([record], ["exact-match"]).metric("exact-match")
    assert summary.n == 0 and summary.skipped == 1


async def test_sync_evaluators_share_chunks_and_keep_their_order_through_an_overdue_call() -> None:
    """Record-scope sync evaluators run their calls in chunks that cross evaluators (one thread hop for many):
    an overdue call in the middle is an error of its own evaluator only, and every evaluator's results come back
    complete and in record order."""

    @evaluator("t/first-letter", requires=["output"])
    def first_letter(record) -> bool:
        if record.id == "r3":
            time.sleep(0.3)
        return record.output.text.startswith("a")

    records = [make_record(id=f"r{i}", output="ab" if i % 2 else "ba", reference="ab") for i in range(7)]
    results = await run_evaluators(
        records,
        [equal.bind(), first_letter.bind()],
        _ctx,
        options=RunnerOptions(chunk_size=4, call_timeout_s=0.1),
    )
    assert [(r.evaluator, r.record_id) for r in results] == (
        [("equal", f"r{i}") for i in range(7)] + [("first-letter", f"r{i}") for i in range(7)])
    assert [r.scores[0].passed for r in results[:7]] == [i % 2 == 1 for i in range(7)]
    overdue = results[7 + 3]
    assert overdue.outcome == OUTCOME_ERROR and overdue.reason.startswith("deadline")
    assert [r.outcome for r in results if r is not overdue] == [OUTCOME_SCORED] * 13
    assert [r.scores[0].passed for r in results[7:] if r is not overdue] == [i % 2 == 1 for i in range(7) if i != 3]


def test_content_test_agrees_with_has_content_for_every_kind_of_requirement() -> None:
    from evalsi.records import content_test, has_content
    from evalsi.v1alpha1.record_pb2 import Content, Record

    full = make_record(id="a", input="q", output="x", reference="x", context=["doc"], metadata={"lang": "en"})
    empty = Record(id="b")
    blank = Record(id="c")
    blank.output.CopyFrom(Content())  # present on the wire, holding nothing (what clear_empty_contents drops)
    fields = ["input", "output", "reference", "context", "metadata", "metadata.lang", "metadata.other"]
    for record in (full, empty, blank):
        assert [content_test(f)(record) for f in fields] == [has_content(record, f) for f in fields]
    assert [content_test(f)(full) for f in fields] == [True] * 6 + [False]
    assert not any(content_test(f)(empty) for f in fields)


async def test_a_record_missing_several_fields_names_them_all_in_requirement_order() -> None:
    @evaluator("t/needs-three", requires=["input", "output", "reference"])
    def needs_three(record) -> bool:
        return True

    records = [make_record(id="a", output="x"), make_record(id="b", input="q", output="x", reference="x")]
    results = await run_evaluators(records, [needs_three.bind()], _ctx)
    assert results[0].outcome == OUTCOME_SKIPPED and results[0].reason == "missing input, reference"
    assert results[1].outcome == OUTCOME_SCORED
