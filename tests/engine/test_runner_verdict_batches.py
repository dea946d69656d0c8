"""A boolean evaluator's batch form mixing bare bools and ``Verdict``s (exact-match's: passes as True, failures with
their explanation), written a column at a time: every row is the bytes of the result the function's own return makes
on the message path, with the pass folded as 1.0 or 0.0."""

from __future__ import annotations

import pytest
from test_runner_columns import _columns_equal

from evalsi.bus.v1alpha1.bus_pb2 import ResultColumns, TaskResult
from evalsi.evaluators import EvalContext, Output, Verdict, evaluator
from evalsi.evaluators._columns import append_results
from evalsi.evaluators.runner import RunnerOptions, run_evaluators
from evalsi.records import make_record
from evalsi.v1alpha1.score_pb2 import EvaluationResult, Score

TEXTS = ["yes", "no", "why-yes", "why-no", "empty-why", "yes", "no", "日本-no"]


def _entry(text: str) -> bool | Verdict:
    if text == "why-yes":
        return Verdict(True, "passed, and said why")
    if text == "empty-why":
        return Verdict(False, "")
    if text.endswith("no") and text != "no":
        return Verdict(False, f"{text} is not yes")
    return text == "yes"


def _batch(texts):
    return [_entry(text) for text in texts["output"]]


@evaluator("t/verdicts", requires=["output"], cheap=True, batch=_batch, outputs=[Output("passed", "boolean")])
def verdicts(record):
    entry = _entry(record.output.text)
    return entry if isinstance(entry, bool) else Score(passed=entry.passed, explanation=entry.explanation)


def _ctx(_bound):
    return EvalContext()


@pytest.mark.parametrize("chunk_size", [3, 2048])
async def test_bools_and_verdicts_write_the_bytes_the_functions_results_have(chunk_size) -> None:
    options = RunnerOptions(chunk_size=chunk_size)
    records = [make_record(id=f"r{i}", output=text) for i, text in enumerate(TEXTS)]
    holder = TaskResult()
    await run_evaluators(records, [verdicts.bind()], _ctx, options=options, into=holder.results)
    columns = ResultColumns()
    await run_evaluators(records, [verdicts.bind()], _ctx, options=options, columns=columns)
    want = ResultColumns()
    append_results(want, holder.results)
    _columns_equal(columns, want)
    assert list(columns.values) == [1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    assert set(columns.score_names) == {"passed"}
    explained = EvaluationResult.FromString(columns.data[3])
    assert not explained.scores[0].passed and explained.scores[0].explanation == "why-no is not yes"
