"""`evalsi report` and `evalsi analyze slice` on run ids of a real served stack (separate processes over NATS):
the figures are the server's summaries and `evalsi compare --server`'s."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from report_helpers import evalsi, table_rows

import evalsi as sdk
from evalsi.reports.markdown import md_text
from evalsi.runs.results import _fmt
from evalsi.testing.stack import Stack
from evalsi.v1alpha1.run_pb2 import RUN_STATE_SUCCEEDED

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "runs" / "qa-outputs.yaml"
QA_IMPROVED = ROOT / "examples" / "quickstart" / "qa_improved.jsonl"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, str, str]]:
    """A stack holding two runs of the shipped example: the baseline on qa.jsonl, the candidate on its improved
    outputs (uploaded by the client, as `evalsi run --server` does)."""
    stack = Stack(tmp_path_factory.mktemp("report-stack"), datasets_dir=ROOT / "examples").start()
    try:
        document = yaml.safe_load(SPEC.read_text())
        document["metadata"]["name"] = "qa-improved"
        document["spec"]["dataset"]["path"] = str(QA_IMPROVED)
        with sdk.Client(stack.grpc) as client:
            baseline = client.runs.create(SPEC).wait()
            candidate = client.runs.create(document).wait()
        assert baseline.state == candidate.state == RUN_STATE_SUCCEEDED, stack.logs()
        yield stack, baseline.id, candidate.id
    finally:
        stack.stop()


def test_a_served_comparison_is_evalsi_compare_on_the_server(served: tuple[Stack, str, str]) -> None:
    stack, baseline, candidate = served
    server = ["--server", stack.http, "--project", "quickstart"]
    done = evalsi("report", candidate, "--compare", baseline, "--format", "md", *server)
    assert done.returncode == 0, done.stderr
    compared = evalsi("compare", baseline, candidate, "--format", "json", *server)
    metrics = json.loads(compared.stdout)["metrics"]
    rows = table_rows(done.stdout, "metric | pairs")
    assert len(rows) == len(metrics)
    assert {"exact-match", "fuzzy-match.passed", "cost.usd"} <= {m["metric"] for m in metrics}
    for m in metrics:
        _, pairs, base, cand, diff, ci, p, _ = rows[md_text(m["metric"])]
        assert (pairs, base, cand, diff) == (m["nPairs"], _fmt(m.get("meanA")), _fmt(m.get("meanB")),
                                             _fmt(m.get("diff")))
        if "ci" in m and "low" in m["ci"]:
            assert ci == f"[{_fmt(m['ci']['low'])}, {_fmt(m['ci']['high'])}]"
        assert p == _fmt(m.get("pValueAdjusted", m.get("pValue")))
    # The candidate's own summaries and gates, as the server has them.
    with sdk.Client(stack.grpc) as client:
        run = client.runs.get(candidate, project="quickstart")
    summary_rows = table_rows(done.stdout, "metric | n")
    for summary in run.summaries:
        assert summary_rows[md_text(summary.metric)][1:3] == [str(summary.n), _fmt(summary.mean)]
    assert f"all {len(run.gates)} gates passed" in done.stdout and len(run.gates) == 4


def test_a_served_run_in_html_with_its_records_from_the_server(served: tuple[Stack, str, str],
                                                                tmp_path: Path) -> None:
    stack, _, candidate = served
    out = tmp_path / "served.html"
    done = evalsi("report", candidate, "--server", stack.grpc, "--project", "quickstart", "-o", str(out),
                  "--max-records", "40")
    assert done.returncode == 0, done.stderr
    html = out.read_text()
    # Input, output and reference of every record, read from the server (ListRunRecords), none from a file.
    assert "30 of 30 records" in html and "not in the data" not in html and "--data" not in html
    assert "What is 12 * 12?" in html and "<script" not in html
    with_data = evalsi("report", candidate, "--server", stack.grpc, "--project", "quickstart", "--format", "html",
                       "--data", str(QA_IMPROVED))
    assert with_data.returncode == 0 and "What is 12 * 12?" in with_data.stdout
    missing = evalsi("report", "no-such-run", "--server", stack.grpc, "--project", "quickstart")
    assert missing.returncode == 2 and "no-such-run" in missing.stderr and "--project" in missing.stderr


def test_analyze_slice_reads_run_ids(served: tuple[Stack, str, str]) -> None:
    stack, baseline, candidate = served
    done = evalsi("analyze", "slice", "exact-match", "--by", "run", baseline, candidate, "--server", stack.grpc,
                  "--project", "quickstart", "--format", "json")
    assert done.returncode == 0, done.stderr
    slices = {s["value"]: s for s in json.loads(done.stdout)["slices"]}
    with sdk.Client(stack.grpc) as client:
        for run_id in (baseline, candidate):
            run = client.runs.get(run_id, project="quickstart")
            summary = next(s for s in run.summaries if s.metric == "exact-match")
            got = slices[run.name]
            assert (got["n"], got["low"], got["high"]) == (summary.n, pytest.approx(summary.ci.low),
                                                           pytest.approx(summary.ci.high))
    # Metadata from the server's records, or from --data: the same slices.
    by_topic = [evalsi("analyze", "slice", "exact-match", "--by", "topic", candidate, "--server", stack.grpc,
                       "--project", "quickstart", "--format", "json", *extra) for extra in ([], ["--data",
                                                                                            str(QA_IMPROVED)])]
    assert [done.returncode for done in by_topic] == [0, 0], by_topic[0].stderr + by_topic[1].stderr
    assert by_topic[0].stdout == by_topic[1].stdout
    topics = {s["value"]: s["n"] for s in json.loads(by_topic[0].stdout)["slices"]}
    assert sum(topics.values()) == 30 and topics["science"] == 10
