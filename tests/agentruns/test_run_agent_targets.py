"""Agent targets in embedded runs: each record a fresh conversation through a case transport (HTTP/SSE,
OpenAI Responses, A2A, in-process), its reply the output and its tool calls the trajectory; a transport that
fails after retries is an infrastructure error of that record, never a failure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agentrun_support import EXAMPLES, FAST, example, make_run

from evalsi.cases.testing import ScriptedAgent
from evalsi.cases.testing_protocols import ScriptedA2A, ScriptedResponses
from evalsi.records import from_value
from evalsi.runs.embedded import execute_run
from evalsi.v1alpha1.record_pb2 import (
    STEP_STATUS_ERROR,
    STEP_TYPE_AGENT,
    TOOL_CALL_STATUS_BLOCKED,
    TOOL_CALL_STATUS_ERROR,
    TOOL_CALL_STATUS_OK,
    TOOL_CALL_STATUS_UNSPECIFIED,
)
from evalsi.v1alpha1.run_pb2 import RUN_STATE_FAILED, RUN_STATE_SUCCEEDED
from evalsi.v1alpha1.score_pb2 import ERROR_KIND_INFRA, OUTCOME_ERROR, OUTCOME_SCORED

PARIS = "What is the weather in Paris?"
WEATHER_CALL = {"name": "get_weather", "arguments": {"city": "Paris"}, "status": "ok"}


def metric(results: Any, name: str) -> Any:
    return next(s for s in results.run.summaries if s.metric == name)


async def test_an_http_agent_run_scores_its_replies_and_tool_calls_with_trials() -> None:
    async with ScriptedAgent.from_file(str(EXAMPLES / "weather-agent.yaml")) as agent:
        run = example("agent-http.yaml")
        run.spec.target.agent.http.url = agent.base_url
        outcome = await execute_run(run, base_dir=EXAMPLES, retry=FAST)
    results = outcome.results
    assert results.run.state == RUN_STATE_SUCCEEDED, results.run.message
    # Paris and Lisbon call get_weather once; the Oslo chat errors once on "oslo", then recovers.
    assert metric(results, "tool-call-accuracy.exact").mean == pytest.approx(2 / 3)
    assert metric(results, "tool-call-accuracy.recall").mean == 1.0
    assert metric(results, "trajectory-match.passed.pass^2").mean == 1.0
    assert metric(results, "tool-errors.error_rate").mean == pytest.approx(1 / 6)
    assert (metric(results, "tool-errors.recovered").n, metric(results, "tool-errors.recovered").mean) == (2, 1.0)
    assert metric(results, "contains").n == 6 and metric(results, "latency.seconds").n == 6
    assert all(g.passed for g in results.run.gates)

    oslo = next(r for r in outcome.records if r.id == "oslo-chat" and r.provenance.trial == 1)
    assert oslo.output.text == "It is 21 C in Oslo."
    root, failed, recovered = oslo.trajectory.steps
    assert root.type == STEP_TYPE_AGENT and root.attributes["evalsi.agent.turns"].number_value == 2
    assert (failed.tool_call.name, from_value(failed.tool_call.arguments)) == ("get_weather", {"city": "oslo"})
    assert failed.tool_call.status == TOOL_CALL_STATUS_ERROR and failed.status == STEP_STATUS_ERROR
    assert failed.tool_call.error == "unknown city 'oslo'"
    assert recovered.tool_call.status == TOOL_CALL_STATUS_OK and recovered.attributes["evalsi.turn"].number_value == 2
    assert oslo.trajectory.session_id.startswith("eval-oslo-chat-t1-")
    assert oslo.usage.latency.ToNanoseconds() > 0
    # Both user messages went into one conversation, in order; the input's assistant message was not sent.
    conversation = next(c for (_, cid), c in agent.conversations.items() if cid == oslo.trajectory.session_id)
    assert [m["content"] for m in conversation.messages if m["role"] == "user"] == [
        "Hi!", "What is the weather in Oslo?"]
    assert oslo.provenance.target == f"agent:http:{agent.base_url} (agent weather)"
    manifest = results.run.manifest
    assert manifest.target == oslo.provenance.target
    assert any("running deployment" in item for item in manifest.unpinned)


async def test_tool_call_ends_become_statuses_and_a_blocked_call_is_not_a_tool_error(tmp_path: Path) -> None:
    calls = [
        {"name": "search", "arguments": {"q": "dark"}, "status": "ok"},
        {"name": "create_order", "arguments": {"cart": "k7"}, "status": "blocked", "gate": "confirm_order"},
        {"name": "notify", "status": None},  # its end never arrives
    ]
    async with ScriptedAgent(default={"calls": calls, "reply": "Confirm the order?"}) as agent:
        spec = {"target": {"agent": {"http": {"url": agent.base_url, "agent": "shop"}}},
                "evaluators": [{"ref": "builtin/tool-errors"}, {"ref": "builtin/trajectory-match",
                                                               "params": {"expected": ["search", "create_order"],
                                                                          "mode": "in_order"}}]}
        outcome = await execute_run(make_run(tmp_path, spec, [{"id": "buy", "input": "buy it"}]), base_dir=tmp_path)
    steps = outcome.records[0].trajectory.steps[1:]
    assert [s.tool_call.status for s in steps] == [
        TOOL_CALL_STATUS_OK, TOOL_CALL_STATUS_BLOCKED, TOOL_CALL_STATUS_UNSPECIFIED]
    assert steps[1].attributes["evalsi.tool.gate"].string_value == "confirm_order"
    assert metric(outcome.results, "tool-errors.error_rate").mean == 0.0
    assert metric(outcome.results, "trajectory-match.passed").mean == 1.0


async def test_responses_a2a_and_in_process_agents_give_the_same_record(tmp_path: Path) -> None:
    entry = {"reply": "It is 21 C in Paris.", "calls": [WEATHER_CALL]}
    rows = [{"id": "paris", "input": PARIS, "reference": {"tool_calls": [{"name": "get_weather",
                                                                          "arguments": {"city": "Paris"}}]}}]
    evaluators = [{"ref": "builtin/tool-call-accuracy"}, {"ref": "builtin/contains", "params": {"values": ["21"]}}]
    async with ScriptedResponses(replies={PARIS: entry}) as responses, ScriptedA2A(replies={PARIS: entry}) as a2a:
        targets = {
            "openaiResponses": {"baseUrl": responses.base_url, "model": "weather"},
            "a2a": {"url": a2a.base_url, "timeout": "10s"},
            "python": {"callable": "agentrun_support:respond"},
        }
        for kind, agent in targets.items():
            spec = {"target": {"agent": {kind: agent}}, "evaluators": evaluators}
            outcome = await execute_run(make_run(tmp_path, spec, rows), base_dir=tmp_path, retry=FAST)
            assert outcome.results.run.state == RUN_STATE_SUCCEEDED, (kind, outcome.results.run.message)
            (record,) = outcome.records
            assert record.output.text == "It is 21 C in Paris.", kind
            call = record.trajectory.steps[1].tool_call
            assert (call.name, from_value(call.arguments), call.status) == (
                "get_weather", {"city": "Paris"}, TOOL_CALL_STATUS_OK), kind
            assert metric(outcome.results, "tool-call-accuracy.exact").mean == 1.0, kind
    assert responses.requests[0][1]["model"] == "weather"


async def test_a_transport_dropping_mid_run_is_an_infra_error_never_a_failure(tmp_path: Path) -> None:
    attempts = {"flaky": 0}

    def flaky(message: str, conversation: Any) -> dict[str, Any]:
        attempts["flaky"] += 1  # drops once, then answers: the retry on a fresh conversation succeeds
        return {"calls": [WEATHER_CALL], "drop": attempts["flaky"] == 1, "reply": "It is 21 C."}

    replies = {"drops": {"calls": [WEATHER_CALL], "drop": True}, "flaky": flaky, "fails": {"fail": "model down"}}
    rows = [{"id": name, "input": name} for name in ("ok", "drops", "flaky", "fails")]
    spec = {"evaluators": [{"ref": "builtin/contains", "params": {"values": ["21"]}}, {"ref": "builtin/tool-errors"}]}
    async with ScriptedAgent(replies=replies, default={"reply": "21 C", "calls": [WEATHER_CALL]}) as agent:
        spec["target"] = {"agent": {"http": {"url": agent.base_url, "agent": "weather"}}}
        outcome = await execute_run(make_run(tmp_path, spec, rows), base_dir=tmp_path, retry=FAST)
    results = outcome.results
    assert results.run.state == RUN_STATE_SUCCEEDED, results.run.message
    by_record: dict[str, set[tuple[int, int]]] = {}
    for result in results.run.results:
        by_record.setdefault(result.record_id, set()).add((result.outcome, result.error_kind))
    assert by_record["ok"] == by_record["flaky"] == {(OUTCOME_SCORED, 0)}
    assert by_record["drops"] == by_record["fails"] == {(OUTCOME_ERROR, ERROR_KIND_INFRA)}
    reasons = {r.record_id: r.reason for r in results.run.results if r.outcome == OUTCOME_ERROR}
    assert "turn 1: POST" in reasons["drops"] and reasons["drops"].endswith("(after 3 attempts)")
    assert "model down" in reasons["fails"]
    contains = metric(results, "contains")
    assert (contains.n, contains.mean, contains.errors) == (2, 1.0, 2)  # the errors are not zeros
    assert attempts["flaky"] == 2


async def test_an_agent_that_is_down_fails_the_run_with_infra_errors_only(tmp_path: Path) -> None:
    async with ScriptedAgent() as agent:
        url = agent.base_url  # closed when the block ends: nothing listens there any more
    spec = {"target": {"agent": {"http": {"url": url, "agent": "weather"}}},
            "evaluators": [{"ref": "builtin/contains", "params": {"values": ["21"]}}]}
    outcome = await execute_run(make_run(tmp_path, spec, [{"id": "a", "input": PARIS}]), base_dir=tmp_path,
                                retry=FAST)
    run = outcome.results.run
    assert run.state == RUN_STATE_FAILED and "every target call failed" in run.message
    assert [(r.outcome, r.error_kind) for r in run.results] == [(OUTCOME_ERROR, ERROR_KIND_INFRA)]
