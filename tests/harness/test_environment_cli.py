"""`evalsi-harness run --environment`: every task in its own sandbox with the shell and file tools, the checker's
verdict in the records (which `evaluate()` scores with task-success), a task's own environment, a failed setup exit
1 as an infrastructure error, a bad environment file exit 2 naming the field; the cassette replays without a
sandbox."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from evalsi.testing.threaded import ThreadedProvider
from evalsi_harness.main import cli

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agents" / "env-fix"


@pytest.fixture(autouse=True)
def workspaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _files(tmp_path: Path, base_url: str) -> tuple[Path, Path]:
    config = tmp_path / "harness.yaml"
    config.write_text(yaml.safe_dump({"model": {"model": "fake-coder", "base_url": base_url, "max_retries": 0},
                                      "max_steps": 8}))
    environment = tmp_path / "env.yaml"
    spec = yaml.safe_load((EXAMPLE / "env-fix.yaml").read_text())["spec"]["harness"]["environment"]
    environment.write_text(yaml.safe_dump(spec))
    return config, environment


def test_run_with_an_environment_checks_each_task_in_its_own_sandbox(workspaces: Path) -> None:
    from fix_model import reply

    tasks = workspaces / "tasks.jsonl"
    broken = {"setup": ["exit 4"], "check": "true"}
    tasks.write_text(json.dumps({"id": "fix", "input": "Fix calc.py."}) + "\n"
                     + json.dumps({"id": "broken", "input": "Fix calc.py.", "metadata": {"environment": broken}})
                     + "\n")
    with ThreadedProvider(reply) as server:
        config, environment = _files(workspaces, server.base_url)
        result = CliRunner().invoke(cli, ["run", "-c", str(config), "--tasks", str(tasks), "--environment",
                                          str(environment), "--cassettes", str(workspaces / "tapes"),
                                          "-o", str(workspaces / "out.jsonl")])
    assert result.exit_code == 1, result.output  # the broken task's setup is an infrastructure error
    assert "broken trial 1: error, 0 model call(s)" in result.stderr
    assert "environment setup[0] 'sh -c exit 4' exited 4" in result.stderr
    rows = {row["id"]: row for row in map(json.loads, (workspaces / "out.jsonl").read_text().splitlines())}
    fixed = rows["fix"]["metadata"]
    assert fixed["task_success"] is True and fixed["checker_output"] == "3/3 cases pass"
    assert fixed["environment.isolation"]["driver"] == "bwrap"
    assert not list(workspaces.glob("evalsi-ws-*"))

    from evalsi.sdk import evaluate

    (workspaces / "fixed.jsonl").write_text(json.dumps(rows["fix"]) + "\n")
    assert evaluate(str(workspaces / "fixed.jsonl"), ["builtin/task-success"]).metric("task-success").mean == 1.0

    # The cassette holds what the sandbox answered: the replay needs neither the model nor a sandbox.
    replayed = CliRunner().invoke(cli, ["replay", "-c", str(config), str(workspaces / "tapes")])
    assert replayed.exit_code == 0, replayed.output
    [again] = [json.loads(line) for line in replayed.stdout.splitlines()]
    assert again["output"] == rows["fix"]["output"] and again["trajectory"] == rows["fix"]["trajectory"]


def test_a_bad_environment_file_exits_2_naming_the_field(workspaces: Path) -> None:
    (workspaces / "env.yaml").write_text("check: {command: x, format: tap}\n")
    (workspaces / "harness.yaml").write_text("model: {model: m, base_url: http://127.0.0.1:9/v1}\n")
    result = CliRunner().invoke(cli, ["run", "-c", "harness.yaml", "--task", "hi", "--environment", "env.yaml"])
    assert result.exit_code == 2
    assert "env.yaml.check.format: 'tap'; accepted: exit, json, junit" in result.stderr


def test_a_tool_result_whose_keys_are_not_sorted_replays(workspaces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # environment_tools
    with ThreadedProvider(lambda body: "It is 21 C.") as server:
        server.enqueue(("tool_calls", [{"name": "weather_first", "arguments": {"city": "Oslo"}}]))
        config = workspaces / "harness.yaml"
        config.write_text(yaml.safe_dump({"model": {"model": "m", "base_url": server.base_url, "max_retries": 0},
                                          "tools": {"python": ["environment_tools:weather_first"]}}))
        live = CliRunner().invoke(cli, ["run", "-c", str(config), "--task", "Weather in Oslo?", "--cassettes",
                                        str(workspaces / "tapes")])
    assert live.exit_code == 0, live.output
    assert server.requests[1]["messages"][-1]["content"] == '{"temperature": 21, "city": "Oslo"}'
    replayed = CliRunner().invoke(cli, ["replay", "-c", str(config), str(workspaces / "tapes")])
    assert replayed.exit_code == 0, replayed.output  # the cassette keeps the value's own key order
    assert replayed.stdout == live.stdout
