"""BFCL's multi-turn categories: ``bfcl://`` imports their questions (the example's, and every one of bfcl-eval's
four v4 files), and ``builtin/bfcl-multi-turn`` grades a conversation or BFCL's per-turn result form."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import evalsi
from evalsi.datasets import load_dataset
from evalsi.datasets.bfcl_multi import CATEGORIES
from evalsi.errors import BadInputError
from evalsi.packs.benchmarks.bfcl_multi_exec import parse_ground_truth
from evalsi.packs.benchmarks.bfcl_multi_sim import SIMULATORS
from evalsi.records import from_value, to_content
from evalsi.v1alpha1.record_pb2 import Record

EXAMPLES = Path(__file__).parents[2] / "examples" / "benchmarks" / "bfcl"
DATA = Path(importlib.util.find_spec("bfcl_eval").origin).parent / "data"  # type: ignore[arg-type,union-attr]
BASE_ANSWER = [  # the example's multi_turn_base_0 answered right, a step per call
    ["[get_user_id(user='Bor')]", "[send_message(receiver_id='USR002', message='The printer on floor 2 is jammed "
                                  "again.')]"],
    ["[edit_ticket(ticket_id=1, updates={'priority': 4}), get_ticket(ticket_id=1)]"],
    ["[close_ticket(ticket_id=1)]"],
]


def _record(category: str, output: Any) -> Record:
    (record,) = load_dataset(f"bfcl://{EXAMPLES}/{category}")
    record.output.CopyFrom(to_content(output))
    return record


def _grade(*records: Record) -> list[tuple[bool | None, str]]:
    """Each record's (passed, explanation), or (None, the reason) when skipped."""
    for index, record in enumerate(records):
        record.id = f"{record.id}-{index}"  # answers to one question, told apart
    by_id = {r.record_id: r for r in evalsi.evaluate(list(records), ["builtin/bfcl-multi-turn"]).results}
    return [(by_id[r.id].scores[0].passed, by_id[r.id].scores[0].explanation) if by_id[r.id].scores
            else (None, by_id[r.id].reason) for r in records]


def test_a_miss_func_question_holds_every_turn_and_its_held_back_function() -> None:
    (record,) = load_dataset(f"bfcl://{EXAMPLES}/multi_turn_miss_func")
    assert set(record.metadata) >= {"bfcl_turns", "bfcl_missed_functions", "bfcl_involved_classes", "tools"}
    turns = from_value(record.metadata["bfcl_turns"])
    missed = from_value(record.metadata["bfcl_missed_functions"])
    assert [len(turn) for turn in turns] == [1, 1, 1, 1]
    assert turns[2][0]["content"].startswith("[{'name': 'resolve_ticket'")  # BFCL's prompting-mode message
    assert turns[2][0]["content"].endswith("I have updated some more functions you can choose from. What about now?")
    assert [f["name"] for f in missed["2"]] == ["resolve_ticket"]
    tools = [t["function"]["name"] for t in from_value(record.metadata["tools"])]
    assert "resolve_ticket" not in tools and "create_ticket" in tools and "send_message" in tools
    assert from_value(record.metadata["bfcl_involved_classes"]) == ["MessageAPI", "TicketAPI"]
    assert record.input.messages.messages[-1].content == "Open a ticket titled 'VPN down' with priority 3."
    assert "resolve_ticket" not in record.input.messages.messages[0].content  # not offered until turn 2
    reference = json.loads(record.reference.text)
    assert reference["ground_truth"][1] == [] and reference["initial_config"]["TicketAPI"]["ticket_counter"] == 2


def test_bfcls_long_context_file_imports_and_what_is_not_built_is_skipped_by_name() -> None:
    """(test_bfcl_multi_reference.py reads bfcl-eval's other three multi-turn files and grades them.)"""
    records = list(load_dataset(f"bfcl://{DATA}/{CATEGORIES[-1]}"))
    assert len(records) == 200 and CATEGORIES[-1] == "multi_turn_long_context"
    for record in records:
        for turn in json.loads(record.reference.text)["ground_truth"]:
            for call in turn:
                parse_ground_truth(call)  # BFCL's possible answers (positional arguments too) all read
    # a question involving a class with no native simulator is skipped, naming it; TradingBot's long context is graded
    trading = next(r for r in records if json.loads(r.reference.text)["involved_classes"] == ["TradingBot"])
    reference = json.loads(records[0].reference.text)
    records[0].reference.text = json.dumps({**reference, "involved_classes": ["TwitterAPI", "WeatherAPI"]})
    for record in (records[0], trading):
        record.output.CopyFrom(to_content([["[get_current_time()]"]] * 4))
    unknown, long_context = _grade(records[0], trading)
    assert unknown == (None, f"BFCL class 'WeatherAPI': no simulator; built: {', '.join(SIMULATORS)}")
    assert long_context[0] is False and long_context[1].startswith("multi_turn:")


def test_a_conversation_and_bfcls_result_form_are_graded_turn_by_turn() -> None:
    conversation = {"messages": [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "1", "name": "get_user_id",
                                                             "arguments": {"user": "Bor"}}]},
        {"role": "tool", "content": '{"user_id": "USR002"}', "tool_call_id": "1"},
        {"role": "assistant", "content": "[send_message(receiver_id='USR002', message='The printer on floor 2 "
                                         "is jammed again.')]"},
        {"role": "assistant", "content": "Sent."},
        {"role": "user", "content": "Raise the priority of ticket 1 to 4, then show me the ticket."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "2", "name": "edit_ticket", "arguments": {"ticket_id": 1, "updates": {"priority": 4}}},
            {"id": "3", "name": "get_ticket", "arguments": '{"ticket_id": 1}'}]},
        {"role": "user", "content": "Close it."},
        {"role": "assistant", "content": "[close_ticket(ticket_id=1)]"},
    ]}
    wrong_text = [BASE_ANSWER[0], BASE_ANSWER[1], ["[resolve_ticket(ticket_id=1, resolution='done')]"]]
    no_show = [BASE_ANSWER[0], ["[edit_ticket(ticket_id=1, updates={'priority': 4})]"], BASE_ANSWER[2]]
    verdicts = _grade(_record("multi_turn_base", conversation), _record("multi_turn_base", BASE_ANSWER),
                      _record("multi_turn_base", wrong_text), _record("multi_turn_base", no_show),
                      _record("multi_turn_base", BASE_ANSWER[:2]),
                      _record("multi_turn_base", [["I cannot do that."], *BASE_ANSWER[1:]]))
    assert verdicts[0] == (True, "") and verdicts[1] == (True, "")
    assert verdicts[2][1].startswith("multi_turn:instance_state_mismatch: Model instance for TicketAPI")
    assert verdicts[3][1].startswith("multi_turn:execution_response_mismatch")  # the ticket was never shown
    assert verdicts[4][1].startswith("multi_turn:force_terminated")
    assert verdicts[5][1] == "multi_turn:empty_turn_model_response: Model response list is empty for turn 0"
    # a model target's one answer (the first turn's) is no conversation: skipped, saying how to play the questions
    ((passed, reason),) = _grade(_record("multi_turn_base", "[get_user_id(user='Bor')]"))
    assert passed is None and reason.endswith("play the questions with evalsi.datasets.bfcl_multi_drive")


def test_a_held_back_function_is_graded_from_the_turn_that_adds_it() -> None:
    send = ["[get_user_id(user='Cene')]", "[send_message(receiver_id='USR003', message='VPN is back.')]"]
    right = [["[create_ticket(title='VPN down', priority=3)]"], ["I have no function to resolve tickets."],
             ["[resolve_ticket(ticket_id=2, resolution='Restarted the VPN gateway')]"], send]
    early = [["[create_ticket(title='VPN down', priority=3)]"],
             ["[resolve_ticket(ticket_id=2, resolution='Restarted the VPN gateway')]"], ["Already done."], send]
    verdicts = _grade(_record("multi_turn_miss_func", right), _record("multi_turn_miss_func", early))
    assert verdicts[0] == (True, "")
    # resolved a turn early (with a function it had not been given): BFCL finds the turn that adds it empty
    assert verdicts[1][1].startswith("multi_turn:empty_turn_model_response")


def test_bad_files_are_refused_by_name(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES, tmp_path / "bfcl")
    root = tmp_path / "bfcl"
    question = root / "BFCL_v3_multi_turn_base.json"
    entry = json.loads(question.read_text())

    def refused(change: dict[str, Any], match: str) -> None:
        question.write_text(json.dumps({**entry, **change}) + "\n")
        with pytest.raises(BadInputError, match=match):
            list(load_dataset(f"bfcl://{question}"))

    refused({"involved_classes": ["MessageAPI", "WebSearchAPI"]},
            "involved_classes: 'WebSearchAPI' is not one of BFCL's multi-turn classes; accepted: GorillaFileSystem")
    refused({"involved_classes": ["TravelAPI"]}, r"multi_turn_func_doc/travel_booking.json \(the functions of "
                                                 r"TravelAPI, for .*BFCL_v3_multi_turn_base.json:1\): no such file")
    refused({"missed_function": {"1": ["fly"]}}, r"missed_function\['1'\]: 'fly' is not one of the functions")
    refused({"question": entry["question"][:2]}, "its possible answer: expected a list of 2 turns")
    refused({"question": [*entry["question"][:2], []]}, r"question\[2\]: no messages")
