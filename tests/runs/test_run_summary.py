"""SummaryBuilder: the same results give the same numbers to the last bit whatever order they are added in, and those
numbers are the statistics of the values in (record id, trial) order."""

from __future__ import annotations

import random

import numpy as np

import evalsi
from evalsi import stats
from evalsi.evaluators import Output
from evalsi.evaluators._evaluator import evaluator
from evalsi.runs.results import summary_row
from evalsi.runs.summary import SummaryBuilder, summarize_results
from evalsi.v1alpha1.score_pb2 import (
    ERROR_KIND_INFRA,
    OUTCOME_CANCELLED,
    OUTCOME_ERROR,
    OUTCOME_SCORED,
    OUTCOME_SKIPPED,
    EvaluationResult,
    SummaryOptions,
)


@evaluator("t/graded", outputs=[Output("score", "number"), Output("passed", "boolean")])
def graded(record: object) -> dict[str, object]:
    return {}


# Ids that sort differently as text and as naive bytes or numbers, one with a NUL inside, one empty.
IDS = ["r10", "r2", "r1", "é", "z", "a\0b", "a", "", "a\0", "日本", "r1/x"]


def _results(seed: int, trials: int) -> list[EvaluationResult]:
    rng = random.Random(seed)
    out = []
    for record_id in IDS:
        for trial in range(trials):
            result = EvaluationResult(record_id=record_id, evaluator="g", trial=trial, outcome=OUTCOME_SCORED)
            result.scores.add(name="score", number=rng.gauss(0.0, 1.0) * 1e3)
            result.scores.add(name="passed", passed=rng.random() < 0.6)
            out.append(result)
    out.append(EvaluationResult(record_id="s", evaluator="g", outcome=OUTCOME_SKIPPED))
    out.append(EvaluationResult(record_id="e", evaluator="g", outcome=OUTCOME_ERROR, error_kind=ERROR_KIND_INFRA))
    out.append(EvaluationResult(record_id="c", evaluator="g", outcome=OUTCOME_CANCELLED))
    out.append(EvaluationResult(record_id="o", evaluator="other", outcome=OUTCOME_SCORED))
    return out


def _summaries(results: list[EvaluationResult], options: SummaryOptions) -> list[bytes]:
    builder = SummaryBuilder([graded.bind(alias="g")])
    for start in range(0, len(results), 7):
        builder.add(results[start : start + 7])
    return [s.SerializeToString(deterministic=True) for s in builder.summaries(options=options)]


def test_numbers_do_not_depend_on_the_order_results_arrive_in() -> None:
    for trials, options in ((1, SummaryOptions()), (3, SummaryOptions(pass_k=[1, 2])),
                            (2, SummaryOptions(interval="bootstrap", seed=5, bootstrap_resamples=200))):
        results = _results(1, trials)
        expected = _summaries(results, options)
        for seed in range(5):
            shuffled = list(results)
            random.Random(seed).shuffle(shuffled)
            assert _summaries(shuffled, options) == expected


def test_values_are_summarized_in_record_then_trial_order() -> None:
    results = _results(2, 3)
    random.Random(3).shuffle(results)
    summaries = {s.metric: s for s in summarize_results(results, [graded.bind(alias="g")])}
    scored = sorted((r for r in results if r.evaluator == "g" and r.outcome == OUTCOME_SCORED),
                    key=lambda r: (r.record_id, r.trial))
    numbers = np.array([r.scores[0].number for r in scored])
    ids = [r.record_id for r in scored]
    reference = stats.summarize(numbers, binary=False, clusters=ids)
    score = summaries["g.score"]
    assert (score.n, score.mean, score.std, score.ci.low, score.ci.high) == (
        reference.n, reference.mean, reference.std, reference.ci_low, reference.ci_high)
    assert score.clusters == len(IDS)
    assert (score.skipped, score.errors, score.infra_errors, score.cancelled) == (1, 1, 1, 1)
    passed = [r.scores[1].passed for r in scored]
    n = np.full(len(IDS), 3)
    c = np.array([sum(passed[i:i + 3]) for i in range(0, len(passed), 3)])
    pass3 = stats.summarize_pass_at_k(n, c, 3)
    assert summaries["g.passed.pass@3"].mean == pass3.mean
    assert summaries["g.passed.pass@3"].n == len(IDS)


def test_outcome_counts_cover_every_result_added() -> None:
    builder = SummaryBuilder([graded.bind(alias="g")])
    builder.add(_results(4, 2))
    assert builder.outcome_counts() == {
        OUTCOME_SCORED: 2 * len(IDS) + 1, OUTCOME_SKIPPED: 1, OUTCOME_ERROR: 1, OUTCOME_CANCELLED: 1}


def test_one_scored_value_is_summarized_as_its_statistics_say() -> None:
    """An Evaluate of one record: a Wilson interval for the pass, no interval for the number (t needs two)."""
    for value, passed in ((2.5, True), (-1.0, False)):
        result = EvaluationResult(record_id="only", evaluator="g", outcome=OUTCOME_SCORED)
        result.scores.add(name="score", number=value)
        result.scores.add(name="passed", passed=passed)
        summaries = {s.metric: s for s in summarize_results([result], [graded.bind(alias="g")])}
        wilson = stats.summarize(np.array([1.0 if passed else 0.0]), binary=True)
        flag = summaries["g.passed"]
        assert (flag.n, flag.mean, flag.ci.low, flag.ci.high, flag.ci.method) == (
            1, wilson.mean, wilson.ci_low, wilson.ci_high, "wilson")
        assert (summaries["g.score"].n, summaries["g.score"].mean) == (1, value)
        assert not summaries["g.score"].HasField("ci") or summaries["g.score"].ci.method == ""
        assert set(summaries) == {"g.score", "g.passed"}  # one trial: no pass@k


def test_a_structured_metric_reads_as_one_in_the_table_not_as_nothing_scored() -> None:
    # The confusion matrix is a structured value: the table says where to read it instead of "n 0, mean —", which
    # reads as if nothing had been evaluated; a number metric's row is unchanged beside it.
    rows = [{"id": f"r{i}", "output": {"row": {"prediction": "a" if i % 3 else "b"}},
             "reference": {"row": {"prediction": "a"}}} for i in range(30)]
    results = evalsi.evaluate(rows, ["confusion-matrix", "correct"])
    table = {row["metric"]: row for row in map(summary_row, results.summaries.values())}
    assert (table["confusion-matrix"]["n"], table["confusion-matrix"]["mean"]) == ("—", "see results (structured)")
    assert (table["correct"]["n"], table["correct"]["mean"]) == ("30", "0.667")
    (matrix,) = [r for r in results if r.evaluator == "confusion-matrix"]
    assert matrix.scores[0].WhichOneof("value") == "structured"
