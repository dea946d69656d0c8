"""DeepEval's trace metrics (plan adherence, plan quality, step efficiency), MCP use, and its other multi-turn
metrics (the turn-level RAG metrics, goal accuracy, topic adherence, tool use) as Evals.si evaluators, served by the
adapter's plugin from DeepEval's venv (built once per session, shared with the other DeepEval tests). A record's
trajectory becomes DeepEval's trace and its conversation DeepEval's turns; every score, success and reason equals
DeepEval's own ``metric.measure()`` with DeepEval's own model over the test case written out here, against the same
scripted judge, offline."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deepeval_fixtures.agent_judge import reply
from deepeval_fixtures.venv import adapter_python, plugins_dir, run_in_venv

import evalsi
from evalsi.adapters.deepeval.cases import tool_call_fields
from evalsi.adapters.deepeval.traces import rag_turn_fields, tool_turn_fields, trace_dict
from evalsi.evaluators import Registry
from evalsi.plugins import load_plugins
from evalsi.records import make_record
from evalsi.testing.threaded import ThreadedProvider
from evalsi.v1alpha1.score_pb2 import Outcome

QUESTION = "What is the weather in its capital?"
TOOLS = [{"name": "find_capital", "description": "The capital of a country."},
         {"name": "get_weather", "description": "Today's weather in a city."}]
REFERENCE = "Paris is the capital of France, and it is sunny there."
# The agent's MCP server: it offers the weather tool (find_capital is the agent's own function). Its objects' keys
# are in the order a record's metadata keeps them (a protobuf Struct's: by key), which DeepEval's prompt shows.
SERVERS = [{"available_tools": [{"description": "Today's weather in a city.",
                                 "inputSchema": {"properties": {"city": {"type": "string"}}, "type": "object"},
                                 "name": "get_weather"}],
            "server_name": "weather", "transport": "stdio"}]


def _row(city: str) -> dict[str, Any]:
    """A two-turn conversation whose last reply was written by an agent: a plan, two tool calls (a sub-step under
    the second), the retrieved context. The wrong one (Lyon) plans, calls and answers wrong."""
    return {
        "id": "wrong" if city == "Lyon" else "right",
        "input": {"messages": [{"role": "system", "content": "You are a travel assistant."},
                               {"role": "user", "content": "I am going to France. What is its capital?"},
                               {"role": "assistant", "content": f"{city} is the capital of France."},
                               {"role": "user", "content": QUESTION}]},
        "output": f"It is sunny in {city}.",
        "reference": REFERENCE,
        "context": [f"{city} is the capital of France.", "The weather in France is sunny today."],
        "metadata": {"available_tools": TOOLS, "mcp_servers": SERVERS},
        "trajectory": {"steps": [
            {"id": "s1", "type": "STEP_TYPE_LLM", "name": "plan", "model": "agent-model",
             "input": {"text": "Plan how to answer."},
             "output": {"text": f"1. find the capital 2. the weather in {city}"}},
            {"id": "s2", "type": "STEP_TYPE_TOOL", "name": "find_capital",
             "toolCall": {"name": "find_capital", "arguments": {"country": "France"}, "result": city}},
            {"id": "s3", "type": "STEP_TYPE_TOOL", "name": "get_weather",
             "toolCall": {"name": "get_weather", "arguments": {"city": city}, "result": "sunny"}},
            {"id": "s4", "parent_id": "s3", "type": "STEP_TYPE_RETRIEVAL", "name": "forecast-db",
             "output": {"json": ["sunny"]}}]},
    }


ROWS = [_row("Paris"), _row("Lyon")]


def _trace(city: str) -> dict[str, Any]:
    """DeepEval's nested span dict of the row's run, written out: what its tracer would give for this agent."""
    return {"name": "agent", "type": "agent", "input": QUESTION, "output": f"It is sunny in {city}.", "children": [
        {"name": "plan", "type": "llm", "input": "Plan how to answer.",
         "output": f"1. find the capital 2. the weather in {city}", "model": "agent-model", "children": []},
        {"name": "find_capital", "type": "tool", "input": {"country": "France"}, "output": city, "children": []},
        {"name": "get_weather", "type": "tool", "input": {"city": city}, "output": "sunny", "children": [
            {"name": "forecast-db", "type": "retriever", "output": ["sunny"], "children": []}]}]}


def _calls(city: str) -> list[dict[str, Any]]:
    return [{"name": "find_capital", "input_parameters": {"country": "France"}, "output": city},
            {"name": "get_weather", "input_parameters": {"city": city}, "output": "sunny"}]


def _turns(city: str, last: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "I am going to France. What is its capital?"},
            {"role": "assistant", "content": f"{city} is the capital of France."},
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": f"It is sunny in {city}.", **last}]


def _case(slug: str, city: str) -> dict[str, Any]:
    """DeepEval's test case of a row for a metric: the mapping written out, not derived."""
    if slug in TRACED:
        return {"input": QUESTION, "actual_output": f"It is sunny in {city}.", "tools_called": _calls(city),
                "trace": _trace(city)}
    if slug == "mcp-use":
        calls = [{**call, "type": "MCP" if call["name"] == "get_weather" else "FUNCTION"} for call in _calls(city)]
        return {"input": QUESTION, "actual_output": f"It is sunny in {city}.", "tools_called": calls,
                "mcp_servers": SERVERS}
    if slug.startswith("turn-"):
        context = [f"{city} is the capital of France.", "The weather in France is sunny today."]
        expected = REFERENCE if slug in ("turn-contextual-precision", "turn-contextual-recall") else None
        return {"turns": _turns(city, {"retrieval_context": context}), "expected_outcome": expected}
    return {"turns": _turns(city, {"tools_called": _calls(city)})}


TOPICS = ["geography", "weather"]
TRACED = {"plan-adherence": "PlanAdherenceMetric", "plan-quality": "PlanQualityMetric",
          "step-efficiency": "StepEfficiencyMetric"}
# Evaluator -> (its params, DeepEval's class, the keyword arguments DeepEval's own run takes).
METRICS: dict[str, tuple[dict[str, Any], str, dict[str, Any]]] = {
    **{slug: ({}, cls, {}) for slug, cls in TRACED.items()},
    "turn-faithfulness": ({}, "TurnFaithfulnessMetric", {}),
    "turn-contextual-relevancy": ({}, "TurnContextualRelevancyMetric", {}),
    "turn-contextual-precision": ({}, "TurnContextualPrecisionMetric", {}),
    "turn-contextual-recall": ({}, "TurnContextualRecallMetric", {}),
    "goal-accuracy": ({}, "GoalAccuracyMetric", {}),
    "topic-adherence": ({"relevant_topics": TOPICS}, "TopicAdherenceMetric", {"relevant_topics": TOPICS}),
    "tool-use": ({}, "ToolUseMetric", {"available_tools": TOOLS}),
    "mcp-use": ({}, "MCPUseMetric", {}),
}


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return adapter_python(tmp_path_factory)


@pytest.fixture(scope="module")
def registry(python: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    registry = Registry.from_entry_points()
    with load_plugins(registry, plugins_dir(tmp_path_factory.mktemp("deepeval-plugins")),
                      cache_dir=python.parents[2]):
        yield registry


def _judge(base_url: str) -> dict[str, Any]:
    return {"provider": "openai", "model": "scripted-judge", "base_url": base_url, "max_retries": 0}


def test_a_trajectory_is_deepevals_nested_trace() -> None:
    from google.protobuf import json_format

    record = make_record(id="right", input=ROWS[0]["input"], output=ROWS[0]["output"])
    json_format.ParseDict(ROWS[0]["trajectory"], record.trajectory)
    assert trace_dict(record) == _trace("Paris")
    record = make_record(id="right", input=ROWS[0]["input"], output=ROWS[0]["output"], context=ROWS[0]["context"])
    json_format.ParseDict(ROWS[0]["trajectory"], record.trajectory)
    assert rag_turn_fields(record) == _case("turn-faithfulness", "Paris")["turns"]
    assert tool_turn_fields(record) == _case("tool-use", "Paris")["turns"]
    # A record's objects come back from protobuf in no fixed order; DeepEval is given them sorted, so the same record
    # makes the same prompt in every process.
    keys = ["zeta", "alpha", "mid", "beta", "omega"]
    del record.trajectory.steps[:]
    json_format.ParseDict({"steps": [{"name": "t", "toolCall": {"name": "t", "arguments": dict.fromkeys(keys, 1),
                                                                "result": {"b": 1, "a": {"d": 2, "c": 3}}}}]},
                          record.trajectory)
    (call,) = tool_call_fields(record)
    assert list(call["input_parameters"]) == sorted(keys)
    assert json.dumps(call["output"]) == '{"a": {"c": 3, "d": 2}, "b": 1}'
    assert list(trace_dict(record)["children"][0]["input"]) == sorted(keys)
    del record.trajectory.steps[:]
    # Parents in a cycle (or unknown) are the root's children, so the trace stays a tree.
    json_format.ParseDict({"steps": [{"id": "a", "parent_id": "b", "name": "a"},
                                     {"id": "b", "parent_id": "a", "name": "b"},
                                     {"id": "c", "parent_id": "elsewhere", "name": "c"}]}, record.trajectory)
    assert [(span["name"], [c["name"] for c in span["children"]]) for span in trace_dict(record)["children"]] == [
        ("a", ["b"]), ("c", [])]


def test_trace_and_multi_turn_metrics_equal_deepevals_own_measure(
        registry: Registry, python: Path, tmp_path: Path) -> None:
    # The catalog: each is the plugin's, requiring what the docs' tables say (and a judge).
    catalog = {slug: registry.resolve(f"deepeval/{slug}") for slug in METRICS}
    assert {slug: catalog[slug].requires for slug in ("plan-adherence", "turn-contextual-recall", "mcp-use")} == {
        "plan-adherence": ("input", "output", "trajectory", "judge"),
        "turn-contextual-recall": ("input", "output", "reference", "context", "judge"),
        "mcp-use": ("input", "output", "judge")}
    assert {entry.pack for entry in catalog.values()} == {"deepeval/metrics"}
    evaluators = [{"ref": f"deepeval/{slug}", "params": params} for slug, (params, *_) in METRICS.items()]
    jobs = [{"cls": cls, "kwargs": kwargs, "case": _case(slug, city)}
            for city in ("Paris", "Lyon") for slug, (_, cls, kwargs) in METRICS.items()]
    with ThreadedProvider(reply) as server:
        ours = evalsi.evaluate(ROWS, evaluators, registry=registry, judge=_judge(server.base_url))
        calls = len(server.requests)
        again = evalsi.evaluate(ROWS, evaluators, registry=registry, judge=_judge(server.base_url))
        assert len(server.requests) == calls  # the second time, every judge call came from the judge cache
        measured = json.loads(run_in_venv(python, "reference.py", {"base_url": server.base_url, "jobs": jobs},
                                          tmp_path))
    assert measured["blocked"] == []  # DeepEval's own run reached nothing beyond this machine
    assert calls > 0, [(r.evaluator, r.outcome, r.reason[:300]) for r in ours.results]
    by_key = {(r.record_id, r.evaluator): r for r in ours.results}
    keys = [(row["id"], slug) for row in ROWS for slug in METRICS]
    assert sorted(by_key) == sorted(keys)
    for key, reference in zip(keys, measured["scores"], strict=True):
        result = by_key[key]
        assert result.outcome == Outcome.OUTCOME_SCORED, (key, result.reason)
        score, passed = result.scores
        assert (score.number, passed.passed, score.explanation) == (
            reference["score"], reference["successful"], reference["reason"]), key
    for slug in METRICS:  # the judge finds fault with the wrong run, and so does every metric
        assert by_key[("right", slug)].scores[0].number > by_key[("wrong", slug)].scores[0].number, slug
    # The scripted grades come through as DeepEval combines them.
    assert [by_key[("right", s)].scores[0].number for s in TRACED] == [0.8, 0.9, 0.7]
    assert by_key[("right", "goal-accuracy")].scores[0].number == pytest.approx(0.9)  # mean of goal 1.0, plan 0.8
    assert by_key[("wrong", "tool-use")].scores[0].number == pytest.approx(0.3)  # the lower: selection 0.3
    assert by_key[("right", "tool-use")].scores[1].passed  # DeepEval's tool use leaves success unset: asked after
    assert by_key[("wrong", "mcp-use")].scores[0].number == pytest.approx(0.2)  # the lower: arguments 0.2
    assert all(r.scores[0].cost.total_tokens == 0 for r in again.results)
    assert [(r.record_id, r.evaluator, r.scores[0].number) for r in again.results] == [
        (r.record_id, r.evaluator, r.scores[0].number) for r in ours.results]


def test_a_record_lacking_what_a_metric_reads_is_skipped_naming_it_and_params_are_checked(
        registry: Registry) -> None:
    bare = [{"id": "chat", "input": QUESTION, "output": "It is sunny."},
            {"id": "no-steps", "input": QUESTION, "output": "It is sunny.", "reference": REFERENCE,
             "trajectory": {"sessionId": "s"}}]
    refs = ["deepeval/plan-adherence", "deepeval/turn-contextual-relevancy", "deepeval/turn-contextual-recall",
            "deepeval/tool-use", "deepeval/mcp-use"]
    with ThreadedProvider(reply) as server:
        results = evalsi.evaluate(bare, refs, registry=registry, judge=_judge(server.base_url))
        (malformed,) = evalsi.evaluate([{"id": "bad", "input": QUESTION, "output": "It is sunny.",
                                         "metadata": {"mcp_servers": [{"server_name": "weather", "tools": []}]}}],
                                       ["deepeval/mcp-use"], registry=registry, judge=_judge(server.base_url)).results
        assert not server.requests  # skipped (or failed) before any judge call
        with pytest.raises(evalsi.BadInputError, match="param relevant_topics: 1 to 50 topics"):
            evalsi.evaluate(bare, [{"ref": "deepeval/topic-adherence", "params": {"relevant_topics": []}}],
                            registry=registry, judge=_judge(server.base_url))
        with pytest.raises(evalsi.BadInputError, match=r"param 'mcp_servers'\[0\].transport must be one of stdio"):
            evalsi.evaluate(bare, [{"ref": "deepeval/mcp-use", "params": {
                "mcp_servers": [{"server_name": "weather", "transport": "pigeon"}]}}], registry=registry,
                            judge=_judge(server.base_url))
        with pytest.raises(evalsi.BadInputError, match=r"param 'available_tools'\[0\] must be a tool name"):
            evalsi.evaluate(bare, [{"ref": "deepeval/tool-use", "params": {"available_tools": [3]}}],
                            registry=registry, judge=_judge(server.base_url))
    by_key = {(r.record_id, r.evaluator): r for r in results.results}
    assert all(r.outcome == Outcome.OUTCOME_SKIPPED for r in results.results), [
        (r.record_id, r.evaluator, r.outcome) for r in results.results]
    reasons = {key: r.reason for key, r in by_key.items()}
    # A record's malformed servers fail that record, naming the entry.
    assert malformed.outcome == Outcome.OUTCOME_ERROR
    assert "metadata 'mcp_servers'[0]: ['tools'] not known" in malformed.reason
    assert reasons[("chat", "mcp-use")] == "no MCP servers: set param 'mcp_servers' or metadata 'mcp_servers'"
    assert reasons[("chat", "plan-adherence")] == "missing trajectory"
    assert reasons[("no-steps", "plan-adherence")].startswith("no trajectory: DeepEval's trace metrics read the "
                                                              "agent's steps (trajectory.steps)")
    assert reasons[("chat", "turn-contextual-recall")] == "missing reference, context"
    assert reasons[("no-steps", "turn-contextual-relevancy")] == "missing context"
    assert reasons[("no-steps", "tool-use")] == ("no available tools: set param 'available_tools' or metadata "
                                                 "'available_tools'")
