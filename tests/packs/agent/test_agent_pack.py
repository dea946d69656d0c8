"""The agent pack: registration through entry points, manifests, and evalsi.evaluate over trajectory rows."""

from __future__ import annotations

from typing import Any

import pytest

import evalsi
from evalsi.evaluators import Registry
from evalsi.packs.agent import PACK
from evalsi.v1alpha1 import score_pb2

EXPECTED = {
    "builtin/budget-adherence": ["passed", "tokens", "usd", "seconds"],
    "builtin/goal-completion": ["passed", "turns"],
    "builtin/goal-judge": ["passed", "score"],
    "builtin/loop-detection": ["passed"],
    "builtin/policy-violations": ["passed", "violations"],
    "builtin/sandbox-events": ["clean", "denials", "escalation_requests", "escalations_granted"],
    "builtin/step-efficiency": ["steps", "within_budget", "efficiency"],
    "builtin/task-success": ["passed"],
    "builtin/tool-call-accuracy": ["precision", "recall", "f1", "exact"],
    "builtin/tool-errors": ["error_rate", "recovered"],
    "builtin/trajectory-match": ["passed", "similarity"],
}
TRAJECTORY_EVALUATORS = {
    "builtin/loop-detection",
    "builtin/policy-violations",
    "builtin/sandbox-events",
    "builtin/step-efficiency",
    "builtin/tool-call-accuracy",
    "builtin/tool-errors",
    "builtin/trajectory-match",
}


def test_pack_contents() -> None:
    assert PACK.name == "agent" and not PACK.default_on and PACK.description
    assert {ev.name: [o.name for o in ev.outputs] for ev in PACK.evaluators} == EXPECTED
    assert all(ev.version == "1.0.0" and ev.pack == "agent" for ev in PACK.evaluators)
    assert {ev.name for ev in PACK.evaluators if "trajectory" in ev.requires} == TRAJECTORY_EVALUATORS
    scopes = {ev.name: ev.scope for ev in PACK.evaluators}
    assert scopes["builtin/goal-completion"] == scopes["builtin/goal-judge"] == "session"
    assert {ev.name for ev in PACK.evaluators if "judge" in ev.requires} == {"builtin/goal-judge"}


def test_registered_through_entry_points() -> None:
    registry = Registry.from_entry_points()
    assert "agent" in registry.packs and not registry.packs["agent"].default_on
    ev = registry.resolve("tool-call-accuracy")
    assert ev.ref == "builtin/tool-call-accuracy@1.0.0" and ev.pack == "agent"
    assert registry.resolve("builtin/goal-completion@1.0.0").scope == "session"
    assert [ev.name for ev in registry.evaluators(pack="agent")] == sorted(EXPECTED)


@pytest.mark.parametrize("ev", PACK.evaluators, ids=lambda ev: ev.short_name)
def test_manifest_documents_everything(ev) -> None:
    manifest = ev.manifest()
    assert manifest.name == ev.name and manifest.pack == "agent" and manifest.description
    assert manifest.scheduling.pool == ("judge" if "judge" in ev.requires else "cpu")
    for param in manifest.params:
        assert param.description, f"{ev.name}: param {param.name} has no description"
    for output in manifest.outputs:
        assert output.description
        if output.type == score_pb2.VALUE_KIND_NUMBER:
            assert output.HasField("min") and output.min == 0.0


def _tool(name: str, status: str = "OK", **arguments: Any) -> dict[str, Any]:
    return {
        "type": "STEP_TYPE_TOOL",
        "name": name,
        "toolCall": {"name": name, "arguments": arguments, "status": f"TOOL_CALL_STATUS_{status}"},
    }


def _rows() -> list[dict[str, Any]]:
    good = {"steps": [_tool("search", query="lisbon"), _tool("book", flight="TP1")], "sessionId": "s1"}
    partial = {"steps": [_tool("search", query="lisbon"), _tool("search", status="ERROR", query="lisbon")]}
    blocked = {"steps": [_tool("search", query="porto"), _tool("book", status="BLOCKED", flight="TP2")]}
    reference = {"tool_calls": [{"name": "search", "arguments": {"query": "lisbon"}}, "book"], "success": True}
    return [
        {"id": "a", "input": "book Lisbon", "trajectory": good, "reference": reference, "task_success": True},
        {"id": "b", "input": "book Lisbon", "trajectory": partial, "reference": reference, "task_success": False},
        {"id": "c", "input": "book Porto", "trajectory": blocked, "reference": reference},
        {"id": "d", "input": "no trace", "reference": reference},
    ]


def test_evaluate_over_trajectory_rows() -> None:
    results = evalsi.evaluate(
        _rows(), ["tool-call-accuracy", "tool-errors", "trajectory-match", "task-success", "loop-detection"]
    )
    recall = results.metric("tool-call-accuracy.recall")
    assert recall.n == 3 and recall.skipped == 1
    assert recall.mean == pytest.approx((1.0 + 0.5 + 0.5) / 3)
    assert recall.ci.HasField("low") and recall.ci.HasField("high") and recall.ci.low <= recall.mean <= recall.ci.high
    exact = results.metric("tool-call-accuracy.exact")
    assert exact.n == 3 and exact.mean == pytest.approx(1 / 3)
    errors = results.metric("tool-errors.error_rate")
    assert errors.mean == pytest.approx((0.0 + 0.5 + 0.0) / 3) and not errors.higher_is_better
    # task-success reads row-level task_success (metadata) before the reference's success.
    success = results.metric("task-success")
    assert success.n == 4 and success.mean == pytest.approx(3 / 4)
    assert results.metric("trajectory-match.passed").n == 3
    skipped = [r for r in results if r.record_id == "d" and r.evaluator == "tool-errors"]
    assert skipped and "trajectory" in skipped[0].reason


def test_evaluate_goal_completion_over_sessions() -> None:
    rows = [
        {"id": "s1-1", "input": "hi", "session_id": "s1", "turn": 1},
        {"id": "s1-2", "input": "book it", "session_id": "s1", "turn": 2, "goal_met": True},
        {"id": "s2-1", "input": "hi", "session_id": "s2", "turn": 1},
        {"id": "s2-2", "input": "bye", "session_id": "s2", "turn": 2, "gave_up": True},
    ]
    results = evalsi.evaluate(rows, ["goal-completion"])
    assert results.metric("goal-completion.passed").n == 2
    assert results.metric("goal-completion.passed").mean == pytest.approx(0.5)
    assert results.metric("goal-completion.turns").mean == pytest.approx(2.0)
