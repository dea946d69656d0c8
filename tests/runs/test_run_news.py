"""RunNews.whole_fold: a run's fold stands in for its stored results only when nothing known makes them differ."""

from __future__ import annotations

from evalsi.evaluators._evaluator import evaluator
from evalsi.runs.news import RunNews
from evalsi.runs.summary import SummaryBuilder
from evalsi.v1alpha1.score_pb2 import OUTCOME_ERROR, OUTCOME_SCORED, EvaluationResult


@evaluator("t/flag")
def flag(record: object) -> bool:
    return True


BOUND = [flag.bind(alias="f")]


def _results(n: int, outcome: int = OUTCOME_SCORED) -> list[EvaluationResult]:
    out = []
    for i in range(n):
        result = EvaluationResult(record_id=f"r{i}", evaluator="f", outcome=outcome)
        if outcome == OUTCOME_SCORED:
            result.scores.add(name="passed", passed=i % 2 == 0)
        out.append(result)
    return out


def _followed(stored: list[EvaluationResult]) -> tuple[RunNews, SummaryBuilder]:
    news, builder = RunNews(), SummaryBuilder(BOUND)
    news.follow("run", builder)
    builder.add(stored)  # what the driver reads from the store when it takes the run
    news.read_done("run")
    return news, builder


def test_a_fold_with_the_stores_counts_is_the_final_one() -> None:
    news, builder = _followed(_results(2, OUTCOME_ERROR))
    news.fold("run", _results(3))
    assert news.whole_fold("run", {OUTCOME_SCORED: 3, OUTCOME_ERROR: 2}) is builder


def test_counts_that_differ_send_the_driver_to_the_store_and_free_the_fold() -> None:
    news, _builder = _followed([])
    news.fold("run", _results(3))
    assert news.whole_fold("run", {OUTCOME_SCORED: 4}) is None  # another replica stored one more
    assert news.partials("run") is None


def test_results_folded_while_the_store_is_read_or_stored_unfolded_make_it_not_whole() -> None:
    news, builder = RunNews(), SummaryBuilder(BOUND)
    news.follow("run", builder)
    news.fold("run", _results(1))  # may have been read as well
    news.read_done("run")
    assert news.whole_fold("run", {OUTCOME_SCORED: 1}) is None

    news, _builder = _followed([])
    news.fold("run", _results(2))
    news.written_unfolded("run")  # a redelivered copy stored over what was folded
    assert news.whole_fold("run", {OUTCOME_SCORED: 2}) is None
