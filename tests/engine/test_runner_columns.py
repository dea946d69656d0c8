"""The runner writing results as columns (``run_evaluators(columns=...)``): every row is the bytes of the result the
message path writes, and the columns are those made from the messages (``append_results``), whatever the outcome,
the evaluator's scope, the records' ids (unicode, long), trials, missing fields, deadlines and cancellation."""

from __future__ import annotations

import asyncio
import math
import time

import pytest
from test_runner_hot_path import TEXTS, cheap_grade, judged, judged_session, mean_length, two

from evalsi.bus.v1alpha1.bus_pb2 import ResultColumns, TaskResult
from evalsi.evaluators import EvalContext, evaluator
from evalsi.evaluators._columns import ColumnLists, append_results
from evalsi.evaluators.runner import RunnerOptions, run_evaluators
from evalsi.packs.core.matching import exact_match, regex_match
from evalsi.records import make_record
from evalsi.v1alpha1.record_pb2 import Usage
from evalsi.v1alpha1.score_pb2 import OUTCOME_CANCELLED, OUTCOME_ERROR, OUTCOME_SCORED, EvaluationResult, Score


def _ctx(_bound):
    return EvalContext()


def _records():
    records = [make_record(id=f"r{i}", output=text or None, reference="Paris") for i, text in enumerate(TEXTS)]
    records.append(make_record(id="no-reference", output="Paris"))
    records.append(make_record(id="é-ü-日本" * 30, output="paris", reference=" Paris "))  # a long non-ASCII id
    records.append(make_record(id="list", output="Rome", reference={"json": ["Paris", "Rome"]}))
    for trial, record in enumerate(records):
        record.provenance.trial = (trial % 3) * 200  # two-byte varints too
    return records


def _columns_equal(got: ResultColumns, want: ResultColumns) -> None:
    assert [EvaluationResult.FromString(d) for d in got.data] == [EvaluationResult.FromString(d) for d in want.data]
    assert list(got.data) == list(want.data)  # the same bytes, not only the same messages
    for name in ("evaluators", "record_ids", "trials", "outcomes", "score_names"):
        assert list(getattr(got, name)) == list(getattr(want, name)), name
    assert [v if not math.isnan(v) else "nan" for v in got.values] == [
        v if not math.isnan(v) else "nan" for v in want.values
    ]


def _no_durations(columns: ResultColumns) -> ResultColumns:
    """The columns with each row's duration cleared (span, session, dataset and async calls time themselves)."""
    out = ResultColumns()
    out.CopyFrom(columns)
    for index, data in enumerate(out.data):
        result = EvaluationResult.FromString(data)
        result.ClearField("duration")
        out.data[index] = result.SerializeToString()
    return out


@pytest.mark.parametrize("timeout_s", [None, 30.0], ids=["no-deadline", "deadline"])
@pytest.mark.parametrize("chunk_size", [4, 2048])
async def test_columns_hold_the_bytes_of_the_results_the_message_path_writes(timeout_s, chunk_size) -> None:
    options = RunnerOptions(call_timeout_s=timeout_s, chunk_size=chunk_size)
    records = _records()
    bound = [cheap_grade.bind(alias="lenient"), two.bind(), judged.bind(), cheap_grade.bind({"strict": True},
             alias="strict"), exact_match.bind(), regex_match.bind({"pattern": "^[Pp]ar"}), mean_length.bind(),
             judged_session.bind()]
    holder = TaskResult()
    usage_messages, usage_columns = Usage(), Usage()
    await run_evaluators(records, bound, _ctx, options=options, into=holder.results, usage=usage_messages)
    columns = ResultColumns()
    returned = await run_evaluators(records, bound, _ctx, options=options, columns=columns, usage=usage_columns)
    assert returned == []
    want = ResultColumns()
    append_results(want, holder.results)
    _columns_equal(_no_durations(columns), _no_durations(want))
    assert usage_columns == usage_messages and usage_columns.input_tokens > 0
    # The fast rows really are the common case: a bare bool verdict of a cheap evaluator, foldable.
    scored = [i for i, e in enumerate(columns.evaluators)
              if e == "exact-match" and columns.outcomes[i] == OUTCOME_SCORED]
    assert len(scored) >= 10 and all(columns.score_names[i] == "passed" for i in scored)


async def test_columns_are_appended_after_what_they_hold() -> None:
    columns = ResultColumns()
    append_results(columns, [EvaluationResult(record_id="earlier", evaluator="x", outcome=OUTCOME_SCORED)])
    records = [make_record(id=f"r{i}", output="Paris", reference="Paris") for i in range(3)]
    await run_evaluators(records, [exact_match.bind()], _ctx, columns=columns)
    assert list(columns.record_ids) == ["earlier", "r0", "r1", "r2"]
    assert list(columns.values)[1:] == [1.0, 1.0, 1.0]
    assert len(columns.data) == len(columns.outcomes) == len(columns.score_names) == 4


async def test_a_cancelled_runs_unwritten_rows_are_cancelled_results() -> None:
    cancel = asyncio.Event()

    @evaluator("t/cancels", requires=["output"], cheap=True)
    def cancels(record):
        if record.output.text == "stop":
            cancel.set()
        return True

    records = [make_record(id=f"r{i}", output="stop" if i == 1 else "go") for i in range(6)]
    columns = ResultColumns()
    await run_evaluators(records, [cancels.bind()], _ctx, options=RunnerOptions(chunk_size=2), cancel=cancel,
                         columns=columns)
    assert list(columns.outcomes) == [OUTCOME_SCORED] * 2 + [OUTCOME_CANCELLED] * 4
    last = EvaluationResult.FromString(columns.data[-1])
    assert (last.record_id, last.evaluator, last.reason) == ("r5", "cancels", "cancelled before it ran")
    assert math.isnan(columns.values[-1])


async def test_a_cheap_call_past_the_deadline_is_the_same_error_row() -> None:
    @evaluator("t/slow", requires=["output"], cheap=True)
    def slow(record):
        if record.output.text == "slow":
            time.sleep(0.25)
        return Score(passed=True, explanation="fine")

    records = [make_record(id=f"r{i}", output=t) for i, t in enumerate(["ok", "slow", "ok"])]
    columns = ResultColumns()
    await run_evaluators(records, [slow.bind()], _ctx, options=RunnerOptions(call_timeout_s=0.1), columns=columns)
    assert list(columns.outcomes) == [OUTCOME_SCORED, OUTCOME_ERROR, OUTCOME_SCORED]
    overdue = EvaluationResult.FromString(columns.data[1])
    assert overdue.reason.startswith("deadline:") and overdue.duration.ToNanoseconds() == 100_000_000
    assert EvaluationResult.FromString(columns.data[0]).scores[0].explanation == "fine"


async def test_into_and_columns_together_are_refused() -> None:
    with pytest.raises(ValueError, match="not both"):
        await run_evaluators([], [exact_match.bind()], _ctx, into=TaskResult().results, columns=ResultColumns())


@pytest.mark.parametrize("chunk_size", [4, 2048])
async def test_column_lists_hold_what_the_message_holds(chunk_size) -> None:
    # What an in-process run hands its driver (ColumnLists, never copied into a message) is what a worker's task
    # result carries: the same rows and columns, whatever the outcomes, trials, ids and missing fields.
    options = RunnerOptions(chunk_size=chunk_size)
    records = _records()
    bound = [cheap_grade.bind(alias="lenient"), two.bind(), judged.bind(), exact_match.bind(),
             regex_match.bind({"pattern": "^[Pp]ar"}), mean_length.bind()]
    message = ResultColumns()
    await run_evaluators(records, bound, _ctx, options=options, columns=message)
    lists = ColumnLists()
    await run_evaluators(records, bound, _ctx, options=options, columns=lists)
    assert all(type(getattr(lists, name)) is list for name in ("data", "record_ids", "values", "outcomes"))
    copied = ResultColumns()
    lists.copy_to(copied)
    _columns_equal(_no_durations(copied), _no_durations(message))
    assert len(lists.data) == len(message.data) > len(records)
