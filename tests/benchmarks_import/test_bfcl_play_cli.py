"""``evalsi cases play-bfcl`` end to end against a local OpenAI-compatible server: the example BFCL multi-turn
questions played in FC and prompting mode, the table and JSON summaries, the JSONL records `evalsi eval` grades
again, and the exit codes (0 graded, 1 a question not played, 2 bad input, 3 --min-pass-rate not met)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

import evalsi
from benchmarks_import.test_bfcl_multi_drive import EXAMPLES, SCRIPT, _model
from benchmarks_import.test_bfcl_multi_fc import _as_calls, _reply
from evalsi.cli.main import cli
from evalsi.datasets import load_dataset
from evalsi.records import from_value
from evalsi.testing.threaded import ThreadedProvider

MISS_FUNC = f"bfcl://{EXAMPLES}/multi_turn_miss_func"
BASE = f"bfcl://{EXAMPLES}/multi_turn_base"


def _fc_script() -> dict[str, list[list[Any]]]:
    [record] = load_dataset(MISS_FUNC)
    turns = from_value(record.metadata["bfcl_turns"])
    return {turns[0][0]["content"]: [
        [_as_calls(a) for a in next(s for start, s in SCRIPT.items() if start in turn[0]["content"])]
        for turn in turns]}


def test_fc_mode_plays_grades_and_writes_the_records(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    out = tmp_path / "played.jsonl"
    with ThreadedProvider(_reply(_fc_script(), seen)) as server:
        done = CliRunner().invoke(cli, ["cases", "play-bfcl", MISS_FUNC, "--model", "scripted", "--base-url",
                                        server.base_url, "-o", str(out), "--no-progress"])
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    assert lines[0].split() == ["question", "grade", "detail"]
    assert lines[1].split() == ["multi_turn_miss_func_0", "pass"]
    assert lines[-1] == "pass rate (fc): 1.000 over 1 question(s)"
    assert all("tools" in body for body in seen)  # fc is the default mode
    # the played conversation as a records file that `evalsi eval` grades again, the same
    [row] = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["metadata"]["bfcl_simulation"] == {"reason": "done", "turns": 4, "mode": "fc"}
    assert evalsi.evaluate([row], ["builtin/bfcl-multi-turn"]).results[0].scores[0].passed


def test_prompting_mode_and_the_pass_rate_gate() -> None:
    with ThreadedProvider(_model) as server:
        args = ["cases", "play-bfcl", BASE, MISS_FUNC, "--base-url", server.base_url, "--mode", "prompting",
                "--format", "json", "--no-progress"]
        passed = CliRunner().invoke(cli, [*args, "--model", "scripted", "--question", "multi_turn_miss_func_0",
                                          "--min-pass-rate", "1"])
        looped = CliRunner().invoke(cli, [*args, "--model", "looping", "--limit", "1", "--min-pass-rate", "0.5"])
    assert passed.exit_code == 0, passed.output
    assert json.loads(passed.output) == {"mode": "prompting", "graded": 1, "pass_rate": 1.0, "questions": [
        {"question": "multi_turn_miss_func_0", "passed": True}]}
    assert looped.exit_code == 3, looped.output
    summary = json.loads(looped.output[:looped.output.rindex("}") + 1])
    [row] = summary["questions"]
    assert row["question"] == "multi_turn_base_0" and row["passed"] is False
    assert row["why"].startswith("multi_turn:force_terminated") and summary["pass_rate"] == 0.0
    assert "pass rate 0.000 is below --min-pass-rate 0.5" in looped.output


def test_a_question_the_model_fails_on_is_an_error_and_bad_flags_are_refused() -> None:
    with ThreadedProvider(lambda body: ("status", 500)) as server:
        args = ["cases", "play-bfcl", MISS_FUNC, "--model", "m", "--base-url", server.base_url, "--no-progress"]
        failed = CliRunner().invoke(cli, [*args, "--max-retries", "0"])
        bad_mode = CliRunner().invoke(cli, [*args, "--mode", "text"])
        unknown = CliRunner().invoke(cli, [*args, "--question", "nope"])
        zero = CliRunner().invoke(cli, [*args, "--limit", "0"])
        single = CliRunner().invoke(cli, [*args[:2], f"bfcl://{EXAMPLES}/simple", *args[3:]])
    assert failed.exit_code == 1, failed.output
    assert failed.output.splitlines()[1].split()[:2] == ["multi_turn_miss_func_0", "error"]
    assert "HTTP 500" in failed.output
    assert bad_mode.exit_code == 2 and "'text' is not one of 'fc', 'prompting'" in bad_mode.output
    assert unknown.exit_code == 2 and "--question nope: not in" in unknown.output
    assert "multi_turn_miss_func_0" in unknown.output
    assert zero.exit_code == 2 and "--limit" in zero.output
    assert single.exit_code == 2 and "are not multi-turn (e.g. simple_0)" in single.output
