"""The CLI end to end: the quickstart table, exit codes, judges with their cache, saving and comparing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalsi.cli.main import cli

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "quickstart" / "qa.jsonl"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_the_readme_quickstart_prints_the_metric_table() -> None:
    # The installed console script, as a new user runs it.
    evalsi = Path(sys.executable).parent / "evalsi"
    completed = subprocess.run(
        [
            str(evalsi),
            "eval",
            "--data",
            str(QUICKSTART),
            "--evaluators",
            "exact-match,fuzzy-match,numeric-match,latency,cost",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    for header in ("metric", "n", "mean", "95% CI", "skipped", "errors"):
        assert header in completed.stdout
    assert "exact-match " in completed.stdout and "│ 30 │" in completed.stdout


def test_json_output_is_a_run_document_with_results_and_summaries(tmp_path: Path) -> None:
    code, out, _ = run("eval", "--data", str(QUICKSTART), "-e", "exact-match", "--format", "json")
    assert code == 0
    document = json.loads(out)
    assert len(document["results"]) == 30
    (summary,) = document["summaries"]
    assert summary["metric"] == "exact-match" and summary["n"] == "30"
    assert summary["ci"]["method"] == "wilson" and document["manifest"]["datasetVersion"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-e", "exact-mach"], "did you mean exact-match"),
        (["-e", "exact-match", "--param", "exact-match.normalise=false"], "unknown param(s) normalise"),
        (["-e", "exact-match", "--param", "nonsense"], "expected EVALUATOR.PARAM=VALUE"),
        (["-e", "regex-match"], "missing required param(s) pattern"),
        (["-e", "exact-match", "--map", "inptu=question"], "inptu"),
        (["-e", "exact-match", "--judge-base-url", "http://x"], "--judge-model is required"),
    ],
)
def test_bad_input_exits_2_with_a_message_naming_it(args: list[str], message: str) -> None:
    code, out, err = run("eval", "--data", str(QUICKSTART), *args)
    assert code == 2
    assert message in err
    assert out == ""


def test_a_malformed_line_names_file_and_line_and_writes_nothing(tmp_path: Path) -> None:
    data = tmp_path / "bad.jsonl"
    data.write_text('{"output": "a", "reference": "a"}\n{"output": "b", "reference": \n')
    saved = tmp_path / "out.json"
    code, _, err = run("eval", "--data", str(data), "-e", "exact-match", "-o", str(saved))
    assert code == 2
    assert f"{data}:2:" in err
    assert not saved.exists()


def test_usage_errors_exit_2_and_internal_errors_exit_1(monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, _ = run("eval", "--evaluators", "exact-match")  # --data missing
    assert code == 2

    def explode(*args: object, **kwargs: object) -> None:
        raise RuntimeError("unexpected")

    monkeypatch.setattr("evalsi.sdk.evaluate", explode)
    code, _, err = run("eval", "--data", str(QUICKSTART), "-e", "exact-match")
    assert code == 1
    assert "internal error" in err and "RuntimeError: unexpected" in err


def test_llm_judge_scores_and_a_rerun_makes_no_provider_call(judge_server, tmp_path: Path) -> None:
    data = tmp_path / "qa.jsonl"
    rows = [
        {"id": str(i), "input": "Capital of France?", "output": out, "reference": "Paris"}
        for i, out in enumerate(["Paris", "Lyon", "Paris", "Lyon"])
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = [
        "eval",
        "--data",
        str(data),
        "-e",
        "llm-judge,exact-match",
        "--judge-model",
        "judge-1",
        "--judge-base-url",
        judge_server.base_url,
        "--cache-dir",
        str(tmp_path / "cache"),
        "--format",
        "json",
    ]
    code, out, err = run(*args)
    assert code == 0, err
    first = json.loads(out)
    judge = next(s for s in first["summaries"] if s["metric"] == "llm-judge")
    assert judge["n"] == "4" and judge["mean"] == pytest.approx(0.5)
    assert len(judge_server.requests) == 4

    code, out, _ = run(*args)
    assert code == 0
    assert len(judge_server.requests) == 4  # every answer came from the cache
    second = json.loads(out)
    assert [s.get("mean") for s in second["summaries"]] == [s.get("mean") for s in first["summaries"]]

    code, _, _ = run(*args, "--no-cache")
    assert code == 0 and len(judge_server.requests) == 8


def test_model_graded_evaluators_without_a_judge_are_refused_before_anything_runs(tmp_path: Path) -> None:
    code, out, err = run("eval", "--data", str(QUICKSTART), "-e", "llm-judge", "--format", "json")
    assert code == 2 and out == ""  # tests/cli/test_failures_visible.py holds the whole message
    assert "evaluator llm-judge needs a judge and none is configured" in err and "--judge-model" in err


def test_save_then_compare_reports_a_paired_verdict(tmp_path: Path) -> None:
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    improved = ROOT / "examples" / "quickstart" / "qa_improved.jsonl"
    assert run("eval", "--data", str(QUICKSTART), "-e", "exact-match,latency", "-o", str(before))[0] == 0
    assert run("eval", "--data", str(improved), "-e", "exact-match,latency", "-o", str(after))[0] == 0
    code, out, _ = run("compare", str(before), str(after), "--format", "json")
    assert code == 0
    metrics = {m["metric"]: m for m in json.loads(out)["metrics"]}
    exact = metrics["exact-match"]
    assert exact["nPairs"] == "30" and exact["diff"] == pytest.approx(6 / 30)
    assert exact["test"] == "mcnemar" and exact["verdict"] == "better"
    assert exact["pValueAdjusted"] >= exact["pValue"] and json.loads(out)["adjust"] == "holm"
    assert metrics["latency.seconds"]["verdict"] == "no significant difference"
    code, out, _ = run("compare", str(before), str(after))
    assert code == 0 and "better" in out


def test_compare_rejects_a_file_that_is_not_a_result(tmp_path: Path) -> None:
    bogus = tmp_path / "x.json"
    bogus.write_text('{"nope": 1}')
    code, _, err = run("compare", str(bogus), str(bogus))
    assert code == 2 and "not a saved result" in err


def test_catalog_lists_packs_and_shows_params() -> None:
    code, out, _ = run("catalog", "list", "--pack", "core", "--format", "json")
    assert code == 0
    names = {m["name"] for m in json.loads(out)}
    assert {"builtin/exact-match", "builtin/json-schema", "builtin/cost"} <= names
    code, out, _ = run("catalog", "show", "fuzzy-match")
    assert code == 0
    assert "threshold (float, default 0.8" in out and "similarity: number [0, 1]" in out
    code, out, _ = run("catalog", "show", "ece")
    assert code == 0 and "bins (int, default 10):" in out  # an int param's default without protobuf's ".0"
    code, _, err = run("catalog", "list", "--pack", "nope")
    assert code == 2 and "installed packs" in err


def test_the_custom_evaluator_example_runs() -> None:
    completed = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "custom_evaluator" / "run.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert "answer-brevity.brief" in completed.stdout and "cluster-robust t" in completed.stdout


def test_compare_exits_3_when_a_metric_got_worse(tmp_path: Path) -> None:
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    improved = ROOT / "examples" / "quickstart" / "qa_improved.jsonl"
    assert run("eval", "--data", str(improved), "-e", "exact-match", "-o", str(before))[0] == 0
    assert run("eval", "--data", str(QUICKSTART), "-e", "exact-match", "-o", str(after))[0] == 0
    code, out, err = run("compare", str(before), str(after))
    assert code == 3 and "worse" in out and "regression: exact-match" in err
