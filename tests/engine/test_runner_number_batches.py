"""A batch form deciding numbers (``evaluator(batch=...)`` entries that are floats, or tuples of one bool or float
per output): every row the column path writes from them is the bytes of the result the function's own return makes
on the message path, and an entry that is not one of the outputs' (a NaN, a wrong length, a bool for a number
output) is left to the function, never written as given."""

from __future__ import annotations

import math

import pytest
from test_runner_columns import _columns_equal

from evalsi.bus.v1alpha1.bus_pb2 import ResultColumns, TaskResult
from evalsi.evaluators import EvalContext, Output, Verdict, evaluator
from evalsi.evaluators._columns import append_results
from evalsi.evaluators.runner import RunnerOptions, run_evaluators
from evalsi.records import make_record
from evalsi.v1alpha1.score_pb2 import OUTCOME_ERROR, OUTCOME_SCORED, EvaluationResult

# Texts whose numbers cover the double's corners: zero and negative zero, tiny and huge magnitudes, integers.
NUMBERS = {"zero": 0.0, "neg-zero": -0.0, "tiny": 5e-324, "huge": 1.7976931348623157e308, "third": 1 / 3,
           "int": 7, "negative": -2.5, "nan": math.nan, "inf": math.inf}


def _number(text: str) -> float:
    return NUMBERS.get(text, float(len(text)))


def _ctx(_bound):
    return EvalContext()


def _single_batch(texts, *, scale: float = 1.0):
    # Decides every record the function does, NaN and infinity included (the engine must leave those to the
    # function), and leaves "skip-me" to it.
    return [None if t == "skip-me" else _number(t) * scale if t != "int" else 7 for t in texts["output"]]


@evaluator("t/length", requires=["output"], cheap=True, batch=_single_batch,
           outputs=[Output("length", "number")])
def length(record, *, scale: float = 1.0):
    text = record.output.text
    return 7 if text == "int" else _number(text) * scale


def _pair_batch(texts):
    out = []
    for output, reference in zip(texts["output"], texts["reference"], strict=True):
        if output == "short-tuple":
            out.append((1.0,))  # one value for two outputs: not theirs, the function decides
        elif output == "bool-for-number":
            out.append((True, True))  # a bool where the function returns a number: the same bytes? no: left
        else:
            out.append((_number(output) - len(reference), output == reference))
    return out


@evaluator("t/pair", requires=["output", "reference"], cheap=True, batch=_pair_batch,
           outputs=[Output("gap", "number"), Output("same", "boolean")])
def pair(record):
    output, reference = record.output.text, record.reference.text
    if output == "bool-for-number":
        return {"gap": 1.0, "same": True}
    if output == "short-tuple":
        return {"gap": 1.0, "same": False}
    return {"gap": _number(output) - len(reference), "same": output == reference}


def _mixed_batch(texts):
    # Entries of every kind at once: a number, a Verdict (not this evaluator's: its output is a number), None.
    return [Verdict(True, "why") if t == "verdict" else None if t == "none" else _number(t) for t in texts["output"]]


@evaluator("t/mixed", requires=["output"], cheap=True, batch=_mixed_batch, outputs=[Output("value", "number")])
def mixed(record):
    return _number(record.output.text)


def _records():
    texts = [*NUMBERS, "skip-me", "short-tuple", "bool-for-number", "verdict", "none", "a", "abc", "é-ü-日本"]
    records = [make_record(id=f"r{i}", output=text, reference="abc") for i, text in enumerate(texts)]
    records.append(make_record(id="no-reference", output="abc"))  # pair skips it: a required field is missing
    for trial, record in enumerate(records):
        record.provenance.trial = (trial % 3) * 200
    return records


@pytest.mark.parametrize("chunk_size", [3, 2048])
async def test_number_batches_write_the_bytes_the_functions_results_have(chunk_size) -> None:
    options = RunnerOptions(chunk_size=chunk_size)
    records = _records()
    bound = [length.bind(), length.bind({"scale": 0.1}, alias="scaled"), pair.bind(), mixed.bind()]
    holder = TaskResult()
    await run_evaluators(records, bound, _ctx, options=options, into=holder.results)
    columns = ResultColumns()
    await run_evaluators(records, bound, _ctx, options=options, columns=columns)
    want = ResultColumns()
    append_results(want, holder.results)
    _columns_equal(columns, want)
    rows = {(e, r): EvaluationResult.FromString(d)
            for e, r, d in zip(columns.evaluators, columns.record_ids, columns.data, strict=True)}
    by_text = {record.output.text: record.id for record in records if record.id != "no-reference"}
    # What the function's own error says stays its own: a NaN is an evaluator error naming the score.
    nan = rows[("length", by_text["nan"])]
    assert nan.outcome == OUTCOME_ERROR and "finite" in nan.reason
    # Negative zero keeps its sign, and an int is a number score.
    assert math.copysign(1.0, rows[("length", by_text["neg-zero"])].scores[0].number) == -1.0
    assert rows[("length", by_text["int"])].scores[0].number == 7.0
    # Two outputs: two scores, not folded (the fold reads the result); one output: folded with its name.
    two = rows[("pair", by_text["abc"])]
    assert [(s.name, s.WhichOneof("value")) for s in two.scores] == [("gap", "number"), ("same", "passed")]
    at = list(columns.record_ids).index(by_text["abc"], list(columns.evaluators).index("pair"))
    assert math.isnan(columns.values[at]) and columns.score_names[at] == ""
    first = list(columns.evaluators).index("length")
    assert columns.values[first] == 0.0 and columns.score_names[first] == "length"
    assert rows[("pair", "no-reference")].outcome != OUTCOME_SCORED


async def test_the_batch_form_decides_what_it_can_without_calling_the_function() -> None:
    calls: list[str] = []

    @evaluator("t/counted", requires=["output"], cheap=True, batch=_single_batch, outputs=[Output("n", "number")])
    def counted(record):
        calls.append(record.output.text)
        return _number(record.output.text)

    records = [make_record(id=f"r{i}", output=t) for i, t in enumerate(["a", "bb", "nan", "skip-me", "ccc"])]
    columns = ResultColumns()
    await run_evaluators(records, [counted.bind()], _ctx, columns=columns)
    assert sorted(calls) == ["nan", "skip-me"]  # the non-finite entry and the None, nothing else
    assert list(columns.values)[:2] == [1.0, 2.0] and list(columns.values)[4] == 3.0
