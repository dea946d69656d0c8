"""A dataset evaluator's bootstrap reads each resample's figures without Score messages (``plain_figures``) where
the reduce returns plain numbers: the same figures ``normalize_scores`` gives, and where it would refuse or read
more (a label, a Score, a NaN, a name not declared), the same outcome, since those go to it."""

from __future__ import annotations

import math

import numpy as np
import pytest

import evalsi
from evalsi import Score
from evalsi.evaluators import Output, evaluator
from evalsi.evaluators._evaluator import normalize_scores, plain_figures


def _slow(ev, returned):
    return {score.name: float(getattr(score, kind)) for score in normalize_scores(ev, returned)
            if (kind := score.WhichOneof("value")) in ("number", "passed")}


@evaluator("t/one", scope="dataset", mapper=lambda record: 1, outputs=[Output("mean", "number")])
def one(values):
    return 0.0


@evaluator("t/two", scope="dataset", mapper=lambda record: 1,
           outputs=[Output("a", "number"), Output("b", "boolean"), Output("c", "label")])
def two(values):
    return {}


RETURNS = [0.25, -0.0, 7, True, False, np.float64(0.125), np.int64(3), 10**400, math.nan, math.inf, "label",
           Score(number=0.5), [Score(name="mean", number=1.0)], {"mean": 0.5}, {"a": 0.5, "b": True},
           {"a": 1, "c": "x"}, {"a": math.nan}, {"zzz": 1.0}, {}, {"a": Score(number=2.0)}, None, (0.5,)]


@pytest.mark.parametrize("ev", [one, two], ids=["one-output", "three-outputs"])
@pytest.mark.parametrize("returned", RETURNS, ids=[repr(r)[:30] for r in RETURNS])
def test_plain_figures_are_normalize_scores_or_left_to_it(ev, returned) -> None:
    try:
        want: dict[str, float] | Exception = _slow(ev, returned)
    except Exception as exc:  # the bootstrap counts any raise as a failed resample
        want = exc
    try:
        plain = plain_figures(ev, returned)
    except Exception as exc:
        assert isinstance(want, Exception), (returned, exc)  # a failed resample either way
        return
    if plain is None:
        return  # normalize_scores decides: the same path as before
    assert not isinstance(want, Exception), (returned, want)
    assert plain == want and [math.copysign(1, v) for v in plain.values()] == [
        math.copysign(1, v) for v in want.values()]
    assert all(type(v) is float for v in plain.values())


def test_numbers_and_bools_take_the_plain_path_and_the_rest_does_not() -> None:
    assert plain_figures(one, 0.25) == {"mean": 0.25} and plain_figures(one, True) == {"mean": 1.0}
    assert plain_figures(two, {"a": 0.5, "b": False}) == {"a": 0.5, "b": 0.0}
    for left in (math.nan, "label", Score(number=0.5), {"zzz": 1.0}, {"a": "x"}, [0.5], 0.5):
        assert plain_figures(two if isinstance(left, dict) or left == 0.5 else one, left) is None


def test_a_dataset_metrics_interval_is_unchanged() -> None:
    # The mean of a column with its bootstrap interval, as scipy's percentile bootstrap would draw it: the fast
    # figures feed the same resamples, so the interval is a property of the data and the seed only.
    rows = [{"id": f"r{i}", "output": "x" * (i % 7)} for i in range(200)]

    @evaluator("t/mean-length", scope="dataset", requires=["output"], mapper=lambda r: len(r.output.text),
               outputs=[Output("mean-length", "number")])
    def mean_length(values):
        return sum(values) / len(values)

    @evaluator("t/mean-length-score", scope="dataset", requires=["output"], mapper=lambda r: len(r.output.text),
               outputs=[Output("mean-length", "number")])
    def mean_length_score(values):
        return Score(number=sum(values) / len(values))

    fast = evalsi.evaluate(rows, [mean_length], seed=3)
    slow = evalsi.evaluate(rows, [mean_length_score], seed=3)
    a, b = fast.metric("mean-length"), slow.metric("mean-length-score")
    assert (a.mean, a.ci.low, a.ci.high) == (b.mean, b.ci.low, b.ci.high) and a.ci.low < a.mean < a.ci.high
