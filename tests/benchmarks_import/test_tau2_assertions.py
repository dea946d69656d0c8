"""tau2's NL_ASSERTION (the run's judge, as tau2's NLAssertionsEvaluator asks it: a local OpenAI-compatible server
scripts its verdicts) and ENV_ASSERTION (toolkit methods on the final DB, in the real sandbox replay)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import evalsi
from evalsi.datasets import load_dataset
from evalsi.errors import BadInputError
from evalsi.records import from_value, to_content
from evalsi.testing import FakeOpenAI
from evalsi.v1alpha1.score_pb2 import OUTCOME_ERROR, OUTCOME_SCORED, OUTCOME_SKIPPED

DOMAIN = Path(__file__).parent / "fixtures" / "tau2" / "library"
DUE = "The agent tells the member when the book is due back."
POLITE = "The agent greets the member."
JUDGE = "tau2-judge"


def _domain(tmp_path: Path, criteria: dict[str, Any]) -> Path:
    domain = tmp_path / "library"
    shutil.copytree(DOMAIN, domain)
    tasks = json.loads((domain / "tasks.json").read_text())
    tasks[0]["evaluation_criteria"].update(criteria)
    (domain / "tasks.json").write_text(json.dumps(tasks[:1]))
    return domain


def _records(domain: Path, conversations: dict[str, str]) -> list[Any]:
    """The task once per conversation: the right calls, then the assistant's closing words."""
    [task] = load_dataset(f"tau2://{domain}")
    records = []
    for name, closing in conversations.items():
        record = type(task)()
        record.CopyFrom(task)
        record.id = name
        record.output.CopyFrom(to_content({"messages": [
            {"role": "user", "content": "Hi, I am m1 and would like to borrow Alamut."},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "1", "function": {"name": "get_member", "arguments": '{"member_id": "m1"}'}},
                {"id": "2", "function": {"name": "lend_book", "arguments": '{"member_id": "m1", "book_id": "b1"}'}}]},
            {"role": "assistant", "content": closing}]}))
        records.append(record)
    return records


def judge_verdicts(body: dict[str, Any]) -> str:
    """A judge that finds the due date told when the conversation says '14 days', and the greeting when it says
    'hello'; answering in tau2's format, one result per expected outcome in order."""
    conversation = body["messages"][-1]["content"]
    outcomes = json.loads(conversation.split("<expectedOutcomes>")[1].split("</expectedOutcomes>")[0])
    said = conversation.split("<conversation>")[1].lower()
    met = {DUE: "14 days" in said, POLITE: "hello" in said}
    return json.dumps({"results": [{"expectedOutcome": o, "reasoning": "read it", "metExpectation": met[o]}
                                   for o in outcomes]})


def _scores(result: Any) -> dict[str, Any]:
    return {s.name: s.number if s.name == "reward" else s.passed for s in result.scores}


async def test_nl_assertions_are_judged_as_tau2_asks_and_cached(tmp_path: Path) -> None:
    domain = _domain(tmp_path, {"nl_assertions": [POLITE, DUE], "reward_basis": ["DB", "NL_ASSERTION"]})
    records = _records(domain, {"told": "Hello! Done: Alamut is due back in 14 days.", "untold": "Hello! Done."})
    async with FakeOpenAI(judge_verdicts) as server:
        judge = {"provider": "openai", "model": JUDGE, "base_url": server.base_url}
        cold = await evalsi.evaluate_async(records, ["builtin/tau2-judged"], judge=judge, cache_dir=tmp_path / "c")
        asked = len(server.requests)
        warm = await evalsi.evaluate_async(records, ["builtin/tau2-judged"], judge=judge, cache_dir=tmp_path / "c")
        assert len(server.requests) == asked == 2  # one call per record; the second run asked nothing
    for results, cached in ((cold, False), (warm, True)):
        got = {r.record_id: r for r in results.results}
        assert all(r.outcome == OUTCOME_SCORED for r in got.values())
        assert _scores(got["told"]) == {"reward": 1.0, "db": True, "communicate": True, "action": True,
                                        "env_assertion": True, "nl_assertion": True}
        assert _scores(got["untold"])["reward"] == 0.0 and _scores(got["untold"])["db"] is True
        nl = next(s for s in got["untold"].scores if s.name == "nl_assertion")
        assert nl.explanation == f"not met: [{DUE!r}]"
        assert [c["met"] for c in from_value(nl.metadata["nl_assertions"])] == [True, False]
        assert from_value(nl.metadata["cached"]) is cached
        assert (nl.cost.total_tokens > 0) is not cached
    # tau2's prompt: the conversation as role: content lines, the outcomes as a list
    prompt = server.requests[0]["messages"]
    assert "Grade each expected outcome individually." in prompt[0]["content"]
    assert "user: Hi, I am m1 and would like to borrow Alamut.\nassistant: Hello!" in prompt[1]["content"]
    assert json.dumps([POLITE, DUE]) in prompt[1]["content"]


async def test_without_a_judge_an_nl_task_is_skipped_and_a_bad_verdict_is_an_error(tmp_path: Path) -> None:
    domain = _domain(tmp_path, {"nl_assertions": [DUE], "reward_basis": ["NL_ASSERTION"]})
    records = _records(domain, {"told": "Due in 14 days."})
    [skipped] = (await evalsi.evaluate_async(records, ["tau2"])).results
    assert skipped.outcome == OUTCOME_SKIPPED
    assert "task 'lend_alamut'" in skipped.reason and "builtin/tau2-judged" in skipped.reason
    # two results for one expected outcome: unreadable, never a verdict
    async with FakeOpenAI(lambda _b: json.dumps({"results": [{"metExpectation": True}] * 2})) as server:
        [errored] = (await evalsi.evaluate_async(
            records, ["builtin/tau2-judged"], judge={"provider": "openai", "model": JUDGE,
                                                     "base_url": server.base_url}, cache=False)).results
        # as tau2: the judge is asked only when the reward_basis names NL_ASSERTION
        unasked = _records(_domain(tmp_path / "u", {"nl_assertions": [DUE], "reward_basis": ["COMMUNICATE"]}),
                           {"unasked": "Due in 14 days."})
        [scored] = (await evalsi.evaluate_async(
            unasked, ["builtin/tau2-judged"], judge={"provider": "openai", "model": JUDGE,
                                                     "base_url": server.base_url}, cache=False)).results
        assert len(server.requests) == 1
    assert errored.outcome == OUTCOME_ERROR and "2 results for 1 expected outcomes" in errored.reason
    assert scored.outcome == OUTCOME_SCORED and _scores(scored)["reward"] == 1.0
    assert next(s for s in scored.scores if s.name == "nl_assertion").explanation.startswith("not judged")


def test_env_assertions_run_on_the_final_db_in_the_sandbox(tmp_path: Path) -> None:
    assert shutil.which("bwrap"), "bubblewrap is not installed: run scripts/test.sh"
    lent = {"func_name": "get_member", "arguments": {"member_id": "m1"},
            "assert_value": {"name": "Ana Novak", "loans": ["b1"]}}
    domain = _domain(tmp_path, {"env_assertions": [lent], "reward_basis": ["ENV_ASSERTION"]})
    right = _records(domain, {"lent": "Done."})
    wrong = _records(_domain(tmp_path / "w", {"env_assertions": [{**lent, "assert_value": {"loans": []}}],
                                             "reward_basis": ["ENV_ASSERTION"]}), {"not-lent": "Done."})
    results = evalsi.evaluate([*right, *wrong], ["tau2"])
    got = {r.record_id: r for r in results.results}
    assert _scores(got["lent"])["reward"] == 1.0 and _scores(got["not-lent"])["reward"] == 0.0
    env = next(s for s in got["not-lent"].scores if s.name == "env_assertion")
    assert env.explanation == "env assertions that do not hold: ['get_member']"


@pytest.mark.parametrize(("criteria", "message"), [
    ({"nl_assertions": "be nice"}, r"\(id 'lend_alamut'\): evaluation_criteria\.nl_assertions: expected a list"),
    ({"env_assertions": [{"func_name": "_secret"}]},
     r"\(id 'lend_alamut'\): evaluation_criteria\.env_assertions: expected a list of \{func_name"),
    ({"env_assertions": [{"func_name": "get_member", "env_type": "user"}]},
     r"evaluation_criteria\.env_assertions: an assertion on the user's environment"),
])
def test_malformed_assertions_are_refused_naming_task_and_field(tmp_path: Path, criteria: dict[str, Any],
                                                               message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        load_dataset(f"tau2://{_domain(tmp_path, criteria)}")
