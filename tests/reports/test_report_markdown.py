"""The Markdown report: the run's own figures and `evalsi compare`'s, gates first, inert data, and always under
GitHub's comment limit."""

from __future__ import annotations

import json
import re
from pathlib import Path

from report_helpers import evalsi, huge_run, table_rows

from evalsi.reports import COMMENT_LIMIT, build_report, render_markdown
from evalsi.reports.markdown import md_text
from evalsi.runs.results import EvaluationResults, _fmt
from evalsi.v1alpha1.run_pb2 import GateResult, Run
from evalsi.v1alpha1.score_pb2 import (
    OUTCOME_SCORED,
    VALUE_KIND_BOOLEAN,
    VALUE_KIND_NUMBER,
    EvaluationResult,
    MetricSummary,
    Score,
)


def test_the_metric_table_is_the_run_summaries(saved: dict[str, Path]) -> None:
    run = EvaluationResults.load(saved["candidate"]).run
    markdown = render_markdown(build_report(run))
    rows = table_rows(markdown, "metric")
    assert len(run.summaries) == 3
    for summary in run.summaries:
        _metric, n, mean, ci, skipped, errors = rows[md_text(summary.metric)]
        assert (n, mean, skipped, errors) == (str(summary.n), _fmt(summary.mean), str(summary.skipped), "0")
        assert ci == f"[{_fmt(summary.ci.low)}, {_fmt(summary.ci.high)}]"


def test_the_delta_table_is_evalsi_compare_baseline_then_candidate(saved: dict[str, Path]) -> None:
    done = evalsi("report", str(saved["candidate"]), "--compare", str(saved["baseline"]), "--format", "md")
    assert done.returncode == 0, done.stderr
    compared = evalsi("compare", str(saved["baseline"]), str(saved["candidate"]), "--format", "json")
    metrics = json.loads(compared.stdout)["metrics"]
    rows = table_rows(done.stdout, "metric | pairs")
    verdicts = {"better": "▲ better", "worse": "**▼ worse**", "no significant difference": "no significant change"}
    assert len(rows) == len(metrics) == 3
    for m in metrics:
        _name, pairs, baseline, candidate, diff, ci, p, verdict = rows[md_text(m["metric"])]
        assert (pairs, baseline, candidate, diff) == (m["nPairs"], _fmt(m["meanA"]), _fmt(m["meanB"]), _fmt(m["diff"]))
        assert ci == f"[{_fmt(m['ci']['low'])}, {_fmt(m['ci']['high'])}]"
        assert p == _fmt(m["pValueAdjusted"]) and verdict == verdicts[m["verdict"]]
    # exact-match improved on 6 records (q16, q23, q24, q27, q28, q29 went from fail to pass), none got worse.
    assert "better" in {m["verdict"] for m in metrics}
    assert "10 records changed outcome (0 worse, 10 better)" in done.stdout
    assert "- ▲ `q16` exact-match: fail → pass" in done.stdout


def test_failed_gates_come_first_and_the_exit_is_still_0(saved: dict[str, Path], tmp_path: Path) -> None:
    document = json.loads(saved["baseline"].read_text())
    document["gates"] = [
        {"expression": "metric('exact-match').mean >= 0.99", "message": "metric('exact-match').mean = 0.5667 < 0.99"},
        {"expression": "metric('fuzzy-match.passed').mean >= 0.5", "passed": True},
    ]
    gated = tmp_path / "gated.json"
    gated.write_text(json.dumps(document))
    done = evalsi("report", str(gated), "--format", "md")
    assert done.returncode == 0, done.stderr
    head = done.stdout.split("### Metrics")[0]
    assert head.startswith("## ❌ ")
    assert "### ❌ 1 of 2 gates failed" in head
    failed = "- ❌ **failed** `metric('exact-match').mean >= 0.99` — metric('exact-match').mean = 0.5667 &lt; 0.99"
    assert failed in head
    assert "- ✅ `metric('fuzzy-match.passed').mean >= 0.5`" in head
    # The records that failed a check are listed with the evaluator's reason.
    assert "13 of 30 records failed a check or errored" in done.stdout


def test_data_in_the_markdown_is_inert() -> None:
    run = Run(id="r", name="x")
    run.summaries.append(MetricSummary(metric="ok|metric", evaluator="ok", kind=VALUE_KIND_BOOLEAN, n=1, mean=0.0))
    run.results.append(EvaluationResult(
        record_id="r`1", evaluator="ok", outcome=OUTCOME_SCORED,
        scores=[Score(name="passed", passed=False,
                      explanation="<script>alert(1)</script> | @octocat #77 ![x](https://evil.example/x.png) [y](z)"
                                  "\nnext")],
    ))
    run.gates.append(GateResult(expression="metric('ok').mean > 0`", passed=False, message="<img src=x> @team"))
    markdown = render_markdown(build_report(run, title="<b>t</b>"))
    assert "<script" not in markdown and "<img" not in markdown and "<b>" not in markdown
    # No mention or issue reference: a word joiner follows the sign (GitHub decodes entities before linking).
    assert "@octocat" not in markdown and "@team" not in markdown and "#77" not in markdown
    assert "@\u2060octocat" in markdown and "#\u206077" in markdown
    # No image or link survives: their brackets are escaped.
    assert not re.search(r"!\[", markdown) and not re.search(r"(?<!\\)\]\(", markdown)
    assert r"!\[x\](https" in markdown
    assert "| ok&#124;metric | 1 |" in markdown  # a pipe cannot add a column
    assert "`r'1`" in markdown  # a backtick cannot end the code span early
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in markdown and "next" in markdown


def test_a_huge_run_fits_a_comment_and_says_what_it_left_out() -> None:
    baseline, candidate = huge_run(20_000, "base", True), huge_run(20_000, "cand", False)
    report = build_report(candidate, baseline=baseline, max_records=20_000)
    markdown = render_markdown(report)
    assert len(markdown) <= COMMENT_LIMIT
    assert "20000 records changed outcome (20000 worse, 0 better)" in markdown
    assert "20000 of 20000 records failed a check or errored" in markdown
    assert re.search(r"- … and \d+ more \(the HTML report lists them\)", markdown)
    # Every metric and the comparison are still there: record lists are cut first.
    assert "| check | 20000 |" in markdown and "| check | 20000 | 1.000 | 0.000 |" in markdown


def test_thousands_of_metrics_cut_the_tables_and_say_so() -> None:
    run = Run(id="many")
    for i in range(5000):
        run.summaries.append(MetricSummary(metric=f"metric-{i:05d}-{'z' * 30}", evaluator="e", n=10, mean=0.5,
                                           kind=VALUE_KIND_NUMBER))
    markdown = render_markdown(build_report(run))
    assert len(markdown) <= COMMENT_LIMIT
    assert re.search(r"_\d+ more metrics left out to fit a comment_", markdown)
    assert "| metric-00000-" in markdown
