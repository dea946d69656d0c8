"""Evals.si evaluators as DeepEval conversational metrics (``evalsi_metric(..., conversational=True)``): a
``ConversationalTestCase`` becomes the record the forward mapping reads back as the same turns, and inside a real
``deepeval.evaluate`` run, in the adapter's venv (built once per session), each case's score, success and reason
equal what ``evalsi.evaluate`` gives on the same records here; a case lacking what the evaluator needs raises
DeepEval's ``MissingTestCaseParamsError`` from ``measure``."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from deepeval_fixtures.venv import adapter_python, run_in_venv

import evalsi
from evalsi.adapters.deepeval.cases import chatbot_role, turn_fields
from evalsi.adapters.deepeval.reverse_turns import conversation_row
from evalsi.adapters.deepeval.traces import rag_turn_fields, tool_turn_fields
from evalsi.datasets.loader import records_from_rows
from evalsi.testing import FakeOpenAI

BOOKING_CALLS = [{"name": "search_flights", "input_parameters": {"to": "Paris"}, "output": ["AF1"]},
                 {"name": "book", "input_parameters": {"flight": "AF1"}}]
CASES: list[dict[str, Any]] = [
    {"name": "booking", "chatbot_role": "a travel agent", "scenario": "a user books a flight",
     "expected_outcome": "Booked: Paris, Monday",
     "turns": [{"role": "user", "content": "Book me a flight to Paris"},
               {"role": "assistant", "content": "Which day?"},
               {"role": "user", "content": "Monday"},
               {"role": "assistant", "content": "Booked: Paris, Monday", "tools_called": BOOKING_CALLS,
                "retrieval_context": ["AF1 flies to Paris on Mondays."]}]},
    {"name": "weather", "expected_outcome": "Rainy in Rome",
     "turns": [{"role": "user", "content": "Weather in Rome?"},
               {"role": "assistant", "content": "Sunny in Rome",
                "tools_called": [{"name": "get_weather", "input_parameters": {"city": "Rome"}}]}]},
    # No tools called and no expected outcome: the trajectory and reference evaluators skip it.
    {"name": "chat", "turns": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]},
]
METRICS: list[dict[str, Any]] = [
    {"evaluator": "builtin/trajectory-match", "params": {"expected": ["search_flights", "book"]}},
    {"evaluator": "builtin/exact-match"},
    {"evaluator": "builtin/contains", "params": {"values": ["Paris"]}},
]


def _row(case: dict[str, Any]) -> dict[str, Any]:
    return conversation_row(**copy.deepcopy(case))


def test_a_conversation_maps_to_the_record_the_forward_mapping_reads_back() -> None:
    (booking, weather, chat) = records_from_rows([_row(case) for case in CASES]).records
    turns = CASES[0]["turns"]
    assert turn_fields(booking) == [{"role": t["role"], "content": t["content"]} for t in turns]
    assert tool_turn_fields(booking)[-1]["tools_called"] == BOOKING_CALLS
    assert rag_turn_fields(booking)[-1]["retrieval_context"] == turns[-1]["retrieval_context"]
    assert chatbot_role(booking, None) == "a travel agent"
    assert (booking.id, booking.reference.text, booking.metadata["scenario"].string_value) == (
        "booking", "Booked: Paris, Monday", "a user books a flight")
    assert tool_turn_fields(weather)[-1]["tools_called"] == [{"name": "get_weather",
                                                              "input_parameters": {"city": "Rome"}}]
    assert not chat.trajectory.steps and not chat.HasField("reference")
    # A conversation waiting on a reply: every turn is the input, and there is no output to grade.
    asked = conversation_row(turns=[{"role": "assistant", "content": "Hi, how can I help?"},
                                    {"role": "user", "content": "Refund me"}])
    assert "output" not in asked and len(asked["input"]["messages"]) == 2


def test_evalsi_conversational_metrics_in_deepeval_evaluate_equal_our_evaluate(
        judge_server: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    judge = {"provider": "openai", "model": "scripted-judge", "base_url": judge_server.base_url}
    metrics = [*METRICS, {"evaluator": "builtin/llm-judge", "judge": judge, "threshold": 0.75}]
    answer = json.loads(run_in_venv(adapter_python(tmp_path_factory), "reverse_conversation_run.py",
                                    {"cases": CASES, "metrics": metrics}, tmp_path))
    assert len(judge_server.requests) >= 3  # llm-judge asked our judge in the DeepEval process, once per case
    specs = [{"ref": m["evaluator"], "params": m.get("params", {})} for m in METRICS]
    ours = evalsi.evaluate([_row(case) for case in CASES], [*specs, "builtin/llm-judge"], judge=judge)
    by_case = {test["name"]: test["metrics"] for test in answer["graded"]}
    compared = 0
    for result in ours.results:
        graded = by_case[result.record_id].get(f"evalsi:builtin/{result.evaluator}@1.0.0")
        if not result.scores:  # skipped here (missing trajectory or reference): skipped there
            assert graded is None, (result.record_id, result.evaluator, graded)
            continue
        scores = {s.name: s for s in result.scores}
        if result.evaluator == "trajectory-match":  # its number is the score, its verdict the success
            value, success = scores["similarity"].number, scores["passed"].passed
        elif result.evaluator == "llm-judge":
            (score,) = result.scores
            value, success = score.number, score.number >= 0.75
        else:
            (score,) = result.scores
            value, success = float(score.passed), score.passed
        assert graded is not None, (result.record_id, result.evaluator)
        assert (graded["score"], graded["success"]) == (value, success), (result.record_id, result.evaluator)
        reason = "\n".join(s.explanation for s in result.scores if s.explanation) or None
        assert graded["reason"] == reason, (result.record_id, result.evaluator)
        compared += 1
    assert compared == 10  # booking and weather by all four; chat by contains and llm-judge only
    assert by_case["booking"]["evalsi:builtin/trajectory-match@1.0.0"]["success"] is True
    assert by_case["weather"]["evalsi:builtin/trajectory-match@1.0.0"]["success"] is False
    assert by_case["booking"]["evalsi:builtin/exact-match@1.0.0"]["success"] is True
    assert by_case["weather"]["evalsi:builtin/exact-match@1.0.0"]["success"] is False
    assert by_case["booking"]["evalsi:builtin/llm-judge@1.0.0"]["score"] == 1.0  # "Paris" in it: the judge's 5/5
    # measure() itself, outside DeepEval's error handling: the case without tool calls raises its error.
    assert answer["measured"][:2] == [1.0, 0.0] and "missing trajectory" in answer["measured"][2]
    assert answer["asserted"][:2] == [True, False] and "missing trajectory" in answer["asserted"][2]
