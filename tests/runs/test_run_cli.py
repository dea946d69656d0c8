"""``evalsi run``: the metric table and gates, exit codes 0/2/3, --dry-run, --set, --output and --server."""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from evalsi.cli.main import cli
from evalsi.testing import FakeOpenAI

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "runs"
OUTPUTS = EXAMPLES / "qa-outputs.yaml"
MODEL = EXAMPLES / "qa-model.yaml"


@contextmanager
def threaded_provider(reply: Callable[[dict[str, Any]], str]) -> Iterator[FakeOpenAI]:
    """A fake OpenAI-compatible server on its own loop and thread, for the synchronous CLI to call."""
    server = FakeOpenAI(reply=reply)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(timeout=10)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["run", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_the_outputs_example_passes_its_gates_and_exits_0() -> None:
    code, out, err = run("-f", str(OUTPUTS))
    assert code == 0, err
    assert "exact-match" in out and "│ 30 │" in out and "0.567" in out
    assert "gates:" in out
    assert "✓ metric('exact-match').mean >= 0.5  (metric('exact-match').mean = 0.5667 >= 0.5)" in out
    assert "✗" not in out


def test_a_failing_gate_exits_3_and_shows_its_values() -> None:
    code, out, err = run("-f", str(OUTPUTS), "--set", "spec.gates.0=metric('exact-match').mean >= 0.8")
    assert code == 3
    assert "✗ metric('exact-match').mean >= 0.8  (metric('exact-match').mean = 0.5667 < 0.8)" in out
    assert "1 of 4 gates failed: metric('exact-match').mean >= 0.8" in err


def test_json_and_markdown_output_and_saving(tmp_path: Path) -> None:
    saved = tmp_path / "run.json"
    code, out, err = run("-f", str(OUTPUTS), "--format", "json", "-o", str(saved))
    assert code == 0
    document = json.loads(out)
    assert document["state"] == "RUN_STATE_SUCCEEDED" and len(document["gates"]) == 4
    assert all(g["passed"] for g in document["gates"]) and document["project"] == "quickstart"
    assert document["manifest"]["specHash"] and json.loads(saved.read_text())["id"] == document["id"]
    assert f"saved 150 results to {saved}" in err
    code, out, _ = run("-f", str(OUTPUTS), "--format", "md")
    assert code == 0 and "| exact-match | 30 |" in out and "- ✓ `metric('exact-match').mean >= 0.5`" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "spec.evaluators.0.ref=exact-mach"], "did you mean exact-match"),
        (["--set", "spec.trails=2"], "spec.trails: unknown field; did you mean trials?"),
        (["--set", "spec.gates.0=metric('exact-match').mean >="], "spec.gates[0]: invalid CEL"),
        (["--set", "spec=3"], "spec: must be a mapping"),
        (["--set", "nonsense"], "--set 'nonsense': expected KEY=VALUE"),
        (["--no-wait"], "--no-wait applies to server runs only"),
    ],
)
def test_bad_input_exits_2_with_a_message_naming_it(args: list[str], message: str) -> None:
    code, out, err = run("-f", str(OUTPUTS), *args)
    assert code == 2, err
    assert message in err and out == ""


def test_a_broken_file_exits_2_naming_file_and_line(tmp_path: Path) -> None:
    spec = tmp_path / "run.yaml"
    spec.write_text(OUTPUTS.read_text().replace("    - ref: builtin/numeric-match\n", "    - reff: x\n"))
    code, _, err = run("-f", str(spec))
    assert code == 2 and f"{spec}:17: spec.evaluators[2].reff: unknown field; did you mean ref?" in err
    code, _, err = run("-f", str(tmp_path / "missing.yaml"))
    assert code == 2 and "no such file" in err


def test_dry_run_prints_the_plan_and_calls_nothing() -> None:
    code, out, err = run("-f", str(MODEL), "--dry-run")  # nothing listens on the example's base URL
    assert code == 0, err
    assert "dry run: qa-model (project quickstart); nothing was called or stored" in out
    assert "8 samples in 1 shard(s)" in out and "trials       3" in out
    assert "tasks        12 (generate 3, evaluate 9; by pool: judge 3, cpu 9)" in out
    assert "target       24 calls" in out and "≤ 768 output tokens" in out
    code, out, _ = run("-f", str(MODEL), "--dry-run", "--format", "json")
    document = json.loads(out)
    assert code == 0 and document["tasks"] == 12 and document["evaluations"] == 72
    assert document["target"]["outputTokens"] == 768 and document["trials"] == 3


def test_a_model_run_over_a_fake_provider_and_a_budget_that_stops_it(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "capitals.jsonl", tmp_path / "capitals.jsonl")
    spec = tmp_path / "run.yaml"
    spec.write_text(MODEL.read_text())
    answers = {"France": "Paris", "Japan": "Tokyo", "Italy": "Rome", "Canada": "Ottawa", "Australia": "Canberra",
               "Egypt": "Cairo", "Brazil": "Brasília", "Kenya": "Nairobi"}

    def reply(body: dict) -> str:
        question = body["messages"][-1]["content"]
        return next(city for country, city in answers.items() if country in question)

    with threaded_provider(reply) as server:
        base = ["-f", str(spec), "--set", f"spec.target.model.baseUrl={server.base_url}"]
        code, out, err = run(*base)
        assert code == 0, err + out
        assert "exact-match.pass^3" in out and "✓ metric('exact-match').passHatK(3) >= 0.6" in out
        assert len(server.requests) == 24
        code, out, err = run(*base, "--set", "spec.budget.tokens=100", "--set", "spec.concurrency=1")
        assert code == 3
        assert "budget exceeded: token budget exceeded:" in err and "of 100 (over by" in err
