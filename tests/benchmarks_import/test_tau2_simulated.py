"""A tau2 task as a simulated-user conversation: tau2's user simulator (the persona loop of `evalsi cases simulate`
given tau2's prompt) against the built-in agent acting on the domain's toolkit in a real bubblewrap sandbox; one
local OpenAI-compatible server scripts both models; the conversation graded by builtin/tau2."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

import evalsi
from evalsi.cli.main import cli
from evalsi.datasets import load_dataset
from evalsi.datasets.tau2_sim import FIRST_AGENT_MESSAGE, simulate_tasks
from evalsi.harness import config_from_mapping
from evalsi.judges import JudgeConfig
from evalsi.judges.panel import JudgeSet
from evalsi.records import content_value, from_value
from evalsi.sandbox.access import LadderOpener
from evalsi.testing import FakeOpenAI
from evalsi.testing.reachable_tmp import reachable_tmp_dir
from evalsi.testing.threaded import ThreadedProvider

DOMAIN = Path(__file__).parent.parent.parent / "examples" / "benchmarks" / "tau2" / "library"


@pytest.fixture
def workdir(request: pytest.FixtureRequest) -> Iterator[Path]:
    """A tmp dir the sandbox's unprivileged host user can search (pytest's own is 0700 under root), so the toolkit
    runs on bubblewrap rather than a slower rung."""
    with reachable_tmp_dir(request.node.name) as path:
        yield path


def _user(body: dict[str, Any]) -> str:
    """tau2's simulated user: it sees the agent's messages as its user turns and its own as the assistant's."""
    system = body["messages"][0]["content"]
    assert "<scenario>" in system and "You want to borrow Alamut (book b1)." in system and "###STOP###" in system
    assert body["messages"][1] == {"role": "user", "content": FIRST_AGENT_MESSAGE}
    said = sum(1 for m in body["messages"] if m["role"] == "assistant")
    return ["Hi, I would like to borrow Alamut.", "My member id is m1.", "Thanks, bye! ###STOP###"][min(said, 2)]


def _agent(book: str) -> Any:
    """The agent under test: asks for the member id, looks the member up, lends ``book``, says when it is due."""

    def reply(body: dict[str, Any]) -> Any:
        messages = body["messages"]
        assert "<policy>" in messages[0]["content"] and "at most two books" in messages[0]["content"]
        results = [m["content"] for m in messages if m.get("role") == "tool"]
        if not any("m1" in str(m.get("content")) for m in messages if m["role"] == "user"):
            return "Sure. What is your member id?"
        if not results:
            return ("tool_calls", [{"name": "tau2_get_member", "arguments": {"member_id": "m1"}}])
        if len(results) == 1:
            assert "Ana Novak" in results[0]  # the toolkit's DB answered, in the sandbox
            return ("tool_calls", [{"name": "tau2_lend_book", "arguments": {"member_id": "m1", "book_id": book}}])
        return f"Done ({results[1]}): it is due back in 14 days."

    return reply


@pytest.mark.parametrize(("book", "reward"), [("b1", 1.0), ("b2", 0.0)])
async def test_a_simulated_conversation_is_graded_as_tau2_does(workdir: Path, monkeypatch: pytest.MonkeyPatch,
                                                               book: str, reward: float) -> None:
    assert shutil.which("bwrap"), "bubblewrap is not installed: run scripts/test.sh"
    monkeypatch.setattr(tempfile, "tempdir", str(workdir))
    monkeypatch.chdir(workdir)
    tasks = [r for r in load_dataset(f"tau2://{DOMAIN}") if r.id == "lend_alamut"]
    agent = _agent(book)
    async with FakeOpenAI(lambda body: _user(body) if body["model"] == "user" else agent(body)) as server:
        config = config_from_mapping({"model": {"model": "agent", "base_url": server.base_url, "max_retries": 0},
                                      "max_steps": 6})
        user = JudgeConfig.from_mapping({"model": "user", "base_url": server.base_url, "max_retries": 0,
                                         "name": "user"})
        async with JudgeSet({"user": user}, cache=False) as users:
            records, errors = await simulate_tasks(tasks, config, users.clients["user"], LadderOpener())
    assert errors == {}
    [record] = records
    messages = content_value(record.output)["messages"]
    assert [m["role"] for m in messages][:4] == ["assistant", "user", "assistant", "user"]
    assert messages[1]["content"] == "Hi, I would like to borrow Alamut." and messages[-1]["content"] == "Thanks, bye!"
    assert from_value(record.metadata["tau2_simulation"])["stop"]["reason"] == "goal_met"
    results = await evalsi.evaluate_async(records, ["tau2"])
    scores = {s.name: s for s in results.results[0].scores}
    assert scores["reward"].number == reward, scores
    assert scores["db"].passed is (book == "b1") and scores["communicate"].passed
    assert from_value(scores["db"].metadata["isolation"])["driver"] == "bwrap"


def test_the_cli_simulates_grades_and_writes_the_conversations(workdir: Path, monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(workdir))
    monkeypatch.chdir(workdir)
    agent = _agent("b1")
    with ThreadedProvider(lambda body: _user(body) if body["model"] == "user" else agent(body)) as server:
        (workdir / "agent.yaml").write_text(yaml.safe_dump({
            "model": {"model": "agent", "base_url": server.base_url, "max_retries": 0}, "max_steps": 6}))
        args = ["cases", "simulate-tau2", f"tau2://{DOMAIN}", "--agent-harness", "agent.yaml", "--persona-model",
                "user", "--persona-base-url", server.base_url]
        refused = CliRunner().invoke(cli, [*args, "--task", "nope"])
        done = CliRunner().invoke(cli, [*args, "--task", "lend_alamut", "-o", "out.jsonl", "--format", "json"])
    assert refused.exit_code == 2 and "--task nope: not in" in refused.output and "lend_alamut" in refused.output
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["tasks"] == [{"task": "lend_alamut", "reward": 1.0, "db": True,
                                                 "communicate": True, "action": True, "env_assertion": True}]
    # the conversations as a records file that `evalsi eval` grades again
    [row] = [json.loads(line) for line in (workdir / "out.jsonl").read_text().splitlines()]
    assert row["metadata"]["tau2_simulation"]["stop"]["reason"] == "goal_met"
    assert evalsi.evaluate([row], ["tau2"]).results[0].scores[0].number == 1.0
