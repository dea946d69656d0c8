"""Failures on a server (issue 12), through `evalsi run --server` against a real stack (NATS, api, scheduler,
workers as processes): a judge connection that refuses every call makes a metric of nothing but infrastructure
errors (exit 1, the metric and the first cause named; --allow-errors accepts it), and a spec.summary.clusterBy key
no record has is refused by CreateRun (exit 2) before a run exists."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from evalsi.cli.main import cli
from evalsi.testing.stack import Stack
from evalsi.testing.threaded import ThreadedProvider

ROWS = [
    {"id": "a", "input": "Capital of France?", "output": "Paris", "reference": "Paris", "topic": "geo"},
    {"id": "b", "input": "Capital of Italy?", "output": "Milan", "reference": "Rome", "topic": "geo"},
]


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def refusing_judge() -> Iterator[Any]:
    with ThreadedProvider(lambda _body: ("status", 401)) as server:
        yield server


def spec_file(folder: Path, *extra: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "qa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    spec = folder / f"run-{len(list(folder.glob('run-*.yaml')))}.yaml"
    spec.write_text(
        "apiVersion: evals.si/v1alpha1\nkind: EvalRun\nmetadata: {name: failures}\nspec:\n"
        "  dataset: {path: qa.jsonl}\n" + "".join(line + "\n" for line in extra)
    )
    return spec


def test_served_runs_fail_visibly(tmp_path: Path, refusing_judge: Any) -> None:
    judges = {"judge": {"connector": "openai-compatible", "base_url": refusing_judge.base_url, "model": "judge-1"}}
    stack = Stack(tmp_path / "stack", datasets_dir=tmp_path / "datasets", judges=judges).start()
    try:
        down = spec_file(
            tmp_path / "specs",
            "  evaluators: [{ref: builtin/exact-match}, {ref: builtin/llm-judge}]",
            "  judges: {default: {connection: judge}}",
        )
        code, out, err = run("run", "-f", str(down), "--server", stack.http)
        assert code == 1, err + stack.logs()
        # The first cause says what is wrong (a breaker that opened on it keeps the cause first).
        cause = "openai judge-1: HTTP 401: Incorrect API key provided."
        message = err[err.index("error: "):]
        assert message.startswith(
            f"error: metric llm-judge: every evaluation (2) is an infrastructure error; the first: {cause}"
        ) and message.endswith("\n(exit 1: nothing was measured; --allow-errors accepts it and exits 0)\n")
        # The table's errors, from GetRun's summaries (MetricSummary.error_kinds).
        assert "│ 2 (2 infra) │" in out and f"llm-judge: 2 infra errors, the first: {cause}" in out
        code, out, err = run("run", "-f", str(down), "--server", stack.http, "--allow-errors")
        assert code == 0, err
        run_id = err.split("created ", 1)[1].split(" ", 1)[0]
        assert run("runs", "watch", run_id, "--server", stack.http)[0] == 1  # watch exits as run does
        assert run("runs", "watch", run_id, "--server", stack.http, "--allow-errors")[0] == 0

        typo = spec_file(tmp_path / "specs", "  evaluators: [{ref: builtin/exact-match}]",
                         "  summary: {clusterBy: topc}")
        code, out, err = run("run", "-f", str(typo), "--server", stack.http)
        assert code == 2 and out == ""
        assert "spec.summary.clusterBy 'topc': no record has this metadata key (did you mean 'topic'?); " \
               "the records' metadata keys: topic" in err

        # A key only some records have: the run goes on, and the server's warning is printed.
        partial = spec_file(tmp_path / "partial", "  evaluators: [{ref: builtin/exact-match}]",
                            "  summary: {clusterBy: region}")
        rows = [{**ROWS[0], "region": "eu"}, ROWS[1]]
        (tmp_path / "partial" / "qa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
        code, out, err = run("run", "-f", str(partial), "--server", stack.http)
        assert code == 0, err
        assert "warning: spec.summary.clusterBy 'region': 1 of 2 records lack this metadata key; each of them " \
               "is a cluster of its own" in err
    finally:
        stack.stop()
