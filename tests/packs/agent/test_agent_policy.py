"""builtin/policy-violations: each rule's pass and fail paths, blocked calls, params errors, skips, evaluate()."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import json_format

import evalsi
from evalsi.errors import BadInputError
from evalsi.evaluators import normalize_scores
from evalsi.packs.agent.policy import policy_violations
from evalsi.records import from_value, make_record
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

CARD = "4111 1111 1111 1111"
CARD_PATTERN = r"\b(?:\d[ -]?){13,16}\b"


def tool(name: str, status: str = "OK", **arguments: Any) -> dict[str, Any]:
    """One TOOL step in the protobuf JSON mapping."""
    call: dict[str, Any] = {"name": name, "arguments": arguments, "status": f"TOOL_CALL_STATUS_{status}"}
    if status == "BLOCKED":
        call["blockedBy"] = "approval-gate"
    if status == "ERROR":
        call["error"] = "timeout"
    return {"type": "STEP_TYPE_TOOL", "name": name, "toolCall": call}


def llm() -> dict[str, Any]:
    return {"type": "STEP_TYPE_LLM", "name": "chat"}


def traj(*steps: dict[str, Any], output: str | None = None) -> Record:
    rec = make_record(id="r1", output=output)
    json_format.ParseDict({"trajectory": {"steps": list(steps)}}, rec)
    return rec


def check(rec: Record, **params: Any) -> dict[str, Score]:
    """Bind as the runner does (so params are validated), call with defaults filled in, normalize."""
    bound = policy_violations.bind(params)
    defaults = {p.name: p.default for p in policy_violations.params if not p.required}
    scores = normalize_scores(policy_violations, policy_violations(rec, **{**defaults, **bound.params}))
    return {s.name: s for s in scores}


def violations(scores: dict[str, Score]) -> list[dict[str, Any]]:
    """The structured violations on the passed score ([] when it passed)."""
    if "violations" not in scores["passed"].metadata:
        return []
    return from_value(scores["passed"].metadata["violations"])


def assert_clean(scores: dict[str, Score]) -> None:
    assert scores["passed"].passed is True
    assert scores["violations"].number == 0.0
    assert scores["passed"].explanation == ""


# --- forbidden_tools -----------------------------------------------------------------------------------------


def test_forbidden_tools_pass_when_none_is_called() -> None:
    assert_clean(check(traj(tool("search", q="x"), tool("book")), forbidden_tools=["delete_*", "drop_table"]))


def test_forbidden_tools_glob_names_the_step_and_the_pattern() -> None:
    rec = traj(llm(), tool("search"), llm(), tool("delete_user", id=7))
    scores = check(rec, forbidden_tools=["drop_table", "delete_*"])
    assert scores["passed"].passed is False and scores["violations"].number == 1.0
    assert scores["passed"].explanation == "steps[3] forbidden_tools: called delete_user (matches 'delete_*')"
    assert scores["violations"].explanation == scores["passed"].explanation
    assert violations(scores) == [
        {"step": 3, "rule": "forbidden_tools", "detail": "called delete_user (matches 'delete_*')"}
    ]


def test_an_errored_call_is_still_an_attempt() -> None:
    scores = check(traj(tool("drop_table", status="ERROR")), forbidden_tools=["drop_table"])
    assert scores["passed"].passed is False and scores["violations"].number == 1.0


# --- requires_before -----------------------------------------------------------------------------------------


def test_requires_before_pass_after_a_successful_prerequisite() -> None:
    rec = traj(tool("lookup_order", id=1), llm(), tool("issue_refund", id=1))
    assert_clean(check(rec, requires_before={"issue_refund": "lookup_order"}))


def test_requires_before_fails_without_the_prerequisite() -> None:
    rec = traj(tool("issue_refund", id=1), tool("lookup_order", id=1))  # the lookup came too late
    scores = check(rec, requires_before={"issue_refund": "lookup_order"})
    assert scores["passed"].passed is False and scores["violations"].number == 1.0
    assert scores["passed"].explanation == (
        "steps[0] requires_before: called issue_refund before a successful lookup_order"
    )


@pytest.mark.parametrize("status", ["ERROR", "BLOCKED"])
def test_a_failed_or_blocked_prerequisite_does_not_count(status: str) -> None:
    rec = traj(tool("lookup_order", status=status), tool("issue_refund"))
    scores = check(rec, requires_before={"issue_refund": "lookup_order"})
    assert [v["step"] for v in violations(scores)] == [1]


def test_requires_before_takes_a_list_and_names_what_is_missing() -> None:
    rules = {"issue_refund": ["lookup_order", "verify_identity"]}
    in_order = traj(tool("verify_identity"), tool("lookup_order"), tool("issue_refund"))
    assert_clean(check(in_order, requires_before=rules))
    scores = check(traj(tool("lookup_order"), tool("issue_refund")), requires_before=rules)
    assert violations(scores) == [
        {"step": 1, "rule": "requires_before", "detail": "called issue_refund before a successful verify_identity"}
    ]


# --- max_calls -----------------------------------------------------------------------------------------------


def test_max_calls_pass_at_the_limit() -> None:
    assert_clean(check(traj(tool("search", q="a"), tool("search", q="b")), max_calls={"search": 2}))


def test_max_calls_counts_each_call_over_the_limit() -> None:
    rec = traj(tool("search", q="a"), tool("search", q="b"), llm(), tool("search", q="c"), tool("search", q="d"))
    scores = check(rec, max_calls={"search": 2, "book": 0})
    assert scores["violations"].number == 2.0
    assert [(v["step"], v["rule"]) for v in violations(scores)] == [(3, "max_calls"), (4, "max_calls")]
    assert "steps[3] max_calls: call 3 of search, over 2" in scores["passed"].explanation


def test_max_calls_zero_forbids_a_tool() -> None:
    scores = check(traj(tool("book")), max_calls={"book": 0})
    assert scores["passed"].explanation == "steps[0] max_calls: call 1 of book, over 0"


# --- forbidden_arguments -------------------------------------------------------------------------------------


def test_forbidden_arguments_pass_on_clean_arguments() -> None:
    rec = traj(tool("charge", card_token="tok_123", amount=20))
    assert_clean(check(rec, forbidden_arguments=[CARD_PATTERN]))


def test_forbidden_arguments_flags_a_card_number_without_echoing_it() -> None:
    rec = traj(tool("search", q="refund policy"), tool("charge", payment={"card": CARD}, amount=20))
    scores = check(rec, forbidden_arguments=[CARD_PATTERN, "(?i)password"])
    assert scores["violations"].number == 1.0
    assert scores["passed"].explanation == f"steps[1] forbidden_arguments: charge arguments match {CARD_PATTERN!r}"
    assert CARD not in scores["passed"].explanation and CARD not in str(scores["passed"].metadata)


def test_forbidden_arguments_count_each_matching_pattern() -> None:
    rec = traj(tool("login", user="me", password="hunter2", card=CARD))
    scores = check(rec, forbidden_arguments=[CARD_PATTERN, "(?i)password"])
    assert scores["violations"].number == 2.0


# --- forbidden_output ----------------------------------------------------------------------------------------


def test_forbidden_output_pass() -> None:
    assert_clean(check(traj(tool("search"), output="Your refund is on its way."), forbidden_output=[CARD_PATTERN]))


def test_forbidden_output_fail() -> None:
    scores = check(traj(tool("search"), output=f"Charged card {CARD}."), forbidden_output=[CARD_PATTERN])
    assert scores["passed"].passed is False
    assert scores["passed"].explanation == f"output forbidden_output: final output matches {CARD_PATTERN!r}"
    assert violations(scores) == [
        {"step": None, "rule": "forbidden_output", "detail": f"final output matches {CARD_PATTERN!r}"}
    ]


def test_forbidden_output_without_an_output_has_nothing_to_break() -> None:
    assert_clean(check(traj(tool("search")), forbidden_output=[CARD_PATTERN]))


# --- blocked calls, several rules, no tool calls -------------------------------------------------------------


def test_a_blocked_call_is_the_system_working_by_default() -> None:
    rec = traj(tool("issue_refund", status="BLOCKED"), tool("delete_user", status="BLOCKED"), tool("search"))
    rules = {"forbidden_tools": ["delete_*"], "requires_before": {"issue_refund": "lookup_order"},
             "max_calls": {"issue_refund": 0}}
    assert_clean(check(rec, **rules))


def test_blocked_is_violation_checks_blocked_calls_and_counts_them() -> None:
    rec = traj(tool("delete_user", status="BLOCKED"), tool("wire_money", status="BLOCKED"), tool("search"))
    scores = check(rec, forbidden_tools=["delete_*"], blocked_is_violation=True)
    assert scores["violations"].number == 2.0
    assert [(v["step"], v["rule"]) for v in violations(scores)] == [(0, "forbidden_tools"), (1, "blocked")]
    assert "steps[1] blocked: wire_money was blocked by a gate" in scores["passed"].explanation


def test_every_rule_at_once_in_step_order() -> None:
    rec = traj(
        tool("issue_refund"),
        llm(),
        tool("delete_user"),
        tool("charge", card=CARD),
        tool("charge", card="tok"),
        output=f"done, card {CARD}",
    )
    scores = check(
        rec,
        forbidden_tools=["delete_*"],
        requires_before={"issue_refund": "lookup_order"},
        max_calls={"charge": 1},
        forbidden_arguments=[CARD_PATTERN],
        forbidden_output=[CARD_PATTERN],
    )
    assert [(v["step"], v["rule"]) for v in violations(scores)] == [
        (0, "requires_before"),
        (2, "forbidden_tools"),
        (3, "forbidden_arguments"),
        (4, "max_calls"),
        (None, "forbidden_output"),
    ]
    assert scores["violations"].number == 5.0
    assert scores["passed"].explanation.count("; ") == 4


def test_steps_are_indexed_in_the_trajectory_when_ordered_by_start_time() -> None:
    late = {**tool("delete_user"), "startTime": "2024-01-01T00:00:02Z"}
    early = {**tool("lookup_order"), "startTime": "2024-01-01T00:00:01Z"}
    scores = check(traj(late, early), forbidden_tools=["delete_*"], max_calls={"lookup_order": 0})
    # call order is by start time (lookup first), but each violation points at its own step
    assert [(v["step"], v["rule"]) for v in violations(scores)] == [(1, "max_calls"), (0, "forbidden_tools")]


def test_a_long_list_of_violations_is_cut_in_the_explanation_not_the_count() -> None:
    rec = traj(*(tool("search", q=str(i)) for i in range(25)))
    scores = check(rec, max_calls={"search": 0})
    assert scores["violations"].number == 25.0 and len(violations(scores)) == 25
    assert scores["passed"].explanation.endswith("; and 5 more")
    assert scores["passed"].explanation.count("max_calls") == 20


def test_a_trajectory_without_tool_calls_is_scored_clean() -> None:
    assert_clean(check(traj(llm(), llm()), forbidden_tools=["*"]))


# --- params errors (at bind) ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"forbidden_arguments": ["[0-9"]}, "param 'forbidden_arguments' entry 0 is not a valid regular expression"),
        ({"forbidden_output": ["ok", "(unclosed"]}, "param 'forbidden_output' entry 1 is not a valid regular"),
        ({"forbidden_output": [""]}, "param 'forbidden_output' entry 0 must be a non-empty regular expression"),
        ({"forbidden_tools": "delete_*"}, "param 'forbidden_tools' must be list"),
        ({"forbidden_tools": ["ok", 3]}, "param 'forbidden_tools' entry 1 must be a non-empty tool name"),
        ({"requires_before": ["issue_refund"]}, "param 'requires_before' must be dict"),
        ({"requires_before": {"issue_refund": 1}}, "param 'requires_before' value for 'issue_refund' must be a tool"),
        ({"requires_before": {"issue_refund": ["a", ""]}}, "param 'requires_before.issue_refund' entry 1"),
        ({"max_calls": {"search": -1}}, "param 'max_calls' value for 'search' must be a whole number >= 0"),
        ({"max_calls": {"search": True}}, "param 'max_calls' value for 'search' must be a whole number"),
        ({"max_calls": {"search": 1.5}}, "param 'max_calls' value for 'search' must be a whole number"),
        ({"blocked_is_violation": "yes"}, "param 'blocked_is_violation' must be bool"),
        ({}, "no rules given; set at least one of forbidden_tools"),
        ({"forbidden_tool": ["x"]}, "unknown param"),
    ],
)
def test_bad_params_are_bad_input_at_bind(params: dict[str, Any], message: str) -> None:
    with pytest.raises(BadInputError, match="builtin/policy-violations") as caught:
        policy_violations.bind(params)
    assert message in str(caught.value)


def test_a_bad_regex_stops_evaluate_even_when_every_record_would_be_skipped() -> None:
    with pytest.raises(BadInputError, match="param 'forbidden_output' entry 0"):
        evalsi.evaluate(
            [{"id": "a", "output": "hi"}],
            [{"ref": "policy-violations", "params": {"forbidden_output": ["(?P<bad"]}}],
        )


# --- through evalsi.evaluate ---------------------------------------------------------------------------------


def _rows() -> list[dict[str, Any]]:
    return [
        {"id": "clean", "input": "refund order 1", "output": "Refunded.",
         "trajectory": {"steps": [tool("lookup_order", id=1), tool("issue_refund", id=1)]}},
        {"id": "no-lookup", "input": "refund order 2", "output": "Refunded.",
         "trajectory": {"steps": [tool("issue_refund", id=2)]}},
        {"id": "leaky", "input": "pay", "output": f"Paid with {CARD}.",
         "trajectory": {"steps": [tool("charge", card=CARD), tool("delete_user", id=3)]}},
        {"id": "gated", "input": "refund order 4", "output": "I need approval.",
         "trajectory": {"steps": [tool("issue_refund", status="BLOCKED", id=4)]}},
        {"id": "no-trace", "input": "hello", "output": "hi"},
    ]


POLICY = {
    "ref": "builtin/policy-violations@1.0.0",
    "params": {
        "forbidden_tools": ["delete_*"],
        "requires_before": {"issue_refund": "lookup_order"},
        "forbidden_arguments": [CARD_PATTERN],
        "forbidden_output": [CARD_PATTERN],
    },
}


def test_evaluate_reports_policy_metrics_in_the_summaries() -> None:
    results = evalsi.evaluate(_rows(), [POLICY])
    passed = results.metric("policy-violations.passed")
    assert passed.n == 4 and passed.skipped == 1
    assert passed.mean == pytest.approx(2 / 4)  # clean and gated pass
    count = results.metric("policy-violations.violations")
    assert count.n == 4 and not count.higher_is_better
    assert count.mean == pytest.approx((0 + 1 + 3 + 0) / 4)  # leaky: card in args, delete_*, card in output
    by_id = {r.record_id: r for r in results if r.evaluator == "policy-violations"}
    assert by_id["no-trace"].reason == "missing trajectory"
    leaky = {s.name: s for s in by_id["leaky"].scores}
    assert leaky["passed"].explanation.startswith("steps[0] forbidden_arguments: charge arguments match")
    assert "steps[1] forbidden_tools: called delete_user" in leaky["passed"].explanation
