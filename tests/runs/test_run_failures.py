"""Errors by kind with their first cause, and the rule for a metric that measured nothing (pure functions over the
summaries the one SummaryBuilder folds)."""

from __future__ import annotations

from evalsi.evaluators import Output
from evalsi.evaluators._evaluator import evaluator
from evalsi.runs.failures import error_breakdown, error_notes, infra_failure, measured_nothing
from evalsi.runs.summary import REASON_CHARS, SummaryBuilder, short_reason
from evalsi.v1alpha1.score_pb2 import (
    ERROR_KIND_EVALUATOR,
    ERROR_KIND_INFRA,
    OUTCOME_ERROR,
    OUTCOME_SCORED,
    EvaluationResult,
    MetricSummary,
    Score,
)


@evaluator("t/judge", outputs=[Output("passed", "boolean")])
def judge(record: object) -> bool:
    return True


def error(record: str, kind: int, reason: str, evaluator: str = "judge") -> EvaluationResult:
    return EvaluationResult(record_id=record, evaluator=evaluator, outcome=OUTCOME_ERROR, error_kind=kind,
                            reason=reason)


def test_a_reason_is_one_line_cut_at_the_limit() -> None:
    assert short_reason("HTTP 500:\n  upstream\tdown ") == "HTTP 500: upstream down"
    long = "x" * (REASON_CHARS + 10)
    assert short_reason(long) == "x" * (REASON_CHARS - 1) + "…"


def test_errors_are_tallied_by_kind_with_the_first_reason() -> None:
    summary = MetricSummary(metric="judge", evaluator="judge", errors=3, infra_errors=2)
    summary.error_kinds.add(kind=ERROR_KIND_INFRA, count=2, first_reason="HTTP 503")
    summary.error_kinds.add(kind=ERROR_KIND_EVALUATOR, count=1, first_reason="UnparseableAnswer: ...")
    assert error_breakdown(summary) == "3 (2 infra, 1 evaluator)"
    assert [n.text() for n in error_notes([summary])] == [
        "judge: 2 infra errors, the first: HTTP 503",
        "judge: 1 evaluator error, the first: UnparseableAnswer: ...",
    ]
    assert not measured_nothing(summary)  # an evaluator error is the evaluator's, not an outage
    old = MetricSummary(metric="judge", errors=4, infra_errors=4)  # a document saved before the tally by kind
    assert error_breakdown(old) == "4 (4 infra)" and error_breakdown(MetricSummary()) == "0"


def test_a_metric_of_nothing_but_infra_errors_measured_nothing() -> None:
    down = MetricSummary(metric="judge", evaluator="judge", errors=2, infra_errors=2)
    down.error_kinds.add(kind=ERROR_KIND_INFRA, count=2, first_reason="connection refused")
    assert measured_nothing(down)
    assert infra_failure([down, MetricSummary(metric="exact-match", n=2)]) == (
        "metric judge: every evaluation (2) is an infrastructure error; the first: connection refused\n"
        "(exit 1: nothing was measured; --allow-errors accepts it and exits 0)"
    )
    partly = MetricSummary(metric="judge", n=1, errors=1, infra_errors=1)
    assert not measured_nothing(partly) and infra_failure([partly]) == ""


def test_the_builder_folds_the_first_reason_of_each_kind_once_per_evaluator() -> None:
    builder = SummaryBuilder([judge.bind(alias="judge")])
    builder.add([
        error("a", ERROR_KIND_INFRA, "first outage"),
        error("b", ERROR_KIND_EVALUATOR, "first bug"),
        error("c", ERROR_KIND_INFRA, "second outage"),
        EvaluationResult(record_id="d", evaluator="judge", outcome=OUTCOME_SCORED,
                         scores=[Score(name="passed", passed=True)]),
    ])
    [summary] = builder.summaries()
    assert summary.errors == 3 and summary.infra_errors == 2 and summary.n == 1
    assert [(t.kind, t.count, t.first_reason) for t in summary.error_kinds] == [
        (ERROR_KIND_EVALUATOR, 1, "first bug"),
        (ERROR_KIND_INFRA, 2, "first outage"),
    ]
