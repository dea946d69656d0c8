"""``evalsi ci run`` embedded, end to end: the suite runs here, its gates decide the exit code, the reports are
written by ``evalsi report``, and the summary is posted once to a local GitHub API, whatever GitHub answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ci_env import HEAD_SHA, clean_env, pull_request_env
from click.testing import CliRunner, Result
from github_api import fake_github

from evalsi.ci.summary import MAX_COMMENT_CHARS
from evalsi.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
QA = str(ROOT / "examples/quickstart/qa.jsonl")  # exact-match mean 0.567
IMPROVED = str(ROOT / "examples/quickstart/qa_improved.jsonl")  # the same questions, exact-match 0.767
FAILING_GATE = "metric('exact-match').mean >= 0.9"
PASSING_GATE = "metric('exact-match').mean >= 0.5"


def ci_run(args: list[str], env: dict[str, str | None]) -> Result:
    return CliRunner().invoke(cli, ["ci", "run", *args], env=env, catch_exceptions=False)


def test_a_failing_gate_exits_3_with_every_file_written(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = ci_run(["--data", QA, "-e", "exact-match", "--gate", FAILING_GATE, "--output-dir", str(out),
                     "--sha", HEAD_SHA, "--branch", "fix", "--pr", "5"], clean_env())
    assert result.exit_code == 3, result.output
    assert f"✗ {FAILING_GATE}" in result.stdout
    assert "1 of 1 gates failed" in result.stderr
    saved = json.loads((out / "results.json").read_text())
    assert saved["labels"] == {"git.sha": HEAD_SHA, "git.branch": "fix", "git.pr": "5"}
    assert saved["gates"] == [{"expression": FAILING_GATE, "message": "metric('exact-match').mean = 0.5667 < 0.9"}]
    summary = (out / "summary.md").read_text()
    assert "1 of 1 gates failed" in summary and "0.567" in summary
    html = (out / "report.html").read_text()
    assert html.lower().startswith("<!doctype html>") and "exact-match" in html
    assert "no baseline: none given" in result.stderr


def test_a_passing_gate_exits_0(tmp_path: Path) -> None:
    result = ci_run(["--data", QA, "-e", "exact-match", "--gate", PASSING_GATE, "-o", str(tmp_path)], clean_env())
    assert result.exit_code == 0, result.output
    assert f"✓ {PASSING_GATE}" in result.stdout


def test_the_baseline_artifact_is_compared_and_a_regression_fails_only_when_asked(tmp_path: Path) -> None:
    base = tmp_path / "base"
    assert ci_run(["--data", IMPROVED, "-e", "exact-match", "--name", "qa", "-o", str(base)],
                  clean_env()).exit_code == 0
    args = ["--data", QA, "-e", "exact-match", "--name", "qa", "--baseline", str(base / "results.json")]
    lenient = ci_run([*args, "-o", str(tmp_path / "a")], clean_env())
    assert lenient.exit_code == 0, lenient.output
    assert f"regression against {base / 'results.json'}: exact-match got worse" in lenient.stderr
    summary = (tmp_path / "a" / "summary.md").read_text()
    assert "-0.200" in summary or "−0.200" in summary  # the paired difference, as `evalsi compare` computes it
    assert f"baseline: {base / 'results.json'}" in summary.replace("&lt;", "<")
    strict = ci_run([*args, "--fail-on-regression", "-o", str(tmp_path / "b")], clean_env())
    assert strict.exit_code == 3, strict.output


def test_a_missing_baseline_file_is_a_warning(tmp_path: Path) -> None:
    result = ci_run(["--data", QA, "-e", "exact-match", "--baseline", str(tmp_path / "expired.json"),
                     "-o", str(tmp_path / "out")], clean_env())
    assert result.exit_code == 0, result.output
    assert f"warning: no baseline: {tmp_path / 'expired.json'} does not exist" in result.stderr


def test_a_spec_runs_embedded_with_its_own_gates_and_the_labels(tmp_path: Path) -> None:
    spec = str(ROOT / "examples/runs/qa-outputs.yaml")
    result = ci_run(["--spec", spec, "--gate", FAILING_GATE, "-o", str(tmp_path), "--branch", "main",
                     "--sha", HEAD_SHA], clean_env())
    assert result.exit_code == 3, result.output
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["name"] == "qa-outputs"
    assert {"git.sha": HEAD_SHA, "git.branch": "main"}.items() <= saved["labels"].items()
    expressions = [gate["expression"] for gate in saved["gates"]]
    assert len(expressions) == 5 and expressions[-1] == FAILING_GATE  # the spec's four, then ours


def test_the_pull_request_gets_one_comment_updated_on_a_rerun(tmp_path: Path) -> None:
    with fake_github() as github:
        github.add("acme/app", 5, "Please add a test.")
        env = clean_env(**pull_request_env(tmp_path, api=github.url, token=github.token))
        first = ci_run(["--data", QA, "-e", "exact-match", "--gate", FAILING_GATE, "-o", str(tmp_path / "1")], env)
        assert first.exit_code == 3, first.output
        assert "created comment https://github.com/acme/app/pull/5#issuecomment-" in first.stderr
        second = ci_run(["--data", IMPROVED, "-e", "exact-match", "--name", "qa", "--gate", FAILING_GATE,
                         "--baseline", str(tmp_path / "1" / "results.json"), "-o", str(tmp_path / "2")], env)
        assert second.exit_code == 3, second.output
        assert "updated comment" in second.stderr
        thread = github.thread("acme/app", 5)
        assert thread[0]["body"] == "Please add a test."
        assert len(thread) == 2  # one summary, updated, not a second one
        body = thread[1]["body"]
        assert body.startswith("<!-- evalsi-ci:qa -->\n") and len(body) <= MAX_COMMENT_CHARS
        assert (tmp_path / "2" / "summary.md").read_text() == body
        assert "0.767" in body and HEAD_SHA[:12] in body and "actions/runs/4242" in body
        assert [c.method for c in github.calls] == ["GET", "POST", "GET", "PATCH"]
        step_summary = (tmp_path / "step_summary.md").read_text()
        assert step_summary.count("<!-- evalsi-ci:qa -->") == 2  # each run appended its summary


@pytest.mark.parametrize("status", [500, 401])
def test_a_comment_github_refuses_is_a_warning_and_the_exit_code_stays(tmp_path: Path, status: int) -> None:
    with fake_github() as github:
        github.fail_with = status
        env = clean_env(**pull_request_env(tmp_path, api=github.url, token=github.token))
        result = ci_run(["--data", QA, "-e", "exact-match", "--gate", FAILING_GATE, "-o", str(tmp_path)], env)
        assert result.exit_code == 3, result.output
        assert f"warning: the pull request comment was not posted: GET {github.url}" in result.stderr
        assert f"HTTP {status}" in result.stderr
        assert (tmp_path / "summary.md").is_file() and (tmp_path / "report.html").is_file()


def test_no_comment_outside_a_pull_request_or_when_told_not_to(tmp_path: Path) -> None:
    with fake_github() as github:
        env = clean_env(**pull_request_env(tmp_path, api=github.url, token=github.token))
        result = ci_run(["--data", QA, "-e", "exact-match", "--no-comment", "-o", str(tmp_path / "a")], env)
        assert result.exit_code == 0, result.output
        push = clean_env(GITHUB_ACTIONS="true", GITHUB_SHA=HEAD_SHA, GITHUB_REF_NAME="main",
                         GITHUB_REPOSITORY="acme/app", GITHUB_TOKEN=github.token, GITHUB_API_URL=github.url)
        result = ci_run(["--data", QA, "-e", "exact-match", "-o", str(tmp_path / "b")], push)
        assert result.exit_code == 0, result.output
        assert github.calls == []
        assert json.loads((tmp_path / "b" / "results.json").read_text())["labels"] == {
            "git.sha": HEAD_SHA, "git.branch": "main"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--data", QA, "--spec", "x.yaml", "-e", "exact-match"], "give either --spec FILE"),
        (["--data", QA], "--data needs --evaluators"),
        (["--data", QA, "-e", "exact-match", "--gate", "metric('x').mean >="], "--gate #1"),
        (["--data", QA, "-e", "exact-match", "--comment"], "--comment needs $GITHUB_TOKEN"),
        (["--data", QA, "-e", "exact-match", "--sha", "xyz"], "--sha 'xyz'"),
        (["--data", QA, "-e", "exact-match", "--project", "p"], "--project goes with --server"),
        (["--data", QA, "-e", "exact-match", "--server", "http://127.0.0.1:9"], "--data runs embedded only"),
    ],
)
def test_bad_input_exits_2_naming_the_flag(tmp_path: Path, args: list[str], message: str) -> None:
    result = ci_run([*args, "-o", str(tmp_path / "out")], clean_env())
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert not (tmp_path / "out" / "results.json").exists()  # refused before anything ran


def test_thousands_of_failing_records_give_a_comment_github_takes(tmp_path: Path) -> None:
    data = tmp_path / "many.jsonl"
    with data.open("w") as out:
        for n in range(3000):  # every record fails, each with a long output: about 1 MB listed in full
            out.write(json.dumps({"id": f"r{n}", "output": f"answer {n} " + "x" * 300, "reference": "y"}) + "\n")
    with fake_github() as github:
        env = clean_env(**pull_request_env(tmp_path, api=github.url, token=github.token))
        result = ci_run(["--data", str(data), "-e", "exact-match", "--gate", PASSING_GATE, "-o", str(tmp_path / "o")],
                        env)
        assert result.exit_code == 3, result.output
        assert "created comment" in result.stderr  # GitHub's 65,536-character limit, as the local API enforces it
        (comment,) = github.thread("acme/app", 5)
        assert len(comment["body"]) <= MAX_COMMENT_CHARS
        assert comment["body"] == (tmp_path / "o" / "summary.md").read_text()
        assert "3000" in comment["body"]  # the count of failing records is said, not every one listed
