"""The agent pack's evaluators over hand-built trajectories: pass, fail and skip paths."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import json_format

from evalsi.errors import BadInputError, SkipRecord
from evalsi.evaluators import Evaluator, normalize_scores
from evalsi.packs.agent.efficiency import budget_adherence, step_efficiency
from evalsi.packs.agent.outcome import goal_completion, task_success
from evalsi.packs.agent.tools import loop_detection, tool_call_accuracy, tool_errors, trajectory_match
from evalsi.records import make_record
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score


def call(name: str, status: str = "OK", error: str = "", **arguments: Any) -> dict[str, Any]:
    """One TOOL step in the protobuf JSON mapping."""
    tool_call: dict[str, Any] = {"name": name, "arguments": arguments, "status": f"TOOL_CALL_STATUS_{status}"}
    if error:
        tool_call["error"] = error
    if status == "BLOCKED":
        tool_call["blockedBy"] = "approval-gate"
    return {"type": "STEP_TYPE_TOOL", "name": name, "toolCall": tool_call}


def llm(tokens: int = 0, usd: float = 0.0) -> dict[str, Any]:
    return {"type": "STEP_TYPE_LLM", "name": "chat", "usage": {"totalTokens": tokens, "costUsd": usd}}


def record(steps: list[dict[str, Any]] | None = None, **fields: Any) -> Record:
    rec = make_record(
        id=fields.pop("id", "r1"), reference=fields.pop("reference", None), metadata=fields.pop("metadata", None)
    )
    extra: dict[str, Any] = dict(fields)
    if steps is not None:
        extra["trajectory"] = {"steps": steps}
    json_format.ParseDict(extra, rec)
    return rec


def run(ev: Evaluator, subject: Any, **params: Any) -> dict[str, Score]:
    """Validate params as the runner does, fill in defaults, call, and normalize the result."""
    bound = ev.bind(params)
    defaults = {p.name: p.default for p in ev.params if not p.required}
    return {s.name: s for s in normalize_scores(ev, ev(subject, **{**defaults, **bound.params}))}


SEARCH_THEN_BOOK = [
    llm(100),
    call("search", query="flights to Lisbon", limit=5),
    llm(120),
    call("book", flight="TP123"),
    llm(80),
]


# --- tool-call-accuracy ---


def test_tool_call_accuracy_perfect_with_argument_subset() -> None:
    expected = [{"name": "search", "arguments": {"query": "flights to Lisbon"}}, "book"]
    scores = run(tool_call_accuracy, record(SEARCH_THEN_BOOK), expected=expected)
    assert scores["precision"].number == scores["recall"].number == scores["f1"].number == 1.0
    assert scores["exact"].passed


def test_tool_call_accuracy_argument_mismatch_and_extra_call() -> None:
    rec = record([*SEARCH_THEN_BOOK, call("email", to="me")])
    expected = [{"name": "search", "arguments": {"query": "flights to Porto"}}, {"name": "book"}]
    scores = run(tool_call_accuracy, rec, expected=expected)
    assert scores["recall"].number == pytest.approx(0.5)
    assert scores["precision"].number == pytest.approx(1 / 3)
    assert scores["f1"].number == pytest.approx(0.4)
    assert not scores["exact"].passed
    assert "search" in scores["recall"].explanation and "email" in scores["precision"].explanation
    names_only = run(tool_call_accuracy, rec, expected=expected, match_arguments=False)
    assert names_only["recall"].number == 1.0 and names_only["precision"].number == pytest.approx(2 / 3)


def test_tool_call_accuracy_reads_reference_and_uses_best_matching() -> None:
    # Greedy would pair the bare "search" with the first call and leave the specific one unmatched.
    rec = record(
        [call("search", query="a"), call("search", query="b")],
        reference={"tool_calls": ["search", {"function": {"name": "search", "arguments": '{"query": "a"}'}}]},
    )
    scores = run(tool_call_accuracy, rec)
    assert scores["recall"].number == 1.0 and scores["exact"].passed


def test_tool_call_accuracy_order_matters() -> None:
    rec = record(SEARCH_THEN_BOOK)
    assert run(tool_call_accuracy, rec, expected=["book", "search"])["exact"].passed
    ordered = run(tool_call_accuracy, rec, expected=["book", "search"], order_matters=True)
    assert ordered["recall"].number == 0.5 and not ordered["exact"].passed


def test_tool_call_accuracy_same_multiset_counts_repeats() -> None:
    rec = record([call("search", q=1), call("search", q=1)])
    scores = run(tool_call_accuracy, rec, expected=["search"])
    assert scores["recall"].number == 1.0 and scores["precision"].number == 0.5 and not scores["exact"].passed


def test_tool_call_accuracy_no_calls_expected_none() -> None:
    scores = run(tool_call_accuracy, record([llm(10)]), expected=[])
    assert scores["precision"].number == scores["recall"].number == 1.0 and scores["exact"].passed


def test_tool_call_accuracy_skips_without_expectation_and_rejects_bad_params() -> None:
    with pytest.raises(SkipRecord, match="no expected tool calls"):
        run(tool_call_accuracy, record(SEARCH_THEN_BOOK))
    with pytest.raises(BadInputError, match="expected"):
        run(tool_call_accuracy, record(SEARCH_THEN_BOOK), expected=[{"arguments": {}}])
    with pytest.raises(ValueError, match="reference 'tool_calls'"):
        run(tool_call_accuracy, record(SEARCH_THEN_BOOK, reference={"tool_calls": "search"}))


# --- trajectory-match ---


@pytest.mark.parametrize(
    ("expected", "mode", "passed"),
    [
        (["search", "book"], "exact", True),
        (["book", "search"], "exact", False),
        (["search"], "exact", False),
        (["search", "book"], "in_order", True),
        (["search"], "in_order", True),
        (["book", "search"], "in_order", False),
        (["book", "search"], "any_order", True),
        (["book"], "any_order", False),
        (["book"], "superset", True),
        (["book", "pay"], "superset", False),
        (["search", "book", "pay"], "subset", True),
        (["search"], "subset", False),
    ],
)
def test_trajectory_match_modes(expected: list[str], mode: str, passed: bool) -> None:
    scores = run(trajectory_match, record(SEARCH_THEN_BOOK), expected=expected, mode=mode)
    assert scores["passed"].passed is passed
    if not passed:
        assert scores["passed"].explanation.startswith(mode)


def test_trajectory_match_similarity_and_reference() -> None:
    rec = record(SEARCH_THEN_BOOK, reference={"trajectory": ["search", "pay", "book"]})
    scores = run(trajectory_match, rec)
    assert not scores["passed"].passed and "missing pay" in scores["passed"].explanation
    assert scores["similarity"].number == pytest.approx(2 / 3)
    with pytest.raises(SkipRecord):
        run(trajectory_match, record(SEARCH_THEN_BOOK))
    with pytest.raises(BadInputError, match="mode"):
        run(trajectory_match, record(SEARCH_THEN_BOOK), expected=["search"], mode="fuzzy")


# --- tool-errors ---


def test_tool_errors_blocked_is_not_an_error() -> None:
    rec = record([call("delete_db", status="BLOCKED"), call("search"), call("search")])
    scores = run(tool_errors, rec)
    assert scores["error_rate"].number == 0.0 and "recovered" not in scores


def test_tool_errors_rate_and_recovery() -> None:
    rec = record([call("search", status="ERROR", error="timeout"), call("search"), call("book"), call("pay")])
    scores = run(tool_errors, rec)
    assert scores["error_rate"].number == 0.25 and "timeout" in scores["error_rate"].explanation
    assert scores["recovered"].passed
    stuck = run(tool_errors, record([call("pay"), call("book", status="ERROR"), call("book", status="BLOCKED")]))
    assert stuck["error_rate"].number == pytest.approx(1 / 3)
    assert not stuck["recovered"].passed and "book" in stuck["recovered"].explanation


def test_tool_errors_takes_status_from_an_errored_step() -> None:
    step = {"type": "STEP_TYPE_TOOL", "name": "fetch", "status": "STEP_STATUS_ERROR", "error": "404"}
    scores = run(tool_errors, record([step, call("fetch")]))
    assert scores["error_rate"].number == 0.5 and "404" in scores["error_rate"].explanation


def test_tool_errors_skips_without_tool_calls() -> None:
    with pytest.raises(SkipRecord, match="no tool calls"):
        run(tool_errors, record([llm(10)]))


# --- loop-detection ---


def test_loop_detection_back_to_back() -> None:
    looping = record([call("search", q="x"), call("search", q="x"), call("search", q="x"), call("book")])
    score = run(loop_detection, looping)["passed"]
    assert not score.passed and 'search({"q":"x"})' in score.explanation and "3 times in a row" in score.explanation
    assert run(loop_detection, looping, threshold=4)["passed"].passed


def test_loop_detection_different_arguments_are_not_a_loop() -> None:
    rec = record([call("search", q="a"), call("search", q="b"), call("search", q="c")])
    assert run(loop_detection, rec)["passed"].passed


def test_loop_detection_window() -> None:
    rec = record([call("poll", id=1), call("sleep"), call("poll", id=1), call("sleep"), call("poll", id=1)])
    assert run(loop_detection, rec)["passed"].passed
    score = run(loop_detection, rec, window=5)["passed"]
    assert not score.passed and "poll" in score.explanation and "within 5 calls" in score.explanation


def test_loop_detection_skip_and_bad_params() -> None:
    with pytest.raises(SkipRecord):
        run(loop_detection, record([llm()]))
    with pytest.raises(BadInputError, match="threshold"):
        run(loop_detection, record(SEARCH_THEN_BOOK), threshold=1)
    with pytest.raises(BadInputError, match="window"):
        run(loop_detection, record(SEARCH_THEN_BOOK), window=2)


# --- step-efficiency ---


def test_step_efficiency_counts_and_budget() -> None:
    rec = record(SEARCH_THEN_BOOK)
    assert run(step_efficiency, rec) == {"steps": Score(name="steps", number=5.0)}
    over = run(step_efficiency, rec, max_steps=4)
    assert not over["within_budget"].passed and "over the budget of 4" in over["within_budget"].explanation
    calls = run(step_efficiency, rec, count="tool_calls", max_steps=2, optimal_steps=1)
    assert calls["steps"].number == 2.0 and calls["within_budget"].passed and calls["efficiency"].number == 0.5
    assert run(step_efficiency, rec, count="llm_calls")["steps"].number == 3.0


def test_step_efficiency_reads_reference() -> None:
    rec = record(SEARCH_THEN_BOOK, reference={"max_steps": 10, "optimal_steps": 5})
    scores = run(step_efficiency, rec)
    assert scores["within_budget"].passed and scores["efficiency"].number == 1.0
    with pytest.raises(BadInputError, match="max_steps"):
        run(step_efficiency, rec, max_steps=0)


# --- budget-adherence ---


def test_budget_adherence_from_record_usage() -> None:
    rec = record(SEARCH_THEN_BOOK, usage={"totalTokens": 1000, "costUsd": 0.02, "latency": "4.5s"})
    ok = run(budget_adherence, rec, max_tokens=2000, max_usd=0.05, max_seconds=10)
    assert ok["passed"].passed and ok["tokens"].number == 1000 and ok["seconds"].number == 4.5
    over = run(budget_adherence, rec, max_usd=0.01)
    assert not over["passed"].passed and "usd" in over["passed"].explanation


def test_budget_adherence_sums_steps_without_double_counting_parents() -> None:
    steps = [
        {"id": "agent", "type": "STEP_TYPE_AGENT", "usage": {"totalTokens": 300, "costUsd": 0.3}},
        {"id": "a", "parentId": "agent", **llm(100, 0.1)},
        {"id": "b", "parentId": "agent", **llm(200, 0.2)},
        {"id": "t", "parentId": "agent", **call("search"), "startTime": "2025-01-01T00:00:00Z", "duration": "2s"},
        {"id": "u", "parentId": "agent", **call("book"), "startTime": "2025-01-01T00:00:03Z", "duration": "1s"},
    ]
    scores = run(budget_adherence, record(steps), max_tokens=250)
    assert scores["tokens"].number == 300 and scores["usd"].number == pytest.approx(0.3)
    assert scores["seconds"].number == 4.0
    assert not scores["passed"].passed


def test_budget_adherence_figures_only_and_skips() -> None:
    scores = run(budget_adherence, record([llm(50)]))
    assert set(scores) == {"tokens"}
    with pytest.raises(SkipRecord, match="no usage"):
        run(budget_adherence, record([call("search")]))
    with pytest.raises(SkipRecord, match="usd"):
        run(budget_adherence, record([llm(50)]), max_usd=1.0)


# --- task-success ---


def test_task_success_from_metadata_and_reference() -> None:
    assert run(task_success, record(metadata={"task_success": True}))["passed"].passed
    failed = run(task_success, record(metadata={"success": False, "checker_output": "3 tests failed"}))["passed"]
    assert not failed.passed and failed.explanation == "3 tests failed"
    checker = run(task_success, record(reference={"success": False, "reason": "db row missing"}))["passed"]
    assert not checker.passed and checker.explanation == "db row missing"


def test_task_success_skips_without_a_verdict_and_rejects_non_booleans() -> None:
    with pytest.raises(SkipRecord, match="no checker verdict"):
        run(task_success, record(SEARCH_THEN_BOOK))
    with pytest.raises(ValueError, match="boolean"):
        run(task_success, record(metadata={"task_success": "yes"}))


# --- goal-completion (session) ---


def test_goal_completion_marker_and_turns() -> None:
    session = [
        record(id="t2", metadata={"turn": 2, "goal_met": True}),
        record(id="t1", metadata={"turn": 1}),
        record(id="t3", metadata={"turn": 3}),
    ]
    scores = run(goal_completion, session)
    assert scores["passed"].passed and scores["turns"].number == 2
    late = run(goal_completion, session, max_turns=1)
    assert not late["passed"].passed and "max_turns" in late["passed"].explanation


def test_goal_completion_last_turn_success_and_gave_up() -> None:
    assert run(goal_completion, [record(), record(metadata={"task_success": True})])["passed"].passed
    gave_up = run(goal_completion, [record(), record(metadata={"gave_up": True}), record()])
    assert not gave_up["passed"].passed and gave_up["turns"].number == 3
    assert not run(goal_completion, [record(metadata={"success": False})])["passed"].passed


def test_goal_completion_skips_without_marker() -> None:
    with pytest.raises(SkipRecord, match="no goal marker"):
        run(goal_completion, [record(), record()])
