"""tau2:// datasets and builtin/tau2: a tiny library domain in tau2's format (a DB, two tools, two tasks), graded
as tau2's evaluator does, the domain's tools replayed in a real bubblewrap sandbox."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import evalsi
from evalsi.api.run_dataset import load_run_dataset
from evalsi.datasets import load_dataset
from evalsi.errors import BadInputError
from evalsi.packs.benchmarks.tau2 import action_matches, communicated, conversation, missing_actions
from evalsi.records import from_value, to_content
from evalsi.v1alpha1.record_pb2 import STEP_TYPE_LLM, STEP_TYPE_TOOL, Record
from evalsi.v1alpha1.run_pb2 import EvalRun
from evalsi.v1alpha1.score_pb2 import OUTCOME_SCORED

DOMAIN = Path(__file__).parent / "fixtures" / "tau2" / "library"


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": name, "function": {"name": name, "arguments": json.dumps(arguments)}}


def _conversation(*turns: tuple[str, list[dict[str, Any]]]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Hello, I would like to borrow a book."}]
    for text, calls in turns:
        messages.append({"role": "assistant", "content": text, "tool_calls": calls})
    return {"messages": messages}


def test_tasks_become_records() -> None:
    dataset = load_dataset(f"tau2://{DOMAIN}")
    assert dataset.format == "tau2" and [r.id for r in dataset] == ["lend_alamut", "refuse_on_loan"]
    record = dataset.records[0]
    assert "Reason for call:\n  You want to borrow Alamut (book b1)." in record.input.text
    assert record.metadata["tau2_domain"].string_value == "library"
    assert "at most two books" in record.metadata["tau2_policy"].string_value
    tools = {t["function"]["name"]: t["function"] for t in from_value(record.metadata["tools"])}
    assert set(tools) == {"get_member", "lend_book"}  # read from tools.py's @is_tool methods, not run
    assert tools["lend_book"]["parameters"]["required"] == ["member_id", "book_id"]
    assert tools["lend_book"]["parameters"]["properties"]["days"] == {"type": "integer",
                                                                      "description": "Days until the book is due."}
    reference = json.loads(record.reference.text)
    assert reference["evaluation_criteria"]["communicate_info"] == ["14 days"]
    assert reference["db"]["books"]["b1"]["available"] is True and "class LibraryTools" in reference["tools_source"]
    assert json.loads(dataset.records[1].reference.text)["initial_state"]["agent_data"] == {
        "members": {"m1": {"loans": ["b9"]}}}


def test_tasks_needing_the_user_environment_are_refused(tmp_path: Path) -> None:
    domain = tmp_path / "library"
    shutil.copytree(DOMAIN, domain)
    tasks = json.loads((domain / "tasks.json").read_text())
    tasks[0]["evaluation_criteria"]["actions"][0]["requestor"] = "user"
    (domain / "tasks.json").write_text(json.dumps(tasks))
    with pytest.raises(BadInputError, match=r"task 0 \(id 'lend_alamut'\): evaluation_criteria.actions: a user's"):
        load_dataset(f"tau2://{domain}")
    with pytest.raises(BadInputError, match="not a directory"):
        load_dataset(f"tau2://{tmp_path}/nowhere")


def test_communicate_and_action_rules() -> None:
    # tau2: lower case, commas removed from the assistant's text (not from the info)
    assert communicated(["14 Days", "1000 euros"], ["It is due in 14 days.", "That costs 1,000 euros"]) == []
    assert communicated(["1,000 euros"], ["That costs 1,000 euros"]) == ["1,000 euros"]
    lend = {"name": "lend_book", "arguments": {"member_id": "m1", "book_id": "b1"}, "compare_args": ["book_id"]}
    assert action_matches(lend, "lend_book", {"member_id": "m2", "book_id": "b1"})  # only book_id compared
    assert not action_matches(lend, "lend_book", {"book_id": "b2"})
    # without compare_args: the arguments the call gave, compared with the action's
    look = {"name": "get_member", "arguments": {"member_id": "m1"}}
    assert action_matches(look, "get_member", {"member_id": "m1"})
    assert not action_matches(look, "get_member", {"member_id": "m1", "verbose": True})
    assert missing_actions([look, lend], [("get_member", {"member_id": "m1"})]) == ["lend_book"]


CASES = {
    # record id, conversation -> (reward, db, communicate, action)
    "lend_alamut/right": ("lend_alamut", _conversation(
        ("Let me look you up.", [_call("get_member", member_id="m1")]),
        ("", [_call("lend_book", member_id="m1", book_id="b1", days=14)]),
        ("Done: Alamut is yours, due back in 14 days.", [])), (1.0, True, True, True)),
    "lend_alamut/wrong-member": ("lend_alamut", _conversation(
        ("", [_call("lend_book", member_id="m2", book_id="b1")]),
        ("Lent for 14 days.", [])), (0.0, False, True, False)),
    "lend_alamut/not-told": ("lend_alamut", _conversation(
        ("", [_call("get_member", member_id="m1"), _call("lend_book", member_id="m1", book_id="b1")]),
        ("Done.", [])), (0.0, True, False, True)),
    # a call that raises (b2 is on loan) changes nothing: the DB still matches
    "refuse_on_loan/right": ("refuse_on_loan", _conversation(
        ("", [_call("get_member", member_id="m1"), _call("lend_book", member_id="m1", book_id="b2")]),
        ("Sorry, that book is on loan.", [])), (1.0, True, True, True)),
    "refuse_on_loan/no-lookup": ("refuse_on_loan", _conversation(("Sorry, that book is on loan.", [])),
                                 (0.0, True, True, False)),
}


def test_graded_as_tau2_does_in_a_sandbox() -> None:
    assert shutil.which("bwrap"), "bubblewrap is not installed: run scripts/test.sh"
    tasks = {r.id: r for r in load_dataset(f"tau2://{DOMAIN}")}
    records = []
    for name, (task, messages, _expected) in CASES.items():
        record = type(tasks[task])()
        record.CopyFrom(tasks[task])
        record.id = name
        record.output.CopyFrom(to_content(messages))
        records.append(record)
    results = evalsi.evaluate(records, ["tau2"])
    got: dict[str, tuple[Any, ...]] = {}
    for result in results.results:
        assert result.outcome == OUTCOME_SCORED, result
        scores = {s.name: s for s in result.scores}
        got[result.record_id] = (scores["reward"].number, scores["db"].passed, scores["communicate"].passed,
                                 scores["action"].passed)
        assert from_value(scores["db"].metadata["isolation"])["driver"] == "bwrap"
    assert got == {name: expected for name, (_t, _c, expected) in CASES.items()}
    assert results.metric("tau2.reward").mean == pytest.approx(2 / 5)


def test_tasks_without_criteria_or_expected_actions(tmp_path: Path) -> None:
    domain = tmp_path / "library"
    shutil.copytree(DOMAIN, domain)
    tasks = json.loads((domain / "tasks.json").read_text())
    # tau2: no criteria is reward 1; no expected actions (None, not []) is a DB match, whatever the agent wrote
    tasks = [{**tasks[0], "id": "none", "evaluation_criteria": None},
             {**tasks[0], "id": "say-only", "evaluation_criteria": {"communicate_info": ["14 days"]}}]
    (domain / "tasks.json").write_text(json.dumps(tasks))
    records = list(load_dataset(f"tau2://{domain}"))
    for record in records:
        record.output.CopyFrom(to_content(_conversation(("", [_call("lend_book", member_id="m2", book_id="b1")]),
                                                        ("Due in 14 days.", []))))
    results = evalsi.evaluate(records, ["tau2"])
    got = {r.record_id: {s.name: s.number if s.name == "reward" else s.passed for s in r.scores}
           for r in results.results}
    passed = {"reward": 1.0, "db": True, "communicate": True, "action": True, "env_assertion": True}
    assert got == {"none": passed, "say-only": passed}


def test_a_trajectory_is_a_conversation() -> None:
    """The harness's record: tool calls (named tau2_<tool> by the environment's MCP server) and the model's texts in
    its trajectory, the last answer as its output."""
    record = Record(output=to_content("Anything else?"))
    said = record.trajectory.steps.add(type=STEP_TYPE_LLM)
    said.output.CopyFrom(to_content("Lent: it is due in 14 days."))
    call = record.trajectory.steps.add(type=STEP_TYPE_TOOL).tool_call
    call.name = "tau2_lend_book"
    call.arguments.struct_value.update({"member_id": "m1", "book_id": "b1"})
    texts, calls = conversation(record)
    assert calls == [("lend_book", {"member_id": "m1", "book_id": "b1"})]
    assert texts == ["Anything else?", "Lent: it is due in 14 days."]


def test_served_runs_read_a_domain_under_the_datasets_dir(tmp_path: Path) -> None:
    root = tmp_path / "datasets"
    shutil.copytree(DOMAIN, root / "library")
    run = EvalRun()
    run.spec.dataset.path = "library/tasks.json"
    run.spec.dataset.format = "tau2"
    assert [r.id for r in load_run_dataset(run, datasets_dir=root)] == ["lend_alamut", "refuse_on_loan"]
    # a domain file that leads out of the domain's directory is refused, naming it
    (tmp_path / "db.json").write_text((DOMAIN / "db.json").read_text())
    (root / "library" / "db.json").unlink()
    (root / "library" / "db.json").symlink_to(tmp_path / "db.json")
    with pytest.raises(BadInputError, match=r"^library/db\.json: leads outside the domain directory"):
        list(load_run_dataset(run, datasets_dir=root))
