"""Gates: CEL over metric summaries; missing or undefined figures fail with the reason, failures show values."""

from __future__ import annotations

import pytest

from evalsi.errors import BadInputError
from evalsi.runs.gates import compile_gate, evaluate_gate, evaluate_gates
from evalsi.v1alpha1.score_pb2 import MetricSummary


def summary(metric: str, n: int, mean: float | None = None, *, low: float | None = None, high: float | None = None,
            skipped: int = 0, errors: int = 0, k: int = 0) -> MetricSummary:
    s = MetricSummary(metric=metric, n=n, skipped=skipped, errors=errors, k=k)
    if mean is not None:
        s.mean = mean
    if low is not None and high is not None:
        s.ci.low, s.ci.high = low, high
    return s


SUMMARIES = [
    summary("exact-match", 30, 0.5667, low=0.39, high=0.73, skipped=2),
    summary("task-success", 12, 0.5, low=0.2, high=0.8),
    summary("task-success.pass@3", 4, 0.75, k=3),
    summary("task-success.pass^3", 4, 0.25, k=3),
    summary("judge", 0, skipped=5, errors=3),
]


def check(expression: str) -> tuple[bool, str]:
    result = evaluate_gate(expression, SUMMARIES)
    assert result.expression == expression
    return result.passed, result.message


def test_a_passing_gate_shows_what_it_read() -> None:
    assert check("metric('exact-match').mean >= 0.5") == (True, "metric('exact-match').mean = 0.5667 >= 0.5")


def test_a_failing_gate_shows_the_value_and_the_failed_comparison() -> None:
    assert check("metric('exact-match').mean >= 0.8") == (False, "metric('exact-match').mean = 0.5667 < 0.8")
    assert check("metric('exact-match').ci_low > 0.7") == (False, "metric('exact-match').ci_low = 0.39 <= 0.7")


def test_compound_gates_list_every_value() -> None:
    passed, message = check("metric('exact-match').n >= 30 && metric('task-success').mean > 0.9")
    assert not passed and message == "false: metric('exact-match').n = 30, metric('task-success').mean = 0.5"


def test_counts_and_interval_fields() -> None:
    assert check("metric('exact-match').skipped == 2")[0]
    assert check("metric('exact-match').ci_high < 0.8 && metric('exact-match').errors == 0")[0]
    passed, message = check("metric('exact-match').std > 0")  # no std in this summary
    assert not passed and message.startswith("metric('exact-match').std is undefined")


def test_a_missing_metric_fails_even_when_the_rest_would_pass() -> None:
    passed, message = check("metric('exact-macth').mean >= 0.5 || true")
    assert not passed
    assert message == "no metric 'exact-macth' in this run; did you mean exact-match?"


def test_an_undefined_figure_fails_and_says_why() -> None:
    passed, message = check("metric('judge').mean >= 0.0")
    assert not passed and message == "metric('judge').mean is undefined (n = 0: no scored values; 5 skipped, 3 errors)"
    passed, message = check("!(metric('judge').mean < 0.5)")
    assert not passed and "undefined" in message
    passed, message = check("metric('task-success.pass@3').ci_low > 0")
    assert not passed and "ci_low is undefined" in message


def test_pass_at_k_and_pass_hat_k_read_their_summaries() -> None:
    assert check("metric('task-success').passAtK(3) >= 0.7") == (
        True, "metric('task-success').passAtK(3) = 0.75 >= 0.7"
    )
    assert check("metric('task-success').passHatK(3) >= 0.5") == (
        False, "metric('task-success').passHatK(3) = 0.25 < 0.5"
    )
    passed, message = check("metric('task-success').passHatK(5) >= 0.1")
    assert not passed
    assert "no metric 'task-success.pass^5' (this run has task-success.pass@3, task-success.pass^3)" in message
    passed, message = check("metric('exact-match').passAtK(3) >= 0.1")
    assert not passed and "need several trials per sample" in message


def test_a_count_compares_with_a_fraction_as_a_number() -> None:
    # CEL compares across int and double; the check accepts it and the evaluation agrees (cel-python alone raised
    # "found no matching overload for relation_ge ... IntType ... DoubleType").
    assert check("metric('exact-match').n >= 0.5") == (True, "metric('exact-match').n = 30 >= 0.5")
    assert check("metric('exact-match').n > 30.5") == (False, "metric('exact-match').n = 30 <= 30.5")
    assert check("metric('exact-match').n == 30.0")[0]
    assert check("metric('exact-match').skipped != 2.0") == (False, "metric('exact-match').skipped = 2 == 2.0")
    assert check("0.5 < metric('exact-match').n")[0]


def test_ill_typed_gates_are_refused_before_any_run_with_the_position_and_the_types() -> None:
    cases = {
        "metric('exact-match').mean":
            "a gate must be true or false; \"metric('exact-match').mean\" is a double",
        "metric('exact-match').mean == 'a'":
            "== compares double with string, which are never equal "
            "(in \"metric('exact-match').mean == 'a'\" at column 28)",
        "metric('a').mean * metric('a').n > 1":
            "* mixes double and int, which CEL does not do in arithmetic; convert one side, e.g. "
            "double(metric('a').n) (in \"metric('a').mean * metric('a').n > 1\" at column 18)",
        "metric('a').average > 1":
            "metric('a') has no field 'average'; accepted: mean, std, n, ci_low, ci_high, skipped, errors, "
            "infra_errors, cancelled, passAtK(), passHatK() (in \"metric('a').average > 1\" at column 13)",
        "metric('a').ci_lo > 1":
            "metric('a') has no field 'ci_lo'; did you mean ci_low? accepted: mean, std, n, ci_low, ci_high, "
            "skipped, errors, infra_errors, cancelled, passAtK(), passHatK() (in \"metric('a').ci_lo > 1\" at "
            "column 13)",
        "metric('a').passAtK('3') > 0.5":
            "metric('a').passAtK() takes an int; \"'3'\" is a string (in \"metric('a').passAtK('3') > 0.5\" at "
            "column 21)",
        "metric('a').mean > 0.5 && metric('a').n":
            "&& needs bool operands; \"metric('a').n\" is an int (in \"metric('a').mean > 0.5 && metric('a').n\" "
            "at column 27)",
        "mean('a') > 0.5":
            "unknown function mean(); functions here: metric(), and CEL's size(), int(), double(), string() "
            "(in \"mean('a') > 0.5\" at column 1)",
    }
    for expression, message in cases.items():
        with pytest.raises(BadInputError) as caught:
            compile_gate(expression)
        assert str(caught.value) == message, expression


def test_every_problem_of_one_gate_is_reported_and_lines_are_counted() -> None:
    expression = "metric('a').mean == 'x' ||\n  metric('a').n + 0.5 > 1"
    with pytest.raises(BadInputError) as caught:
        compile_gate(expression)
    first, second = str(caught.value).split("; ", 1)
    assert first.startswith("== compares double with string") and "at line 1, column 18)" in first
    assert second.startswith("+ mixes int and double") and "at line 2, column 17)" in second


def test_a_gate_that_would_not_compile_fails_when_evaluated_rather_than_raising() -> None:
    passed, message = check("metric('exact-match').mean")
    assert not passed
    assert message == "not evaluated: a gate must be true or false; \"metric('exact-match').mean\" is a double"


def test_compile_errors_are_bad_input() -> None:
    with pytest.raises(BadInputError, match="invalid CEL"):
        compile_gate("metric('a').mean >=")
    with pytest.raises(BadInputError, match="has no field 'average'"):
        compile_gate("metric('a').average > 1")
    with pytest.raises(BadInputError, match=r"passHatK: takes a whole number k >= 1"):
        compile_gate("metric('a').passHatK(0) > 1")
    with pytest.raises(BadInputError, match="metric\\(\\) takes the metric's name as a quoted string"):
        compile_gate("metric('a' + 'b').mean > 1")
    with pytest.raises(BadInputError, match="non-empty"):
        compile_gate("  ")


def test_a_compiled_gate_is_reusable_and_gates_keep_their_order() -> None:
    gate = compile_gate("metric('exact-match').mean > 0.5")
    assert evaluate_gate(gate, SUMMARIES).passed
    assert not evaluate_gate(gate, [summary("exact-match", 3, 0.1)]).passed
    results = evaluate_gates([gate, "metric('judge').n == 0"], SUMMARIES)
    assert [r.passed for r in results] == [True, True]
