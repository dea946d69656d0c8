"""compare_runs: one test per metric, p-values adjusted across the metrics, verdicts that read the adjusted p."""

from __future__ import annotations

import pytest
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
from statsmodels.stats.multitest import multipletests

from evalsi.runs.compare import compare_runs
from evalsi.v1alpha1.run_pb2 import Run
from evalsi.v1alpha1.score_pb2 import (
    OUTCOME_SCORED,
    VALUE_KIND_BOOLEAN,
    EvaluationResult,
    MetricSummary,
    Score,
)

METRICS = ("m1", "m2", "m3")


def _run(run_id: str, passes: dict[str, list[bool]]) -> Run:
    run = Run(id=run_id)
    for metric in METRICS:
        run.summaries.append(MetricSummary(metric=metric, evaluator=metric, kind=VALUE_KIND_BOOLEAN,
                                           higher_is_better=True))
        for i, passed in enumerate(passes[metric]):
            run.results.append(EvaluationResult(record_id=f"r{i}", evaluator=metric, outcome=OUTCOME_SCORED,
                                                scores=[Score(passed=passed)]))
    return run


# m1: 6 records flip to fail (McNemar p = 0.014); m2: 5 flip to fail, 1 to pass (p = 0.10); m3: unchanged.


def _pairs() -> tuple[Run, Run]:
    a = _run("a", {"m1": [True] * 40, "m2": [True] * 39 + [False], "m3": [True] * 40})
    b = _run("b", {"m1": [False] * 6 + [True] * 34, "m2": [False] * 5 + [True] * 35, "m3": [True] * 40})
    return a, b


def test_verdicts_read_holm_adjusted_p_values() -> None:
    a, b = _pairs()
    raw = compare_runs(a, b, adjust="none")
    adjusted = compare_runs(a, b)
    assert adjusted.adjust == "holm" and raw.adjust == "none"
    by_metric = {m.metric: m for m in raw.metrics}
    assert by_metric["m1"].test == "mcnemar"
    assert by_metric["m1"].p_value == pytest.approx(sm_mcnemar([[34, 6], [0, 0]], exact=False,
                                                                correction=False).pvalue, rel=1e-12)
    expected = multipletests([m.p_value for m in raw.metrics], method="holm")[1]
    assert [m.p_value_adjusted for m in adjusted.metrics] == pytest.approx(list(expected), abs=1e-15)
    # Unadjusted, m1's interval excludes zero and its p is below 0.05: worse.
    assert by_metric["m1"].verdict == "worse" and by_metric["m1"].ci.high < 0
    assert [m.verdict for m in raw.metrics] == ["worse", "no significant difference", "no significant difference"]
    # Holm multiplies m1's p, the smallest of three, by three (0.043): still worse.
    assert expected[0] == pytest.approx(3 * by_metric["m1"].p_value) and expected[0] < 0.05
    assert [m.verdict for m in adjusted.metrics] == [m.verdict for m in raw.metrics]


def test_an_adjusted_p_above_alpha_turns_a_raw_worse_into_no_significant_difference() -> None:
    a, b = _pairs()
    # At 99% confidence m1's raw p (0.014) is not significant anyway; at 95% with a family of 3 under Holm it is
    # 0.043. Five metrics instead of three push Holm's factor to five: 0.072, not significant.
    for metric in ("m4", "m5"):
        for run in (a, b):
            run.summaries.append(MetricSummary(metric=metric, evaluator=metric, kind=VALUE_KIND_BOOLEAN,
                                               higher_is_better=True))
            run.results.extend(EvaluationResult(record_id=f"r{i}", evaluator=metric, outcome=OUTCOME_SCORED,
                                                scores=[Score(passed=True)]) for i in range(40))
    raw = {m.metric: m for m in compare_runs(a, b, adjust="none").metrics}
    holm = {m.metric: m for m in compare_runs(a, b, adjust="holm").metrics}
    assert raw["m1"].verdict == "worse" and raw["m1"].p_value < 0.05
    assert holm["m1"].p_value_adjusted > 0.05 and holm["m1"].verdict == "no significant difference"
    # The interval is the test's own, at the comparison's level: it still excludes zero, and the verdict says why
    # it is not "worse" through p_value_adjusted.
    assert holm["m1"].ci.high < 0 and holm["m1"].p_value == raw["m1"].p_value


def test_runs_clustered_by_a_key_are_compared_clustered_by_it() -> None:
    import numpy as np
    import statsmodels.api as sm

    import evalsi

    rng = np.random.default_rng(4)
    docs = [f"d{i // 5}" for i in range(40)]  # eight documents of five questions each
    shift = {doc: rng.normal(0, 0.3) for doc in set(docs)}
    rows_a = [{"id": f"q{i}", "output": f"{rng.random():.4f}", "doc": docs[i]} for i in range(40)]
    rows_b = [{**row, "output": f"{float(row['output']) + shift[row['doc']] + rng.normal(0, 0.05):.4f}"}
              for row in rows_a]

    from evalsi.evaluators import Output, evaluator

    @evaluator("test/value", requires=["output"], outputs=[Output("value", "number")])
    def value(record):  # type: ignore[no-untyped-def]
        return float(record.output.text)

    a = evalsi.evaluate(rows_a, [value], cluster_by="doc").run
    b = evalsi.evaluate(rows_b, [value], cluster_by="doc").run
    assert {r.record_id: r.cluster for r in a.results} == {f"q{i}": docs[i] for i in range(40)}
    [metric] = compare_runs(a, b).metrics
    x_a = np.array([float(r["output"]) for r in rows_a])
    x_b = np.array([float(r["output"]) for r in rows_b])
    fit = sm.OLS(x_b - x_a, np.ones(40)).fit(cov_type="cluster", cov_kwds={
        "groups": np.array([int(d[1:]) for d in docs]), "use_correction": True, "df_correction": True}, use_t=True)
    assert metric.test == "cluster-paired-t" and metric.ci.method == "cluster-t"
    assert (metric.ci.low, metric.ci.high) == pytest.approx(tuple(fit.conf_int(0.05)[0]), rel=1e-6)
    assert metric.p_value == pytest.approx(fit.pvalues[0], rel=1e-6)
