"""evalsi.evaluate end to end, with every reported figure checked against scipy/statsmodels."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
import statsmodels.api as sm
from statsmodels.stats.proportion import proportion_confint

import evalsi
from evalsi import Output, evaluator
from evalsi.errors import BadInputError
from evalsi.stats import DEFAULT_BOOTSTRAP_RESAMPLES

ROWS = [
    {"id": f"q{i}", "output": "yes" if i % 3 else "no", "reference": "yes", "doc": f"d{i // 4}", "score": (i * 7) % 10}
    for i in range(24)
]


@evaluator("test/score", requires=["metadata.score"], outputs=[Output("value", "number", min=0, max=10)])
def score_of(record) -> float:
    return record.metadata["score"].number_value


@evaluator("test/label", requires=["output"], outputs=[Output("label", "label")])
def label_of(record) -> str:
    return record.output.text


def test_pass_fail_metric_uses_wilson() -> None:
    results = evalsi.evaluate(ROWS, ["exact-match"])
    summary = results.metric("exact-match")
    passed = sum(1 for r in ROWS if r["output"] == "yes")
    low, high = proportion_confint(passed, len(ROWS), alpha=0.05, method="wilson")
    assert summary.n == 24 and summary.mean == pytest.approx(passed / 24)
    assert (summary.ci.low, summary.ci.high, summary.ci.method) == (pytest.approx(low), pytest.approx(high), "wilson")
    assert summary.std == pytest.approx(np.std([r["output"] == "yes" for r in ROWS], ddof=1))


def test_numeric_metric_uses_student_t_at_the_requested_level() -> None:
    results = evalsi.evaluate(ROWS, [score_of], confidence=0.9)
    summary = results.metric("score")
    values = np.array([r["score"] for r in ROWS], dtype=float)
    low, high = scipy.stats.t.interval(0.9, len(values) - 1, loc=values.mean(), scale=scipy.stats.sem(values))
    assert summary.ci.method == "t" and summary.ci.level == pytest.approx(0.9)
    assert (summary.ci.low, summary.ci.high) == (pytest.approx(low), pytest.approx(high))


def test_cluster_by_gives_the_cluster_robust_interval() -> None:
    results = evalsi.evaluate(ROWS, [score_of], cluster_by="doc")
    summary = results.metric("score")
    values = np.array([r["score"] for r in ROWS], dtype=float)
    groups = np.array([int(r["doc"][1:]) for r in ROWS])
    fit = sm.OLS(values, np.ones(len(values))).fit(
        cov_type="cluster", cov_kwds={"groups": groups, "use_correction": True, "df_correction": True}, use_t=True
    )
    low, high = fit.conf_int(0.05)[0]
    assert summary.ci.method == "cluster-t" and summary.clusters == 6
    assert (summary.ci.low, summary.ci.high) == (pytest.approx(low), pytest.approx(high))


def test_trials_give_pass_at_k_and_pass_hat_k_and_cluster_the_plain_metric() -> None:
    outcomes = {"a": [1, 1, 1], "b": [1, 0, 0], "c": [0, 0, 0], "d": [1, 1, 0]}
    rows = [
        {"id": sample, "trial": t, "output": "yes" if ok else "no", "reference": "yes"}
        for sample, trials in outcomes.items()
        for t, ok in enumerate(trials)
    ]
    summaries = evalsi.evaluate(rows, ["exact-match"]).summaries
    assert summaries["exact-match"].ci.method == "korn-graubard" and summaries["exact-match"].clusters == 4
    from math import comb

    per_sample_at = [1 - comb(3 - sum(v), 3) / comb(3, 3) for v in outcomes.values()]
    per_sample_hat = [comb(sum(v), 3) / comb(3, 3) for v in outcomes.values()]
    assert summaries["exact-match.pass@3"].mean == pytest.approx(np.mean(per_sample_at))
    assert summaries["exact-match.pass^3"].mean == pytest.approx(np.mean(per_sample_hat))
    assert summaries["exact-match.pass@3"].k == 3
    # Clopper-Pearson over the four samples (each pass@3 here is 0 or 1: three of four samples passed once).
    low, high = proportion_confint(3, 4, alpha=0.05, method="beta")
    assert (summaries["exact-match.pass@3"].ci.low, summaries["exact-match.pass@3"].ci.high) == (
        pytest.approx(low), pytest.approx(high))


def test_bootstrap_is_seeded_and_labels_are_counts_and_shares() -> None:
    first = evalsi.evaluate(ROWS, [score_of, label_of], interval="bootstrap", seed=7).summaries
    second = evalsi.evaluate(ROWS, [score_of, label_of], interval="bootstrap", seed=7).summaries
    assert first["score"].ci.method == "bootstrap"
    assert (first["score"].ci.low, first["score"].ci.high) == (second["score"].ci.low, second["score"].ci.high)
    labels = first["label"].labels
    assert labels["yes"].count == 16 and labels["no"].count == 8
    assert labels["yes"].share == pytest.approx(16 / 24)
    low, high = proportion_confint(16, 24, method="wilson")
    assert (labels["yes"].ci.low, labels["yes"].ci.high) == (pytest.approx(low), pytest.approx(high))


def test_undefined_figures_are_absent_not_nan() -> None:
    summary = evalsi.evaluate([{"output": "a", "reference": "a"}], [score_of, "exact-match"]).summaries
    assert summary["score"].n == 0 and not summary["score"].HasField("mean")
    assert summary["score"].skipped == 1
    one = summary["exact-match"]
    assert one.n == 1 and one.mean == 1.0 and not one.HasField("std")


def test_results_round_trip_and_views(tmp_path: Path) -> None:
    results = evalsi.evaluate(ROWS, ["exact-match", score_of], name="demo")
    saved = results.save(tmp_path / "r.json")
    loaded = evalsi.EvaluationResults.load(saved)
    assert loaded.run == results.run
    assert "| exact-match | 24 |" in results.table("md")
    assert "demo" in results.table()
    frame = results.to_pandas()
    assert set(frame["evaluator"]) == {"exact-match", "score"} and len(frame) == 48
    assert (
        results.run.manifest.dataset_version and results.run.manifest.evaluators[0].ref == "builtin/exact-match@1.0.0"
    )
    with pytest.raises(KeyError, match="metrics: exact-match, score"):
        results.metric("nope")


async def test_evaluate_works_inside_a_running_event_loop() -> None:
    assert asyncio.get_running_loop()
    results = evalsi.evaluate(ROWS[:3], ["exact-match"])  # a notebook cell does this
    assert results.metric("exact-match").n == 3


def test_params_and_aliases_and_their_errors() -> None:
    specs = [
        {"ref": "builtin/contains", "alias": "says-yes", "params": {"values": ["yes"]}},
        {"ref": "contains", "alias": "says-no", "params": {"values": ["no"]}},
    ]
    summaries = evalsi.evaluate(ROWS, specs).summaries
    assert summaries["says-yes"].mean + summaries["says-no"].mean == pytest.approx(1.0)
    with pytest.raises(BadInputError, match="alias 'contains' is used twice"):
        evalsi.evaluate(ROWS, ["contains", "builtin/contains"], params={"contains": {"values": ["x"]}})
    with pytest.raises(BadInputError, match="--param given for fuzzy-match"):
        evalsi.evaluate(ROWS, ["exact-match"], params={"fuzzy-match": {"threshold": 0.5}})
    with pytest.raises(BadInputError, match="judge 'strict', which is not configured"):
        evalsi.evaluate(ROWS, [{"ref": "llm-judge", "judge": "strict"}], judge={"model": "m"})


def test_dataset_scope_metric_gets_a_bootstrap_interval() -> None:
    @evaluator(
        "test/accuracy",
        scope="dataset",
        requires=["output", "reference"],
        outputs=[Output("accuracy", "number", min=0, max=1)],
        mapper=lambda record: record.output.text == record.reference.text,
    )
    def accuracy(matches: list[bool]) -> float:
        return sum(matches) / len(matches)

    results = evalsi.evaluate(ROWS, [accuracy])
    summary = results.metric("accuracy")
    assert summary.n == 24 and summary.mean == pytest.approx(16 / 24)
    assert summary.ci.method == "bootstrap" and summary.ci.low < 16 / 24 < summary.ci.high
    # The documented default (2,000 resamples) is what runs, not a silently lower cap.
    (score,) = [s for r in results.results for s in r.scores if s.name == "accuracy"]
    assert score.metadata["resamples"].number_value == DEFAULT_BOOTSTRAP_RESAMPLES == 2000
    explicit = evalsi.evaluate(ROWS, [accuracy], bootstrap_resamples=3000).results
    assert [s.metadata["resamples"].number_value for r in explicit for s in r.scores] == [3000]
