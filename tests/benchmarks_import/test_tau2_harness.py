"""A tau2:// task run by the built-in agent (a scripted model) through the harness: the domain's toolkit is an MCP
server in the record's sandbox (real bubblewrap), the agent calls its tools, and builtin/tau2 grades the trajectory
by replaying it."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

import evalsi
from evalsi.datasets import load_dataset
from evalsi.records import from_value
from evalsi.testing.threaded import ThreadedProvider
from evalsi_harness.main import cli

DOMAIN = Path(__file__).parent / "fixtures" / "tau2" / "library"


def _librarian(book: str) -> Any:
    """A model that looks member m1 up, lends ``book`` and says when it is due, one step at a time."""

    def reply(body: dict[str, Any]) -> Any:
        results = [m["content"] for m in body["messages"] if m.get("role") == "tool"]
        if not results:
            assert {t["function"]["name"] for t in body["tools"]} >= {"tau2_get_member", "tau2_lend_book"}
            return ("tool_calls", [{"name": "tau2_get_member", "arguments": {"member_id": "m1"}}])
        if len(results) == 1:
            assert "Ana Novak" in results[0]  # the server's DB answered
            return ("tool_calls", [{"name": "tau2_lend_book", "arguments": {"member_id": "m1", "book_id": book}}])
        return f"Done ({results[1]}): it is due back in 14 days."

    return reply


@pytest.mark.parametrize(("book", "reward"), [("b1", 1.0), ("b2", 0.0)])
def test_the_agent_acts_on_the_domain_in_its_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, book: str,
                                                     reward: float) -> None:
    assert shutil.which("bwrap"), "bubblewrap is not installed: run scripts/test.sh"
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    task = next(r for r in load_dataset(f"tau2://{DOMAIN}") if r.id == "lend_alamut")
    (tmp_path / "tasks.jsonl").write_text(json.dumps({
        "id": task.id, "input": task.input.text,
        "metadata": {"environment": from_value(task.metadata["environment"])}}) + "\n")
    with ThreadedProvider(_librarian(book)) as server:
        (tmp_path / "harness.yaml").write_text(yaml.safe_dump({
            "model": {"model": "librarian", "base_url": server.base_url, "max_retries": 0}, "max_steps": 6}))
        done = CliRunner().invoke(cli, ["run", "-c", "harness.yaml", "--tasks", "tasks.jsonl", "-o", "out.jsonl"])
    assert done.exit_code == 0, done.output
    [row] = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    # the harness's record, with the task's reference, graded as tau2 grades it
    graded = {**row, "reference": task.reference.text}
    results = evalsi.evaluate([graded], ["tau2"])
    scores = {s.name: s for s in results.results[0].scores}
    assert scores["reward"].number == reward, scores
    assert scores["communicate"].passed and scores["action"].passed is (book == "b1")
    assert scores["db"].passed is (book == "b1")
