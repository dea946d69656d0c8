"""DeepEval's agentic and conversational metrics graded by Evals.si, offline: the adapter's plugin (DeepEval in its
own virtualenv) grades a right and a wrong agent run (their trajectories' tool calls) and a right and a wrong
conversation (records whose input is a list of messages), the run's judge a local server answering from a script
(scripted_judge.py). With a real judge, pass its configuration instead (``{"provider": "openai", "model": ...}``).

    python agent_metrics.py [PLUGINS_DIR]

The first run builds DeepEval's virtualenv (about half a minute; cached under EVALSI_PLUGINS_CACHE after that).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from scripted_judge import reply

import evalsi
from evalsi.adapters.deepeval import PLUGIN_DIR
from evalsi.evaluators import Registry
from evalsi.plugins import load_plugins
from evalsi.testing.threaded import ThreadedProvider

QUESTION = "What is the weather in the capital of France?"
EXPECTED = [{"name": "find_capital", "input_parameters": {"country": "France"}},
            {"name": "get_weather", "input_parameters": {"city": "Paris"}}]


def tool_step(name: str, arguments: dict[str, Any], result: str) -> dict[str, Any]:
    """One trajectory step calling a tool (the record's protobuf JSON, as a trace importer writes it)."""
    return {"type": "STEP_TYPE_TOOL", "name": name, "toolCall": {"name": name, "arguments": arguments,
                                                                 "result": result}}


AGENT_RUNS = [
    {"id": "right", "input": QUESTION, "output": "It is sunny in Paris.", "reference": {"expected_tools": EXPECTED},
     "trajectory": {"steps": [tool_step("find_capital", {"country": "France"}, "Paris"),
                              tool_step("get_weather", {"city": "Paris"}, "sunny")]}},
    {"id": "wrong", "input": QUESTION, "output": "It is sunny in Lyon.", "reference": {"expected_tools": EXPECTED},
     "trajectory": {"steps": [tool_step("get_weather", {"city": "Lyon"}, "sunny")]}},
]


def conversation(capital: str) -> dict[str, Any]:
    return {"input": {"messages": [
        {"role": "system", "content": "You are a friendly geography tutor."},  # role-adherence's chatbot role
        {"role": "user", "content": "I live in France. What is its capital?"},
        {"role": "assistant", "content": f"{capital} is the capital of France."},
        {"role": "user", "content": "Which river runs through it?"}]},
        "output": f"A river runs through {capital}."}


CONVERSATIONS = [{"id": "right", **conversation("Paris")}, {"id": "wrong", **conversation("Lyon")}]


def main(plugins: Path) -> None:
    # The plugin is a directory inside the evalsi package: a link to it under a plugins directory serves it.
    plugins.mkdir(parents=True, exist_ok=True)
    if not (plugins / "deepeval").exists():
        (plugins / "deepeval").symlink_to(PLUGIN_DIR)
    registry = Registry.from_entry_points()
    with ThreadedProvider(reply) as server, load_plugins(registry, plugins):
        judge = {"provider": "openai", "model": "scripted", "base_url": server.base_url}
        agents = evalsi.evaluate(AGENT_RUNS, [
            "deepeval/tool-correctness",  # scored in code: no judge call
            {"ref": "deepeval/tool-correctness", "alias": "tools-in-order",
             "params": {"should_consider_ordering": True, "evaluation_params": ["input_parameters"]}},
            "deepeval/argument-correctness",
            "deepeval/task-completion",
        ], registry=registry, judge=judge)
        chats = evalsi.evaluate(CONVERSATIONS, [
            "deepeval/turn-relevancy",
            "deepeval/knowledge-retention",
            "deepeval/role-adherence",
            "deepeval/conversation-completeness",
            {"ref": "deepeval/conversational-g-eval",
             "params": {"criteria": "Does the assistant answer every question correctly?"}},
        ], registry=registry, judge=judge)
    for results in (agents, chats):
        print(results.table())
        for result in results.results:
            print(result.record_id, result.evaluator, [round(s.number, 3) for s in result.scores[:1]],
                  result.scores[0].explanation if result.scores else result.reason)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "plugins"))
