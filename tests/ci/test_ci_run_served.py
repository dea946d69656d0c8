"""``evalsi ci run --server`` against a real served stack (bundled NATS, api, scheduler, workers as processes): the
run carries the commit's labels on the server, and a pull request's baseline is the base branch's newest run of
the same suite, found with ListRuns' label filter in the spec's project."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from ci_env import HEAD_SHA, clean_env, pull_request_env
from click.testing import CliRunner, Result
from github_api import fake_github

from evalsi.cli.main import cli
from evalsi.client import Client
from evalsi.testing.stack import Stack

ROOT = Path(__file__).resolve().parents[2]
MAIN_SHA = "89abcdef0123456789abcdef0123456789abcdef"


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    running = Stack(tmp_path / "stack", datasets_dir=tmp_path / "datasets").start()
    try:
        yield running
    finally:
        running.stop()


def write_spec(path: Path, name: str, data: str) -> str:
    path.write_text(f"""apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {{name: {name}, labels: {{evals.si/project: ci-tests}}}}
spec:
  target: {{outputs: {{}}}}
  dataset: {{path: {ROOT / 'examples/quickstart' / data}}}
  evaluators: [{{ref: builtin/exact-match}}]
  gates: ["metric('exact-match').mean >= 0.5"]
""")
    return str(path)


def ci_run(args: list[str], env: dict[str, str | None]) -> Result:
    return CliRunner().invoke(cli, ["ci", "run", *args], env=env, catch_exceptions=False)


def test_a_pull_request_is_compared_with_the_base_branchs_newest_run_of_its_suite(
    stack: Stack, tmp_path: Path
) -> None:
    base_spec = write_spec(tmp_path / "base.yaml", "qa-ci", "qa_improved.jsonl")  # exact-match 0.767
    other_spec = write_spec(tmp_path / "other.yaml", "another-suite", "qa.jsonl")
    pr_spec = write_spec(tmp_path / "pr.yaml", "qa-ci", "qa.jsonl")  # exact-match 0.567: a regression
    on_main = ["--server", stack.http, "--branch", "main", "--sha", MAIN_SHA]
    first = ci_run(["--spec", base_spec, *on_main, "-o", str(tmp_path / "main")], clean_env())
    assert first.exit_code == 0, first.output
    base_id = json.loads((tmp_path / "main" / "results.json").read_text())["id"]
    # A newer run of another suite on main is not this suite's baseline.
    other = ci_run(["--spec", other_spec, *on_main, "-o", str(tmp_path / "other")], clean_env())
    assert other.exit_code == 0, other.output

    with fake_github() as github:
        env = clean_env(**pull_request_env(tmp_path, api=github.url, token=github.token, head="fix", base="main"))
        pr = ci_run(["--spec", pr_spec, "--server", stack.http, "-o", str(tmp_path / "pr")], env)
        assert pr.exit_code == 0, pr.output  # its gate passes; a regression fails only with --fail-on-regression
        assert f"regression against run {base_id} (newest of branch main): exact-match got worse" in pr.stderr
        baseline = json.loads((tmp_path / "pr" / "baseline.json").read_text())
        assert baseline["id"] == base_id and len(baseline["results"]) == 30  # with its results, for the report
        (comment,) = github.thread("acme/app", 5)
        assert comment["body"] == (tmp_path / "pr" / "summary.md").read_text()
        assert f"run {base_id}" in comment["body"] and "0.767" in comment["body"] and "0.567" in comment["body"]

        strict = ci_run(["--spec", pr_spec, "--server", stack.http, "--fail-on-regression",
                         "-o", str(tmp_path / "pr2")], env)
        assert strict.exit_code == 3, strict.output
        assert len(github.thread("acme/app", 5)) == 1  # the re-run updated the one comment

    with Client(stack.http, project="ci-tests") as client:
        (labelled,) = [run for run in client.runs.list(labels=["git.pr=5", "git.branch=fix"])
                       if run.id == json.loads((tmp_path / "pr" / "results.json").read_text())["id"]]
        assert dict(labelled.labels).items() >= {"git.sha": HEAD_SHA, "git.branch": "fix", "git.pr": "5"}.items()


def test_a_named_baseline_run_id_and_a_push_without_a_base(stack: Stack, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "qa-ci", "qa.jsonl")
    push = ci_run(["--spec", spec, "--server", stack.http, "--branch", "main", "-o", str(tmp_path / "a")],
                  clean_env())
    assert push.exit_code == 0, push.output
    assert "no baseline: not a pull request" in push.stderr
    run_id = json.loads((tmp_path / "a" / "results.json").read_text())["id"]
    again = ci_run(["--spec", spec, "--server", stack.http, "--baseline", run_id, "-o", str(tmp_path / "b")],
                   clean_env())
    assert again.exit_code == 0, again.output
    assert f"run {run_id}" in (tmp_path / "b" / "summary.md").read_text()
    unknown = ci_run(["--spec", spec, "--server", stack.http, "--baseline", "run-that-is-not-there",
                      "-o", str(tmp_path / "c")], clean_env())
    assert unknown.exit_code == 2, unknown.output
    assert "run-that-is-not-there" in unknown.stderr
    assert not (tmp_path / "c" / "results.json").exists()  # refused before the suite ran
