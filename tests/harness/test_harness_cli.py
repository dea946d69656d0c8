"""`evalsi-harness run` and `replay`: records out, cassettes written, exit codes, bad config named."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from evalsi.testing.threaded import ThreadedProvider
from evalsi_harness.main import cli


def _config(tmp_path: Path, base_url: str, **extra) -> Path:
    path = tmp_path / "harness.yaml"
    doc = {"model": {"model": "fake-model", "base_url": base_url, "max_retries": 0},
           "tools": {"python": ["harness_tools:get_weather"]}, "maxSteps": 4, **extra}
    path.write_text(yaml.safe_dump(doc))
    return path


def test_run_writes_records_and_cassettes_then_replay_needs_no_model(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "paris", "input": "weather in Paris?",
                                 "reference": {"tool_calls": ["get_weather"]}}) + "\n")
    with ThreadedProvider(lambda body: "It is 21 C.") as server:
        server.enqueue(("tool_calls", [{"name": "get_weather", "arguments": {"city": "Paris"}}]))
        config = _config(tmp_path, server.base_url)
        result = CliRunner().invoke(cli, ["run", "-c", str(config), "--tasks", str(tasks), "--run-id", "r1",
                                          "--cassettes", str(tmp_path / "tapes"), "-o", str(tmp_path / "out.jsonl")])
    assert result.exit_code == 0, result.output
    assert "paris trial 1: final_answer, 2 model call(s), 1 tool call(s)" in result.stderr
    (row,) = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert row["id"] == "paris" and row["output"] == "It is 21 C." and row["trial"] == 1
    assert row["metadata"]["harness.stop_reason"] == "final_answer"
    assert [s["type"] for s in row["trajectory"]["steps"]] == ["STEP_TYPE_AGENT", "STEP_TYPE_LLM", "STEP_TYPE_TOOL",
                                                              "STEP_TYPE_LLM"]
    assert (tmp_path / "tapes" / "paris.trial-1.jsonl").exists()

    # The provider is stopped; the replay rebuilds the same rows from the cassettes alone.
    replayed = CliRunner().invoke(cli, ["replay", "-c", str(config), str(tmp_path / "tapes")])
    assert replayed.exit_code == 0, replayed.output
    assert [json.loads(line) for line in replayed.stdout.splitlines()] == [row]

    # The records are a dataset `evaluate()` scores with the agent pack.
    from evalsi.sdk import evaluate

    scores = evaluate(str(tmp_path / "out.jsonl"), ["builtin/tool-call-accuracy"])
    assert scores.metric("tool-call-accuracy.recall").mean == 1.0


def test_a_provider_down_exits_1_and_bad_config_exits_2(tmp_path: Path) -> None:
    with ThreadedProvider(lambda body: "x") as server:
        server.enqueue(("status", 500))
        config = _config(tmp_path, server.base_url)
        result = CliRunner().invoke(cli, ["run", "-c", str(config), "--task", "hi"])
    assert result.exit_code == 1
    assert "infrastructure error" in result.stderr and "500" in result.stderr

    bad = _config(tmp_path, "http://127.0.0.1:9/v1", budget={"usd": 1})
    result = CliRunner().invoke(cli, ["run", "-c", str(bad), "--task", "hi"])
    assert result.exit_code == 2
    assert f"{bad}: budget.usd needs pricing" in result.stderr

    typo = _config(tmp_path, "http://127.0.0.1:9/v1", budget={"wallclock": "1m"})
    result = CliRunner().invoke(cli, ["run", "-c", str(typo), "--task", "hi"])
    assert result.exit_code == 2
    assert f"{typo}: budget.wallclock: unknown key (did you mean wall_clock?)" in result.stderr

    result = CliRunner().invoke(cli, ["run", "-c", str(typo)])
    assert result.exit_code == 2 and "give exactly one of --task TEXT and --tasks FILE" in result.stderr
