"""A NaN or infinite score is that record's evaluator error, naming the value; the run and its summary go on."""

from __future__ import annotations

import math
from typing import Any

import pytest

import evalsi
from evalsi.evaluators import Evaluator, Output, evaluator
from evalsi.v1alpha1.score_pb2 import OUTCOME_ERROR, OUTCOME_SCORED, Score

VALUES = [0.5, math.nan, 1.5, math.inf, 2.5, -math.inf]
ROWS = [{"id": f"r{i}", "output": str(i)} for i in range(len(VALUES))]


def _value(record: Any) -> float:
    return VALUES[int(record.output.text)]


@evaluator("test/bare-number", requires=["output"], outputs=[Output("value", "number")])
def bare_number(record: Any) -> float:
    return _value(record)


@evaluator("test/score-object", requires=["output"], outputs=[Output("value", "number")])
def score_object(record: Any) -> Score:
    return Score(number=_value(record))


@evaluator("test/mapping", requires=["output"], outputs=[Output("a", "number"), Output("b", "number")])
def mapping(record: Any) -> dict[str, float]:
    return {"a": 1.0, "b": _value(record)}


@pytest.mark.parametrize(("scorer", "metric"), [
    (bare_number, "bare-number"), (score_object, "score-object"), (mapping, "mapping.b"),
])
def test_non_finite_scores_become_evaluator_errors_and_the_summary_counts_the_rest(
    scorer: Evaluator, metric: str
) -> None:
    results = evalsi.evaluate(ROWS, [scorer])
    by_record = {r.record_id: r for r in results.run.results}
    for i, value in enumerate(VALUES):
        result = by_record[f"r{i}"]
        if math.isfinite(value):
            assert result.outcome == OUTCOME_SCORED
        else:
            assert result.outcome == OUTCOME_ERROR
            assert f"= {value}" in result.reason and "finite" in result.reason
    summary = results.metric(metric)
    assert summary.n == 3 and summary.mean == pytest.approx(1.5)
