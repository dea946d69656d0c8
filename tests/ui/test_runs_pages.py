"""The runs, run and compare pages in a real Chromium against a served stack holding real runs made through the
public API: two graded-outputs runs of the quickstart (baseline and improved), an agent run of the built-in
harness on a scripted model (trajectories with tool calls, two trials), and a run held running by a model that
answers only when the test lets it (live updates). Also ListRunRecords, the API the record drill-down reads."""

from __future__ import annotations

import json
import os
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from browser import assert_accessible, wait_for_page
from playwright.sync_api import Page, expect

import evalsi
from evalsi.runs.spec import load_eval_run
from evalsi.testing.stack import Stack
from evalsi.testing.threaded import ThreadedProvider
from evalsi.v1alpha1.run_pb2 import RUN_STATE_SUCCEEDED, EvalRun
from evalsi.v1alpha1.run_service_pb2 import ListRunRecordsRequest
from evalsi.v1alpha1.run_service_pb2_grpc import RunServiceStub

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
AGENTS = EXAMPLES / "agents"


@dataclass
class Served:
    stack: Stack
    baseline: str
    improved: str
    harness: str
    release_slow: threading.Event

    @property
    def ui(self) -> str:
        return self.stack.http + "/ui/"


def _qa_run(name: str, dataset: str, variant: str) -> dict[str, Any]:
    return {
        "apiVersion": "evals.si/v1alpha1", "kind": "EvalRun",
        "metadata": {"name": name, "labels": {"team": "search", "variant": variant}},
        "spec": {
            "target": {"outputs": {}},
            "dataset": {"path": dataset},
            "evaluators": [{"ref": "builtin/exact-match"},
                           {"ref": "builtin/fuzzy-match", "params": {"threshold": 0.8}},
                           {"ref": "builtin/latency"}],
            "gates": ["metric('exact-match').mean >= 0.6"],
        },
    }


def _harness_run() -> EvalRun:
    run = load_eval_run(AGENTS / "agent-harness.yaml")
    run.spec.dataset.path = "agents/weather-tasks.jsonl"  # under the stack's datasets directory (examples/)
    run.spec.target.model.ClearField("connector")
    run.spec.target.model.ClearField("base_url")
    run.spec.target.model.connection = "weather-model"  # on a server the configuration names the endpoint
    del run.metadata.labels["evals.si/project"]  # the example's project is quickstart; these pages show default's
    run.metadata.project = ""
    return run


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    import sys

    sys.path.insert(0, str(AGENTS))
    from weather_model import reply

    release = threading.Event()

    def slow_reply(body: dict[str, Any]) -> str:
        release.wait(120)  # the live-update test lets it answer
        return "Paris"

    old_path = os.environ.get("PYTHONPATH")
    # The harness worker imports the spec's tool (weather_tools) from the examples, as the embedded run does.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(AGENTS), old_path]))
    try:
        with ThreadedProvider(reply) as model, ThreadedProvider(slow_reply) as slow:
            stack = Stack(tmp_path_factory.mktemp("ui-runs"), datasets_dir=EXAMPLES,
                          judges={"weather-model": {"base_url": model.base_url, "model": "fake-model"},
                                  "slow-model": {"base_url": slow.base_url, "model": "slow-model"}},
                          harness_tools=["weather_tools:get_weather"]).start()
            try:
                with evalsi.Client(stack.grpc) as client:
                    runs = [client.runs.create(spec).wait() for spec in (
                        _qa_run("qa-baseline", "quickstart/qa.jsonl", "baseline"),
                        _qa_run("qa-improved", "quickstart/qa_improved.jsonl", "improved"),
                        _harness_run())]
                for run in runs:
                    assert run.state == RUN_STATE_SUCCEEDED, run.message + stack.logs()
                yield Served(stack, runs[0].id, runs[1].id, runs[2].id, release)
            finally:
                release.set()
                stack.stop()
    finally:
        sys.path.remove(str(AGENTS))
        if old_path is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old_path


def _call(served: Served, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(
        served.stack.http + path, data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _api(served: Served, path: str, body: dict[str, Any] | None = None) -> Any:
    status, answer = _call(served, path, body)
    assert status == 200, f"{path}: {status} {answer}"
    return answer


def _results(served: Served, run_id: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    token = ""
    while True:
        page = _api(served, f"/v1alpha1/runs/{run_id}/results?pageSize=500&pageToken={token}")
        out.extend(page.get("results", []))
        token = page.get("nextPageToken", "")
        if not token:
            return out


def _open(page: Page, url: str) -> None:
    page.goto(url)
    wait_for_page(page)


# --- ListRunRecords (what the record drill-down reads) ---


def test_list_run_records_reads_the_records_as_evaluated(served: Served) -> None:
    base = f"/v1alpha1/runs/{served.baseline}/records"
    one = _api(served, base + "?recordIds=q02")["records"]
    assert [(r["id"], r["input"]["text"], r["output"]["text"], r["reference"]["text"]) for r in one] == [
        ("q02", "What is 12 * 12?", "144.", "144")]
    dataset = [json.loads(line)["id"] for line in (EXAMPLES / "quickstart" / "qa.jsonl").read_text().splitlines()]
    ids: list[str] = []
    token = ""
    while True:
        page = _api(served, f"{base}?pageSize=7&pageToken={token}")
        assert len(page["records"]) <= 7
        ids.extend(r["id"] for r in page["records"])
        token = page.get("nextPageToken", "")
        if not token:
            break
    assert ids == dataset  # every record once, in the dataset's order
    # A generating target: its outputs of the trial asked for, trajectories included.
    harness = _api(served, f"/v1alpha1/runs/{served.harness}/records?trial=1&recordIds=paris")["records"]
    steps = harness[0]["trajectory"]["steps"]
    assert any(s.get("toolCall", {}).get("name") == "get_weather" for s in steps)
    assert harness[0]["output"]["text"].startswith("It is ")
    for bad, field in ((f"/v1alpha1/runs/{served.harness}/records?trial=2", "trial: 2"),
                       (f"{base}?trial=1", "trial: 1"), (f"{base}?pageToken=nope", "page_token")):
        status, answer = _call(served, bad)
        assert status == 400 and field in answer["message"], answer


def test_list_run_records_over_grpc(served: Served) -> None:
    with grpc.insecure_channel(served.stack.grpc.removeprefix("grpc://")) as channel:
        answer = RunServiceStub(channel).ListRunRecords(
            ListRunRecordsRequest(id=served.harness, trial=0, record_ids=["lisbon", "absent"]), timeout=30)
    assert [r.id for r in answer.records] == ["lisbon"]
    assert answer.records[0].input.text == "What is the weather in Lisbon?"
    assert any(step.tool_call.name == "get_weather" for step in answer.records[0].trajectory.steps)


# --- the runs list ---


def test_runs_list_filters_are_in_the_hash_and_reach_the_api(served: Served, page: Page) -> None:
    _open(page, served.ui + "#/runs")
    rows = page.locator("table tbody tr")
    expect(rows).to_have_count(3)
    assert {page.locator("tbody th a").nth(i).inner_text() for i in range(3)} == {
        "qa-baseline", "qa-improved", "weather-harness"}
    page.locator("#runs-labels").fill("variant=improved")
    page.locator("#runs-apply").click()
    page.wait_for_url("**#/runs?labels=variant%3Dimproved")
    wait_for_page(page)
    expect(rows).to_have_count(1)
    assert page.locator("tbody th").inner_text() == "qa-improved"
    # The link alone reproduces the list (a fresh load of the same hash).
    _open(page, served.ui + "#/runs?name=weather&state=RUN_STATE_SUCCEEDED")
    expect(rows).to_have_count(1)
    assert page.locator("#runs-name").input_value() == "weather"
    assert page.locator("#runs-state").input_value() == "RUN_STATE_SUCCEEDED"
    _open(page, served.ui + "#/runs?state=RUN_STATE_FAILED")
    assert "No runs match" in page.locator("tbody").inner_text()
    # Dates go to ListRuns (createdAfter, createdBefore); tests/ui/test_runs_by_date.py pages through them.
    _open(page, served.ui + "#/runs?to=2000-01-01")
    assert "No runs match these filters." in page.locator("tbody").inner_text()
    _open(page, served.ui + "#/runs?from=2000-01-01")
    expect(rows).to_have_count(3)
    assert page.locator("caption").inner_text() == "Runs of project default, created from 2000-01-01 (UTC)"
    assert_accessible(page)


def test_runs_list_pages_by_the_api_token(served: Served, page: Page) -> None:
    _open(page, served.ui + "#/runs")
    # 25 a page; with three runs there is no next page.
    assert page.locator("#runs-next").count() == 0 and "Last page." in page.locator("main").inner_text()
    first = _api(served, "/v1alpha1/runs?pageSize=2")
    _open(page, served.ui + f"#/runs?after={first['nextPageToken']}")
    expect(page.locator("table tbody tr")).to_have_count(1)
    assert page.locator("main a", has_text="First page").count() == 1


def test_runs_list_by_keyboard(served: Served, page: Page) -> None:
    _open(page, served.ui + "#/runs?labels=variant%3Dbaseline")
    row = page.locator("tbody tr").first
    row.focus()
    assert page.evaluate("document.activeElement.getAttribute('aria-label')").startswith("Run qa-baseline")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**#/runs/{served.baseline}")
    wait_for_page(page)
    assert page.locator("main h1").inner_text().startswith("qa-baseline")


# --- a run ---


def test_run_page_metrics_gates_manifest_and_distributions(served: Served, page: Page) -> None:
    run = _api(served, f"/v1alpha1/runs/{served.baseline}")
    _open(page, served.ui + f"#/runs/{served.baseline}")
    metrics_table = page.locator("section[aria-labelledby=h-metrics] table")
    for summary in run["summaries"]:
        row = metrics_table.locator("tbody tr", has=page.locator("th", has_text=summary["metric"])).first
        shown = row.locator("td").nth(1).inner_text()
        assert shown == f"{summary['mean']:.3f} [{summary['ci']['low']:.3f}, {summary['ci']['high']:.3f}]"
    # Error bars: a point per metric, and whiskers where the interval is known.
    charts = page.locator("#metric-charts svg")
    assert charts.locator("circle.point").count() == len(run["summaries"])
    assert "exact-match: 0.567 (0.392 to 0.726)" in charts.first.get_attribute("aria-label")
    # Gates and manifest.
    assert "metric('exact-match').mean >= 0.6" in page.locator("#run-gates").inner_text()
    assert "failed" in page.locator("#run-gates .badge").inner_text()  # 0.567 < 0.6
    assert "quickstart/qa.jsonl" in page.locator("#run-manifest").inner_text()
    assert "builtin/exact-match@1.0.0" in page.locator("#run-manifest").inner_text()
    expect(page.locator("#run-budget")).to_contain_text("Tokens")
    # A histogram per scored metric, from the results: exact-match has 17 passes of 30.
    page.locator("#distributions svg").first.wait_for()
    assert page.locator("#distributions svg").count() == len(run["summaries"])
    exact = page.locator("#distributions figure", has_text="exact-match:")
    assert "30 values; 0: 13, 1: 17" in exact.locator("svg").get_attribute("aria-label")
    assert "30 record rows loaded (all)" in page.locator("#records").inner_text()
    assert_accessible(page)
    page.emulate_media(color_scheme="dark")  # the dark theme's contrast too
    expect(page.locator("#theme-toggle")).to_have_attribute("aria-pressed", "true")  # the change event is async
    assert_accessible(page)


def test_record_drill_down_shows_scores_explanations_and_contents(served: Served, page: Page) -> None:
    _open(page, served.ui + f"#/runs/{served.baseline}")
    records = page.locator("#records table tbody tr")
    expect(records).to_have_count(30)
    # Only the records with a failed check (exact-match or fuzzy-match.passed): 13 of 30 fail exact-match.
    failing = {r["recordId"] for r in _results(served, served.baseline)
               if r["outcome"] == "OUTCOME_SCORED" and any(s.get("passed") is False for s in r["scores"])}
    page.locator("#records-show").select_option("failed")
    expect(records).to_have_count(len(failing))
    assert {records.nth(i).locator("th").inner_text() for i in range(len(failing))} == failing
    assert page.url.endswith("?show=failed")
    page.locator("#records-show").select_option("unscored")
    expect(page.locator("#records tbody")).to_contain_text("No records to show")  # none was skipped or errored
    page.locator("#records-show").select_option("all")
    expect(records).to_have_count(30)
    page.locator("#records input[type=search]").fill("q02")
    expect(records).to_have_count(1)
    records.first.click()
    page.wait_for_url(f"**#/runs/{served.baseline}?record=q02")
    detail = page.locator("#record-detail")
    expect(detail.locator("#record-heading")).to_have_text("Record q02")
    expect(detail).to_contain_text("output '144.' != reference '144'")  # exact-match's explanation
    expect(detail.locator("#record-contents")).to_contain_text("What is 12 * 12?")
    assert page.evaluate("document.activeElement.id") == "record-heading"
    assert detail.locator(".record-part[data-part=output] pre").inner_text() == "144."
    assert detail.locator(".record-part[data-part=reference] pre").inner_text() == "144"
    # The link opens the same record.
    _open(page, served.ui + f"#/runs/{served.baseline}?record=q02")
    expect(page.locator("#record-contents")).to_contain_text("What is 12 * 12?")
    assert_accessible(page)
    page.locator("#record-close").click()
    assert page.url.endswith(f"#/runs/{served.baseline}")


def test_agent_record_shows_its_trajectory(served: Served, page: Page) -> None:
    _open(page, served.ui + f"#/runs/{served.harness}?record=paris&trial=1")
    contents = page.locator("#record-contents")
    expect(contents).to_contain_text("Trajectory")
    call = contents.locator("ol.trajectory > li > details.tool-call").first  # a step's own, not its input's
    expect(call.locator("summary")).to_contain_text("tool call: get_weather")
    call.locator("summary").click()
    assert json.loads(call.locator("pre").first.inner_text()) == {"city": "Paris"}
    # Two trials: a row per record and trial; pass@k metrics are in the metric table, not histograms.
    assert page.locator("#records table tbody tr").count() == 2 * 3
    assert "tool-call-accuracy.exact.pass^2" in page.locator("section[aria-labelledby=h-metrics]").inner_text()
    assert_accessible(page)


# --- compare ---


def _flips(served: Served, metric_evaluator: str) -> dict[str, tuple[str, str]]:
    def passes(run_id: str) -> dict[str, str]:
        return {r["recordId"]: ("pass" if r["scores"][0]["passed"] else "fail")
                for r in _results(served, run_id) if r["evaluator"] == metric_evaluator}

    a, b = passes(served.baseline), passes(served.improved)
    return {record: (a[record], b[record]) for record in a if record in b and a[record] != b[record]}


def test_compare_page_differences_and_flips(served: Served, page: Page) -> None:
    comparison = _api(served, "/v1alpha1/runs:compare", {"runA": served.baseline, "runB": served.improved})
    _open(page, served.ui + "#/runs?labels=team%3Dsearch")
    for name in ("qa-baseline", "qa-improved"):
        page.get_by_label(f"Select {name} to compare").check()
    page.locator("#compare-selected").click()
    page.wait_for_url("**#/compare?a=*&b=*")
    wait_for_page(page)
    assert {page.locator("#compare-a").input_value(), page.locator("#compare-b").input_value()} == {
        served.baseline, served.improved}
    # Without the runs list: the form suggests the project's recent runs.
    _open(page, served.ui + "#/compare")
    suggested = page.locator("#recent-runs option")
    assert served.harness in [suggested.nth(i).get_attribute("value") for i in range(suggested.count())]
    assert page.locator("#compare-a").get_attribute("list") == "recent-runs"
    _open(page, served.ui + f"#/compare?a={served.baseline}&b={served.improved}")
    diff = page.locator("section[aria-labelledby=h-diff] table")
    for metric in comparison["metrics"]:
        row = diff.locator("tbody tr", has=page.locator("th", has_text=metric["metric"])).first
        expect(row).to_contain_text(metric["verdict"])
        assert row.locator("td").nth(3).inner_text().startswith(f"{metric['diff']:.3f} [")
    assert page.locator("section[aria-labelledby=h-diff] svg circle.point").count() == len(comparison["metrics"])
    # Flips: exact-match's, computed from both runs' results here, against the page.
    expected = _flips(served, "exact-match")
    assert expected, "the improved quickstart outputs flip some exact-match outcomes"
    flips = page.locator("section[aria-labelledby=h-flips] table tbody tr")
    page.locator("#flip-metric").select_option("exact-match")
    page.wait_for_url("**metric=exact-match*")
    wait_for_page(page)
    flips.first.wait_for()
    shown = {flips.nth(i).locator("th").inner_text(): (flips.nth(i).locator("td").nth(2).inner_text(),
                                                        flips.nth(i).locator("td").nth(3).inner_text())
             for i in range(flips.count())}
    assert shown == expected
    page.locator("#flip-kind").select_option("better")
    page.wait_for_url("**flip=better*")
    wait_for_page(page)
    flips.first.wait_for()
    better = {record for record, (a, b) in expected.items() if (a, b) == ("fail", "pass")}
    assert {flips.nth(i).locator("th").inner_text() for i in range(flips.count())} == better
    assert_accessible(page)
    page.locator("#theme-toggle").click()
    assert_accessible(page)
    # A flip's record opens in its run.
    flips.first.locator("th a").click()
    page.wait_for_url(f"**#/runs/{served.improved}?record=*")
    expect(page.locator("#record-contents .record-part").first).to_be_visible()


@pytest.mark.parametrize("allowed_errors", [["/v1alpha1/runs/run-none"]])
def test_an_unknown_run_says_so(served: Served, page: Page, allowed_errors: list[str]) -> None:
    _open(page, served.ui + "#/runs/run-none")
    assert page.locator("main h1").inner_text() == "This page could not be shown"
    expect(page.locator("#banner-text")).to_contain_text("run-none")
    expect(page.locator("#banner-text")).to_contain_text("HTTP 404")


# --- live ---


def test_a_running_run_updates_live_until_it_ends(served: Served, page: Page) -> None:
    spec = _qa_run("capitals-live", "runs/capitals.jsonl", "live")
    spec["spec"]["target"] = {"model": {"connection": "slow-model", "model": "slow-model"}}
    spec["spec"]["evaluators"] = [{"ref": "builtin/exact-match"}]
    run = _api(served, "/v1alpha1/runs", {"run": spec})
    _open(page, served.ui + f"#/runs/{run['id']}")
    page.evaluate("window.__notReloaded = true")
    # An event came over the stream (WatchRun's HTTP form, newline-delimited JSON) while the run is held.
    expect(page.locator("#run-live")).to_have_text(re.compile(r"Live: (pending|running) at \d{4}-"))
    assert page.locator("#run-state").inner_text() in {"pending", "running"}
    served.release_slow.set()
    expect(page.locator("#run-state")).to_have_text("succeeded", timeout=120_000)
    assert page.evaluate("window.__notReloaded") is True  # updated in place, never reloaded
    metrics = page.locator("section[aria-labelledby=h-metrics] table")
    expect(metrics).to_contain_text("exact-match")
    final = _api(served, f"/v1alpha1/runs/{run['id']}")
    assert final["state"] == "RUN_STATE_SUCCEEDED"
    assert page.locator("#run-progress label").inner_text() == (
        f"Tasks {final['progress']['completed']} of {final['progress']['totalTasks']}")
