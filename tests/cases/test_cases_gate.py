"""`evalsi cases run` with judges, baselines and the gate, --mode perf and --conv-map, end to end."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from evalsi.cases.perf import percentile
from evalsi.cases.testing import ScriptedAgent, ThreadedAgent
from evalsi.cli.main import cli
from evalsi.testing.threaded import ThreadedProvider

AGENTS = {"shop": {"tools": ["search_voucher"], "capabilities": []}}
REPLIES = {
    "cupom?": {"calls": [{"name": "search_voucher", "status": "ok"}], "reply": "Temos o CHOCO10.",
               "stream_delay": 0.05},
    "oi": {"reply": "Olá!"},
}
GOOD = "id: good\nagent: shop\nturns:\n  - user: cupom?\nexpect: {tools_called: [search_voucher]}\n"
BAD = "id: bad\nagent: shop\nturns:\n  - user: oi\nexpect: {tools_called: [search_voucher]}\n"
NEEDS = "id: needs\nagent: shop\nrequires: {tools: [search_orders]}\nturns:\n  - user: oi\n"
RUBRIC = ("id: judged\nagent: shop\nturns:\n  - user: cupom?\n"
          "expect: {rubric: Says the coupon., min_score: 0.7}\n")


@pytest.fixture(scope="module")
def agent() -> Iterator[ScriptedAgent]:
    with ThreadedAgent(ScriptedAgent(agents=AGENTS, replies=REPLIES)) as scripted:
        yield scripted


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["cases", "run", *args])
    return result.exit_code, result.output


def cases_dir(tmp_path: Path, **cases: str) -> str:
    directory = tmp_path / "cases"
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in cases.items():
        (directory / f"{name}.yaml").write_text(text, encoding="utf-8")
    return str(directory)


def baseline(tmp_path: Path, cases: dict[str, Any], tolerance: float | None = None) -> str:
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps({"kind": "evalsi.cases.baseline/v1", "tolerance": tolerance, "cases": cases}))
    return str(path)


def test_update_baseline_leaves_skips_out_then_the_same_state_gates_green(agent: ScriptedAgent,
                                                                         tmp_path: Path) -> None:
    source = cases_dir(tmp_path, good=GOOD, bad=BAD, needs=NEEDS)
    path = tmp_path / "evals" / "baseline.json"
    code, output = run("--source", source, "--agent-url", agent.base_url, "--update-baseline",
                       "--baseline", str(path))
    assert code == 0, output  # accepting the current state: the known failure does not block
    written = json.loads(path.read_text())
    assert written["cases"] == {"bad": {"status": "fail", "score": None}, "good": {"status": "pass", "score": None}}
    code, output = run("--source", source, "--agent-url", agent.base_url, "--baseline", str(path))
    assert code == 0, output  # "bad" fails, but it failed in the baseline too: not a regression
    assert "0 regression(s)" in output


def test_pass_to_fail_and_pass_to_skipped_are_regressions_a_new_case_is_not(agent: ScriptedAgent,
                                                                           tmp_path: Path) -> None:
    source = cases_dir(tmp_path, bad=BAD, needs=NEEDS, good=GOOD)
    path = baseline(tmp_path, {"bad": {"status": "pass"}, "needs": {"status": "pass"}})
    code, output = run("--source", source, "--agent-url", agent.base_url, "--baseline", path, "--format", "json")
    assert code == 3, output
    gate = json.loads(output)["gate"]
    assert [(r["case"], r["kind"]) for r in gate["regressions"]] == [("bad", "pass -> fail"),
                                                                     ("needs", "pass -> skipped")]
    assert gate["new_cases"] == ["good"]
    # A failing case with no baseline entry never blocks.
    source = cases_dir(tmp_path / "other", bad=BAD)
    code, output = run("--source", source, "--agent-url", agent.base_url, "--baseline",
                       baseline(tmp_path, {"good": {"status": "pass"}}))
    assert code == 0 and "new (never block): bad" in output and "not in this run: good" in output


def test_a_saved_report_serves_as_a_baseline(agent: ScriptedAgent, tmp_path: Path) -> None:
    source = cases_dir(tmp_path, good=GOOD)
    report = tmp_path / "report.json"
    assert run("--source", source, "--agent-url", agent.base_url, "-o", str(report))[0] == 0
    (tmp_path / "cases" / "good.yaml").write_text(GOOD.replace("cupom?", "oi"), encoding="utf-8")
    code, output = run("--source", source, "--agent-url", agent.base_url, "--baseline", str(report))
    assert code == 3 and "REGRESSION good: pass -> fail" in output


def test_refusals_exit_2_before_a_turn_is_spent(agent: ScriptedAgent, tmp_path: Path) -> None:
    source = cases_dir(tmp_path, good=GOOD, judged=RUBRIC)
    before = len(agent.requests)
    code, output = run("--source", source, "--agent-url", agent.base_url, "--baseline", str(tmp_path / "no.json"))
    assert code == 2 and "without a recorded baseline refuses" in output
    code, output = run("--source", source, "--agent-url", agent.base_url, "--baseline",
                       baseline(tmp_path, {"good": {"status": "fail"}}))
    assert code == 2 and "all-red baseline" in output
    judged = baseline(tmp_path, {"good": {"status": "pass"}, "judged": {"status": "pass", "score": 0.9}})
    code, output = run("--source", source, "--agent-url", agent.base_url, "--baseline", judged)
    assert code == 2 and "recorded with judge scores and no judge is configured" in output
    code, output = run("--source", source, "--agent-url", agent.base_url, "--baseline", judged, "--mode", "perf",
                       "--judge-model", "m", "--judge-base-url", "http://127.0.0.1:9/v1")
    assert code == 2 and "no judge is configured" in output  # perf calls no judge
    assert len(agent.requests) == before


def judge(score: float) -> Any:
    return lambda body: f'{{"reasoning": "fine", "score": {score}}}'


@pytest.mark.parametrize(("score", "code"), [(0.85, 0), (0.75, 3)])
def test_a_score_drop_past_tolerance_is_a_regression(agent: ScriptedAgent, tmp_path: Path, score: float,
                                                     code: int) -> None:
    source = cases_dir(tmp_path, judged=RUBRIC)
    (tmp_path / "judges.yaml").write_text("judges: []\ntolerance: 0.1\n", encoding="utf-8")
    path = baseline(tmp_path, {"judged": {"status": "pass", "score": 0.9}})
    with ThreadedProvider(judge(score)) as server:
        got, output = run("--source", source, "--agent-url", agent.base_url, "--baseline", path,
                          "--judges", str(tmp_path / "judges.yaml"), "--judge-model", "gpt-judge",
                          "--judge-base-url", server.base_url)
    assert got == code, output
    assert "PASS     judged" in output  # 0.75 still clears min_score: only the baseline sees the drop
    if code:
        assert "score drop" in output and "0.90 -> 0.75" in output


def test_panel_from_the_source_evals_yaml_and_the_report_keeps_each_judge(agent: ScriptedAgent,
                                                                         tmp_path: Path) -> None:
    source = cases_dir(tmp_path, judged=RUBRIC)
    with ThreadedProvider(lambda body: '{"score": 0.9}' if body["model"] == "a" else '{"score": 0.1}') as server:
        (Path(source) / "evals.yaml").write_text(
            f"judges:\n  - {{model: a, base_url: '{server.base_url}'}}\n  - {{model: b, base_url: '{server.base_url}'}}"
            "\naggregate: mean\nmin_agreement: 0.5\n", encoding="utf-8")
        code, output = run("--source", source, "--agent-url", agent.base_url, "--format", "json")
        update = tmp_path / "b.json"
        assert run("--source", source, "--agent-url", agent.base_url, "--update-baseline", "--baseline",
                   str(update))[0] == 0  # accepting the state: the failed rubric is recorded, not blocking
    report = json.loads(output)
    assert code == 3 and report["panel"]["aggregate"] == "mean"
    (case,) = report["cases"]
    detail = case["checks"][0]["detail"]
    assert [(j["judge"], j["score"]) for j in detail["judges"]] == [("a", 0.9), ("b", 0.1)]
    assert detail["score"] == 0.5 and case["status"] == "fail"
    assert json.loads(update.read_text())["cases"]["judged"] == {"status": "fail", "score": 0.5}


def test_judge_pending_without_a_judge_and_judge_flags_need_a_model(agent: ScriptedAgent, tmp_path: Path) -> None:
    source = cases_dir(tmp_path, judged=RUBRIC)
    code, output = run("--source", source, "--agent-url", agent.base_url)
    assert code == 0 and "PENDING  judged" in output
    code, output = run("--source", source, "--agent-url", agent.base_url, "--judge-base-url", "http://x/v1")
    assert code == 2 and "need --judge-model" in output


def test_perf_mode_reports_ttfb_and_latency_from_the_stream(agent: ScriptedAgent, tmp_path: Path) -> None:
    source = cases_dir(tmp_path, good=GOOD, bad=BAD)
    code, output = run("--source", source, "--agent-url", agent.base_url, "--mode", "perf", "--format", "json")
    report = json.loads(output)
    perf = report["perf"]
    assert perf["turns"] == 2 and perf["ttfb_ms"]["n"] == 2 and perf["latency_ms"]["n"] == 2
    good = next(c for c in report["cases"] if c["id"] == "good")["transcript"]["turns"][0]
    assert good["latency_ms"] >= 50 > good["ttfb_ms"]  # the stream's first event came before the delay
    assert perf["latency_ms"]["p95"] >= perf["latency_ms"]["p50"] and code == 3  # "bad" fails: no baseline
    code, output = run("--source", source, "--agent-url", agent.base_url, "--mode", "both")
    assert code == 3 and "perf over 2 turn(s): TTFB: p50" in output
    code, output = run("--source", source, "--agent-url", agent.base_url)
    assert code == 3 and "perf over" not in output


def test_percentile() -> None:
    assert percentile([], 50) is None
    assert percentile([10.0], 95) == 10.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile(list(map(float, range(1, 101))), 95) == 95.05


def test_conv_map_pins_conversation_ids_and_the_rest_are_fresh(agent: ScriptedAgent, tmp_path: Path) -> None:
    source = cases_dir(tmp_path, good=GOOD, bad=BAD)
    conv_map = tmp_path / "conv.json"
    conv_map.write_text(json.dumps({"good": "eval-good-run-2"}))
    code, output = run("--source", source, "--agent-url", agent.base_url, "--conv-map", str(conv_map),
                       "--format", "json")
    conversations = {c["id"]: c["conversation"] for c in json.loads(output)["cases"]}
    assert conversations["good"] == "eval-good-run-2" and conversations["bad"].startswith("eval-bad-")
    assert ("platform", "eval-good-run-2") in agent.conversations
    for bad, needle in [("[1]", "JSON object"), ('{"ghost": "c"}', "no case with id(s) ghost"),
                        ('{"good": "c", "bad": "c"}', "more than one case"), ("{", "not a readable")]:
        conv_map.write_text(bad)
        code, output = run("--source", source, "--agent-url", agent.base_url, "--conv-map", str(conv_map))
        assert code == 2 and needle in output, output
