"""builtin/length, latency, token-usage and cost."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy import stats

from evalsi.errors import BadInputError, SkipRecord
from evalsi.evaluators import Evaluator, normalize_scores
from evalsi.packs.core.usage import cost, latency, length, token_usage
from evalsi.records import make_record
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score


def run(ev: Evaluator, record: Any, **params: Any) -> dict[str, Score]:
    bound = ev.bind(params)
    defaults = {p.name: p.default for p in ev.params if not p.required}
    return {s.name: s for s in normalize_scores(ev, ev(record, **{**defaults, **bound.params}))}


def with_usage(**fields: Any) -> Record:
    record = make_record(output="x")
    latency_ms = fields.pop("latency_ms", None)
    for name, value in fields.items():
        setattr(record.usage, name, value)
    record.usage.SetInParent()
    if latency_ms is not None:
        record.usage.latency.FromMilliseconds(latency_ms)
    return record


# --- length ---


@pytest.mark.parametrize(
    ("unit", "expected"), [("words", 4), ("chars", len("one two  three\nfour")), ("lines", 2)]
)
def test_length_units(unit: str, expected: int) -> None:
    scores = run(length, make_record(output="one two  three\nfour"), unit=unit)
    assert scores["length"].number == expected
    assert "in_range" not in scores


def test_length_empty_output() -> None:
    for unit in ("words", "chars", "lines"):
        assert run(length, make_record(output=""), unit=unit)["length"].number == 0


def test_length_range() -> None:
    record = make_record(output="a b c d e")
    assert run(length, record, min=1, max=5)["in_range"].passed
    scores = run(length, record, max=3)
    assert not scores["in_range"].passed and "5 words, above max 3" in scores["in_range"].explanation
    scores = run(length, record, min=10)
    assert not scores["in_range"].passed and "below min 10" in scores["in_range"].explanation


def test_length_params_validation() -> None:
    with pytest.raises(BadInputError, match=r"'unit' must be one of chars, words, lines"):
        length.bind({"unit": "tokens"})
    with pytest.raises(BadInputError, match=r"'max' must be float"):
        length.bind({"max": "10"})
    assert length.bind({"min": 2}).params == {"min": 2.0}
    with pytest.raises(BadInputError, match=r"'min' .* is greater than 'max'"):
        run(length, make_record(output="x"), min=5, max=1)


# --- latency ---


def test_latency_reports_seconds() -> None:
    scores = run(latency, with_usage(latency_ms=1200))
    assert scores["seconds"].number == pytest.approx(1.2)
    assert "within_budget" not in scores


def test_latency_budget() -> None:
    record = with_usage(latency_ms=1200)
    assert run(latency, record, max_seconds=2)["within_budget"].passed
    scores = run(latency, record, max_seconds=1)
    assert not scores["within_budget"].passed and "over the budget of 1s" in scores["within_budget"].explanation


def test_latency_unset_skips() -> None:
    with pytest.raises(SkipRecord, match=r"usage.latency is unset"):
        run(latency, with_usage(input_tokens=3))


def test_latency_params_validation() -> None:
    with pytest.raises(BadInputError, match=r"'max_seconds' must be float"):
        latency.bind({"max_seconds": "1s"})
    with pytest.raises(BadInputError, match=r"unknown param.*budget"):
        latency.bind({"budget": 1})


# --- token-usage ---


def test_token_usage_totals() -> None:
    scores = run(token_usage, with_usage(input_tokens=100, output_tokens=20))
    assert {k: s.number for k, s in scores.items()} == {
        "input_tokens": 100, "output_tokens": 20, "total_tokens": 120,
    }
    scores = run(token_usage, with_usage(input_tokens=100, output_tokens=20, total_tokens=150))
    assert scores["total_tokens"].number == 150


def test_token_usage_without_tokens_skips() -> None:
    with pytest.raises(SkipRecord, match=r"no token counts"):
        run(token_usage, with_usage(cost_usd=0.1))


def test_token_usage_takes_no_params() -> None:
    with pytest.raises(BadInputError, match=r"unknown param\(s\) model \(accepted: none\)"):
        token_usage.bind({"model": "gpt"})


# --- cost ---


def test_cost_from_usage() -> None:
    scores = run(cost, with_usage(cost_usd=0.01))
    assert scores["usd"].number == pytest.approx(0.01)
    assert "within_budget" not in scores


def test_cost_from_prices() -> None:
    record = with_usage(input_tokens=2000, output_tokens=500)
    scores = run(cost, record, price_per_1k_input=0.003, price_per_1k_output=0.015)
    assert scores["usd"].number == pytest.approx(0.006 + 0.0075)
    # cost_usd wins over prices
    record.usage.cost_usd = 0.5
    assert run(cost, record, price_per_1k_input=0.003)["usd"].number == pytest.approx(0.5)


def test_cost_budget() -> None:
    record = with_usage(cost_usd=0.02)
    assert run(cost, record, max_usd=0.05)["within_budget"].passed
    scores = run(cost, record, max_usd=0.01)
    assert not scores["within_budget"].passed and "over the budget" in scores["within_budget"].explanation


def test_cost_skips() -> None:
    with pytest.raises(SkipRecord, match=r"no cost: usage.cost_usd is unset and no prices were given"):
        run(cost, with_usage(input_tokens=10))
    with pytest.raises(SkipRecord, match=r"no input or output tokens"):
        run(cost, with_usage(latency_ms=5), price_per_1k_input=0.01)


def test_cost_params_validation() -> None:
    with pytest.raises(BadInputError, match=r"'max_usd' must be float"):
        cost.bind({"max_usd": True})
    with pytest.raises(BadInputError, match=r"'price_per_1k_input' must be >= 0"):
        run(cost, with_usage(input_tokens=1), price_per_1k_input=-1)


def test_a_free_call_is_a_cost_of_zero_not_a_missing_one() -> None:
    # A recorded cost of 0 is a value: it is neither priced from tokens nor skipped.
    record = with_usage(cost_usd=0.0, input_tokens=1000)
    assert run(cost, record, price_per_1k_input=1.0)["usd"].number == 0.0


def test_zero_costs_count_in_the_summary() -> None:
    import evalsi

    rows = [{"id": f"r{i}", "output": "x", "usage": {"cost_usd": usd}} for i, usd in enumerate([0, 0, 0.002, 0.004])]
    summary = evalsi.evaluate(rows, ["cost"]).metric("cost.usd")
    assert summary.n == 4 and summary.mean == pytest.approx(0.0015)


def test_an_interval_of_a_metric_bounded_below_never_reaches_below_its_bound() -> None:
    import evalsi

    rows = [{"id": f"r{i}", "output": "x", "usage": {"latency_s": s}} for i, s in enumerate([0.001, 0.002, 5.0])]
    summary = evalsi.evaluate(rows, ["latency"]).metric("latency.seconds")
    low, high = stats.t.interval(0.95, 2, loc=np.mean([0.001, 0.002, 5.0]), scale=stats.sem([0.001, 0.002, 5.0]))
    assert low < -5.0  # unclipped, the Student-t interval reaches far below zero; latency is declared >= 0
    assert summary.ci.low == 0.0 and summary.ci.high == pytest.approx(high, rel=1e-12)
