"""DeepEval's agentic and conversational metrics as Evals.si evaluators, served by the adapter's plugin from
DeepEval's venv (built once per session, shared with test_deepeval_metrics.py): a trajectory's tool calls and a
record's conversation become DeepEval's test cases, and every score, success and reason equals DeepEval's own
``metric.measure()`` with DeepEval's own model against the same scripted judge, offline; a second evaluation asks
the judge nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deepeval_fixtures.venv import adapter_python, plugins_dir, run_in_venv, scripted_reply

import evalsi
from evalsi.adapters.deepeval.cases import turn_fields
from evalsi.evaluators import Registry
from evalsi.plugins import load_plugins
from evalsi.records import make_record
from evalsi.testing.threaded import ThreadedProvider
from evalsi.v1alpha1.score_pb2 import Outcome

QUESTION = "What is the weather in the capital of France?"


def _call(name: str, arguments: dict[str, Any], result: str) -> dict[str, Any]:
    return {"type": "STEP_TYPE_TOOL", "name": name,
            "toolCall": {"name": name, "arguments": arguments, "result": result, "status": "TOOL_CALL_STATUS_OK"}}


CAPITAL = {"name": "find_capital", "input_parameters": {"country": "France"}}
WEATHER = {"name": "get_weather", "input_parameters": {"city": "Paris"}}
AGENT_ROWS = [
    {"id": "right", "input": QUESTION, "output": "It is sunny in Paris.",
     "reference": {"expected_tools": [CAPITAL, WEATHER]},
     "trajectory": {"steps": [_call("find_capital", {"country": "France"}, "Paris"),
                              _call("get_weather", {"city": "Paris"}, "sunny")]}},
    # Wrong arguments, out of order, one call too many; its expected tools in the metadata.
    {"id": "wrong", "input": QUESTION, "output": "It is sunny in Lyon.",
     "metadata": {"expected_tools": [CAPITAL, WEATHER]},
     "trajectory": {"steps": [_call("get_weather", {"city": "Lyon"}, "sunny"), _call("search", {"q": "Lyon"}, "Lyon"),
                              _call("find_capital", {"country": "France"}, "Paris")]}},
]
# DeepEval's test case for each row, written out: the mapping is checked, not assumed.
TOOLS_CALLED = {
    "right": [{**CAPITAL, "output": "Paris"}, {**WEATHER, "output": "sunny"}],
    "wrong": [{"name": "get_weather", "input_parameters": {"city": "Lyon"}, "output": "sunny"},
              {"name": "search", "input_parameters": {"q": "Lyon"}, "output": "Lyon"}, {**CAPITAL, "output": "Paris"}],
}
# Evaluator alias -> (ref, params, DeepEval's class, its keyword arguments, whether its case has expected_tools).
AGENTIC: dict[str, tuple[str, dict[str, Any], str, dict[str, Any], bool]] = {
    "tools": ("tool-correctness", {}, "ToolCorrectnessMetric", {}, True),
    "tools-args-ordered": ("tool-correctness", {"evaluation_params": ["input_parameters"],
                                                "should_consider_ordering": True},
                           "ToolCorrectnessMetric", {"evaluation_params": ["input_parameters"],
                                                     "should_consider_ordering": True}, True),
    "tools-exact": ("tool-correctness", {"should_exact_match": True, "evaluation_params": ["input_parameters"]},
                    "ToolCorrectnessMetric", {"should_exact_match": True, "evaluation_params": ["input_parameters"]},
                    True),
    "arguments": ("argument-correctness", {}, "ArgumentCorrectnessMetric", {}, False),
    "task": ("task-completion", {}, "TaskCompletionMetric", {}, False),
}

ROLE = "You are a friendly geography tutor."
CRITERIA = "Does the assistant answer every question correctly?"


def _conversation(capital: str, river: str) -> dict[str, Any]:
    return {"input": {"messages": [{"role": "system", "content": ROLE},
                                   {"role": "user", "content": "I live in France. What is its capital?"},
                                   {"role": "assistant", "content": f"{capital} is the capital of France."},
                                   {"role": "user", "content": "Which river runs through it?"}]},
            "output": f"The {river} runs through {capital}."}


CHAT_ROWS = [{"id": "right", **_conversation("Paris", "Seine")}, {"id": "wrong", **_conversation("Lyon", "Rhône")}]
CONVERSATIONAL: dict[str, tuple[dict[str, Any], str, dict[str, Any]]] = {
    "turn-relevancy": ({}, "TurnRelevancyMetric", {}),
    "knowledge-retention": ({}, "KnowledgeRetentionMetric", {}),
    "role-adherence": ({}, "RoleAdherenceMetric", {}),
    "conversation-completeness": ({}, "ConversationCompletenessMetric", {}),
    "conversational-g-eval": ({"criteria": CRITERIA}, "ConversationalGEval",
                              {"name": "Conversational G-Eval", "criteria": CRITERIA,
                               "evaluation_params": ["role", "content"]}),
}


def _turns(row: dict[str, Any]) -> list[dict[str, str]]:
    return [*(m for m in row["input"]["messages"] if m["role"] != "system"),
            {"role": "assistant", "content": row["output"]}]


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


def _comparable(results: Any) -> list[tuple[str, str, Any, bool, str]]:
    return [(r.record_id, r.evaluator, r.scores[0].number, r.scores[1].passed, r.scores[0].explanation)
            for r in results.results]


def test_conversation_turns_are_the_inputs_messages_then_the_output() -> None:
    record = make_record(**CHAT_ROWS[0])
    assert turn_fields(record) == _turns(CHAT_ROWS[0])  # the system message is the role, not a turn
    assert turn_fields(make_record(input="hi", output="hello")) == [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def test_agentic_and_conversational_metrics_equal_deepevals_own_measure(
        registry: Registry, python: Path, tmp_path: Path) -> None:
    agentic = [{"ref": f"deepeval/{ref}", "alias": alias, "params": params}
               for alias, (ref, params, *_) in AGENTIC.items()]
    conversational = [{"ref": f"deepeval/{slug}", "params": params} for slug, (params, *_) in CONVERSATIONAL.items()]
    jobs = [{"cls": cls, "kwargs": kwargs,
             "case": {"input": QUESTION, "actual_output": row["output"], "tools_called": TOOLS_CALLED[row["id"]],
                      "expected_tools": [CAPITAL, WEATHER] if expects else None}}
            for row in AGENT_ROWS for (_, _, cls, kwargs, expects) in AGENTIC.values()]
    jobs += [{"cls": cls, "kwargs": kwargs,
              "case": {"turns": _turns(row), "chatbot_role": ROLE if cls == "RoleAdherenceMetric" else None}}
             for row in CHAT_ROWS for (_, cls, kwargs) in CONVERSATIONAL.values()]
    with ThreadedProvider(scripted_reply()) as server:
        judge = _judge(server.base_url)
        ours = evalsi.evaluate(AGENT_ROWS, agentic, registry=registry, judge=judge)
        chats = evalsi.evaluate(CHAT_ROWS, conversational, registry=registry, judge=judge)
        calls = len(server.requests)
        again = (evalsi.evaluate(AGENT_ROWS, agentic, registry=registry, judge=judge),
                 evalsi.evaluate(CHAT_ROWS, conversational, registry=registry, judge=judge))
        assert len(server.requests) == calls  # the second time, every judge call came from the judge cache
        measured = json.loads(run_in_venv(python, "reference.py", {"base_url": server.base_url, "jobs": jobs},
                                          tmp_path))
    assert measured["blocked"] == []  # DeepEval's own run reached nothing beyond this machine
    assert calls > 0
    results = [*ours.results, *chats.results]
    assert all(r.outcome == Outcome.OUTCOME_SCORED for r in results), [(r.evaluator, r.reason) for r in results]
    expected_keys = [(row["id"], alias) for row in AGENT_ROWS for alias in AGENTIC]
    expected_keys += [(row["id"], slug) for row in CHAT_ROWS for slug in CONVERSATIONAL]
    by_key = {(r.record_id, r.evaluator): r for r in results}
    assert sorted(by_key) == sorted(expected_keys)
    for key, reference in zip(expected_keys, measured["scores"], strict=True):
        score, passed = by_key[key].scores
        assert (score.number, passed.passed, score.explanation) == (
            reference["score"], reference["success"], reference["reason"]), key
    for alias in [*list(AGENTIC)[1:], *CONVERSATIONAL]:  # the judge finds fault with the wrong one, and so do they
        assert by_key[("right", alias)].scores[0].number > by_key[("wrong", alias)].scores[0].number, alias
    # By names alone, in any order, the wrong agent called every expected tool: DeepEval's default scores it 1.
    assert [by_key[(row, "tools")].scores[0].number for row in ("right", "wrong")] == [1.0, 1.0]
    assert by_key[("right", "tools")].scores[0].cost.total_tokens == 0  # tool correctness asked no judge
    assert by_key[("right", "task")].scores[0].number == 0.75
    assert by_key[("right", "conversational-g-eval")].scores[0].number == pytest.approx(0.9)
    assert _comparable(again[0]) + _comparable(again[1]) == _comparable(ours) + _comparable(chats)
    assert all(r.scores[0].cost.total_tokens == 0 for r in [*again[0].results, *again[1].results])


def test_missing_expected_tools_or_role_skip_and_bad_params_are_refused_or_named(registry: Registry) -> None:
    bare = [{"id": "bare", "input": QUESTION, "output": "sunny", "trajectory": AGENT_ROWS[0]["trajectory"]},
            {"id": "chat", "input": "hi", "output": "hello"}]
    with ThreadedProvider(scripted_reply()) as server:
        results = evalsi.evaluate(bare, ["deepeval/tool-correctness", "deepeval/role-adherence"], registry=registry,
                                  judge=_judge(server.base_url))
        (uncomparable,) = evalsi.evaluate(bare[:1], [{"ref": "deepeval/tool-correctness", "params": {
            "expected": ["find_capital"], "evaluation_params": ["input_parameters"]}}], registry=registry).results
        assert not server.requests  # skipped before any judge call
    # DeepEval itself fails on it with an AttributeError; the adapter names the tool.
    assert uncomparable.outcome == Outcome.OUTCOME_ERROR
    assert "the expected tool 'find_capital' has no input_parameters to compare" in uncomparable.reason
    with pytest.raises(evalsi.BadInputError, match=r"evaluation_params: \['name'\] not known; DeepEval compares "
                                                   "input_parameters, output"):
        evalsi.evaluate(bare[:1], [{"ref": "deepeval/tool-correctness", "params": {"evaluation_params": ["name"]}}],
                        registry=registry)
    by_key = {(r.record_id, r.evaluator): r for r in results.results}
    assert by_key[("bare", "tool-correctness")].outcome == Outcome.OUTCOME_SKIPPED
    assert "no expected tools" in by_key[("bare", "tool-correctness")].reason
    assert by_key[("chat", "tool-correctness")].outcome == Outcome.OUTCOME_SKIPPED  # no trajectory
    assert by_key[("chat", "role-adherence")].outcome == Outcome.OUTCOME_SKIPPED
    assert "no chatbot role" in by_key[("chat", "role-adherence")].reason
