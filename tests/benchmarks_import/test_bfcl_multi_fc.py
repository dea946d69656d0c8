"""BFCL's multi-turn questions played in its function-calling mode (``bfcl_multi_drive.play_question_fc``) against
a local OpenAI-compatible server answering with scripted tool calls: the tools sent equal bfcl-eval's
``convert_to_tool`` (its OpenAI chat-completions style), the loop is BFCL's FC loop (results as ``tool`` messages with
the call's id, held-back functions added as tools), and the played conversation's verdict equals bfcl-eval's own
checker (``_evaluate_single_multi_turn_entry`` with its FC decoder) and that of the same answers played in prompting
mode."""

from __future__ import annotations

import copy
import json
import types
from typing import Any

import pytest

import evalsi
from benchmarks_import.test_bfcl_multi_drive import EXAMPLES, SCRIPT
from benchmarks_import.test_bfcl_multi_reference import DATA, _bfcl_verdict, bfcl
from evalsi.datasets import load_dataset
from evalsi.datasets.bfcl_multi_drive import MAX_STEPS, SIMULATION_KEY, play_questions
from evalsi.datasets.bfcl_multi_fc import ADDED_FUNCTIONS_FC, fc_tools
from evalsi.datasets.bfcl_prompt import listed_functions
from evalsi.harness.models import ConnectorModel
from evalsi.judges import JudgeConfig
from evalsi.judges.panel import JudgeSet
from evalsi.packs.benchmarks.bfcl_multi import decode_step
from evalsi.packs.benchmarks.bfcl_multi_exec import parse_ground_truth
from evalsi.records import content_value, from_value, to_value
from evalsi.testing import FakeOpenAI
from evalsi.v1alpha1.record_pb2 import Record

__all__ = ["bfcl"]  # BFCL's checker, the reference tests' fixture

Script = dict[str, list[list[Any]]]  # a question's first user message -> per turn, the answers (calls or text)


def _bfcl_tools(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from bfcl_eval.constants.enums import ModelStyle  # type: ignore[import-untyped]
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI  # type: ignore[import-untyped]
    from bfcl_eval.model_handler.utils import convert_to_tool  # type: ignore[import-untyped]

    tools: list[dict[str, Any]] = convert_to_tool(functions, GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS)
    return tools


def _ours(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": tool.to_dict()} for tool in fc_tools(functions)]


def test_the_tools_equal_bfcls_conversion(bfcl: types.SimpleNamespace) -> None:
    functions = [json.loads(line) for path in sorted((DATA / "multi_turn_func_doc").glob("*.json"))
                 for line in path.read_text().splitlines() if line.strip()]
    assert len(functions) > 100  # every class's functions
    odd = {"name": "geo.distance", "description": "d", "parameters": {"type": "dict", "required": ["a"], "properties": {
        "a": {"type": "float", "description": "km"}, "b": {"description": "no type"}, "c": {"type": "tuple",
        "items": {"type": "list", "items": {"type": "integer"}}}, "d": {"type": "array", "items": {
            "type": "dict", "properties": {"e": {"type": "Bigint", "description": ""}}}},
        "f": {"type": "dict", "properties": {"g": {"type": "any"}}}, "h": {"type": "weird"}}}}
    for case in [*functions, odd]:
        assert _ours([case]) == _bfcl_tools([case]), case["name"]
    assert _ours([odd])[0]["function"]["name"] == "geo_distance"
    with pytest.raises(ValueError, match="item type 'weird'"):
        fc_tools([{"name": "f", "parameters": {"properties": {"x": {"type": "array", "items": {"type": "weird"}}}}}])


def _reply(scripts: Script, seen: list[dict[str, Any]]) -> Any:
    def reply(body: dict[str, Any]) -> Any:
        seen.append(copy.deepcopy(body))
        messages = body["messages"]
        users = [i for i, m in enumerate(messages) if m["role"] == "user"]
        turns = scripts[messages[users[0]]["content"]]
        steps = turns[len(users) - 1] if len(users) <= len(turns) else []
        step = sum(1 for m in messages[users[-1]:] if m["role"] == "assistant")
        answer = steps[step] if step < len(steps) else "Done."
        if isinstance(answer, str):
            return answer
        return ("tool_calls", [{"name": name, "arguments": arguments} for call in answer
                               for name, arguments in call.items()])
    return reply


async def _play_fc(records: list[Record], scripts: Script, seen: list[dict[str, Any]], *script: Any
                   ) -> tuple[list[Record], dict[str, str]]:
    async with FakeOpenAI(_reply(scripts, seen)) as server:
        server.enqueue(*script)
        model = ConnectorModel(JudgeConfig(model="scripted", base_url=server.base_url, max_retries=0), [])
        try:
            return await play_questions(records, model, mode="fc", concurrency=3)
        finally:
            await model.aclose()


def _as_calls(answer: str) -> list[dict[str, Any]] | str:
    """A prompting answer (text in BFCL's call format) as the tool calls of the same calls."""
    calls = decode_step(answer)
    return [{call.name: dict(call.kwargs)} for call in calls] if calls else answer


async def test_a_miss_func_question_is_played_with_tools_and_graded_as_its_prompting_twin() -> None:
    records = list(load_dataset(f"bfcl://{EXAMPLES}/multi_turn_miss_func"))
    turns = from_value(records[0].metadata["bfcl_turns"])
    first = turns[0][0]["content"]
    script = [[_as_calls(a) for a in next(s for start, s in SCRIPT.items() if start in turn[0]["content"])]
              for turn in turns]
    seen: list[dict[str, Any]] = []
    [record], errors = await _play_fc(records, {first: script}, seen)
    assert errors == {}
    # no system prompt; the functions as BFCL's OpenAI handler sends them, resolve_ticket only from turn 2 on
    assert [m["role"] for m in seen[0]["messages"]] == ["user"]
    functions = listed_functions(content_value(records[0].input)["messages"][0]["content"])
    missed = from_value(records[0].metadata["bfcl_missed_functions"])["2"]
    assert seen[0]["tools"] == _bfcl_tools(functions)
    assert seen[-1]["tools"] == _bfcl_tools(functions + missed)
    assert all("resolve_ticket" not in json.dumps(body["tools"]) for body in seen[:3])
    assert "resolve_ticket" in json.dumps(seen[3]["tools"])
    added = [m for m in seen[-1]["messages"] if m["role"] == "user"][2]
    assert added == {"role": "user", "content": ADDED_FUNCTIONS_FC}
    # each result goes back as a tool message answering its call's id
    call, result = seen[1]["messages"][1:3]
    assert result["role"] == "tool" and result["tool_call_id"] == call["tool_calls"][0]["id"]
    assert json.loads(call["tool_calls"][0]["function"]["arguments"]) == {"title": "VPN down", "priority": 3}
    assert '"id": 2' in result["content"]
    assert from_value(record.metadata[SIMULATION_KEY]) == {"reason": "done", "turns": 4, "mode": "fc"}
    messages = content_value(record.output)["messages"]
    assert [m["role"] for m in messages].count("user") == 3
    assert [c.name for m in record.output.messages.messages for c in m.tool_calls] == [
        "create_ticket", "resolve_ticket", "get_user_id", "send_message"]
    # graded as the prompting conversation of the same answers: passing, and failing alike when a call is wrong
    [fc_result] = (await evalsi.evaluate_async([record], ["builtin/bfcl-multi-turn"])).results
    assert fc_result.scores[0].passed, fc_result.scores[0].explanation
    wrong = [[[{"create_ticket": {"title": "VPN down", "priority": 4}}], "Done."], *script[1:]]
    [failed], _ = await _play_fc(records, {first: wrong}, [])
    [fc_failed] = (await evalsi.evaluate_async([failed], ["builtin/bfcl-multi-turn"])).results
    prompting = Record()
    prompting.CopyFrom(records[0])
    prompting.output.CopyFrom(failed.output)  # the same steps written as text in BFCL's call format
    for message in prompting.output.messages.messages:
        if message.tool_calls:
            message.content = "[" + ", ".join(f"{c.name}(" + ", ".join(
                f"{k}={v!r}" for k, v in from_value(c.arguments).items()) + ")" for c in message.tool_calls) + "]"
            del message.tool_calls[:]
    [text_failed] = (await evalsi.evaluate_async([prompting], ["builtin/bfcl-multi-turn"])).results
    assert not fc_failed.scores[0].passed
    assert fc_failed.scores[0].explanation == text_failed.scores[0].explanation
    assert fc_failed.scores[0].explanation.startswith("multi_turn:instance_state_mismatch")


async def test_arguments_that_are_not_json_end_the_turn_and_a_model_that_keeps_calling_is_stopped() -> None:
    records = list(load_dataset(f"bfcl://{EXAMPLES}/multi_turn_base"))
    first = from_value(records[0].metadata["bfcl_turns"])[0][0]["content"]
    broken = {"id": "c1", "object": "chat.completion", "model": "scripted", "choices": [{"index": 0, "message": {
        "role": "assistant", "content": None, "tool_calls": [{"id": "call_x", "type": "function", "function": {
            "name": "get_ticket", "arguments": "{ticket_id: 1"}}]}, "finish_reason": "tool_calls"}]}
    seen: list[dict[str, Any]] = []
    [record], errors = await _play_fc(records, {first: []}, seen, ("garbage", json.dumps(broken)))
    assert errors == {}
    # BFCL's convert_to_function_call fails on the arguments: no result is sent, the next turn follows at once
    assert seen[1]["messages"][1]["tool_calls"][0]["function"]["arguments"] == "{ticket_id: 1"
    assert seen[1]["messages"][2]["role"] == "user"
    looping = {first: [[[{"get_ticket": {"ticket_id": 1}}]] * (MAX_STEPS + 5)]}
    seen.clear()
    [record], errors = await _play_fc(records, looping, seen)
    assert errors == {} and len(seen) == MAX_STEPS + 1
    assert from_value(record.metadata[SIMULATION_KEY]) == {"reason": "step_limit", "turns": 1, "mode": "fc"}
    [result] = (await evalsi.evaluate_async([record], ["builtin/bfcl-multi-turn"])).results
    assert result.scores[0].explanation.startswith("multi_turn:force_terminated")


async def test_fc_needs_a_model_that_takes_tools() -> None:
    async with FakeOpenAI() as server:
        config = JudgeConfig.from_mapping({"model": "m", "base_url": server.base_url, "name": "model"})
        async with JudgeSet({"model": config}, cache=False) as models:
            with pytest.raises(TypeError, match="takes tools"):
                await play_questions([], models.clients["model"], mode="fc")


def _bfcl_questions() -> list[Record]:
    """A few of BFCL's own questions (base, miss_func, long_context) whose possible answers name every argument."""
    chosen = []
    for category, count in (("multi_turn_base", 3), ("multi_turn_miss_func", 2), ("multi_turn_long_context", 1)):
        found = 0
        for record in load_dataset(f"bfcl://{DATA}/{category}"):
            truth = json.loads(record.reference.text)["ground_truth"]
            if all(not parse_ground_truth(call).args for turn in truth for call in turn):
                chosen.append(record)
                found += 1
                if found == count:
                    break
    return chosen


def _turns_as_bfcl_records_them(record: Record) -> list[list[Any]]:
    """The played conversation as BFCL's FC loop records a model's answers: per turn, each answer's tool calls
    (``{name: arguments JSON text}``) or its text."""
    turns: list[list[Any]] = [[]]
    for message in record.output.messages.messages:
        if message.role == "user":
            turns.append([])
        elif message.role == "assistant":
            turns[-1].append([{c.name: json.dumps(from_value(c.arguments))} for c in message.tool_calls]
                             if message.tool_calls else message.content)
    return turns


async def test_bfcls_own_questions_played_in_fc_mode_get_bfcls_verdicts(bfcl: types.SimpleNamespace) -> None:
    questions = _bfcl_questions()
    assert len(questions) == 6
    records, scripts, expected_tools = [], {}, {}
    for variant in ("right", "dropped"):
        for question in questions:
            record = Record()
            record.CopyFrom(question)
            record.id = f"{question.id}/{variant}"
            turns = from_value(question.metadata["bfcl_turns"])
            truth = json.loads(question.reference.text)["ground_truth"]
            calls = [[{(c := parse_ground_truth(call)).name: dict(c.kwargs)} for call in turn] for turn in truth]
            if variant == "dropped":  # the last call of the first busy turn left out
                busy = next(i for i, turn in enumerate(calls) if turn)
                calls[busy] = calls[busy][:-1]
            # a distinct first message per record, so the scripted server knows which one it answers (miss_func's
            # questions are base ones with a function held back)
            turns[0][0]["content"] += f" ({record.id})"
            record.metadata["bfcl_turns"].CopyFrom(to_value(turns))
            first = turns[0][0]["content"]
            scripts[first] = [[turn, "Done."] if turn else ["Nothing to do."] for turn in calls]
            expected_tools[first] = _bfcl_tools(listed_functions(content_value(record.input)["messages"][0]["content"]))
            assert len(calls) == len(turns)
            records.append(record)
    seen: list[dict[str, Any]] = []
    played, errors = await _play_fc(records, scripts, seen)
    assert errors == {} and len(played) == len(records)
    for body in seen:
        if len([m for m in body["messages"] if m["role"] == "user"]) == 1:  # turn 0: the question's tools
            assert body["tools"] == expected_tools[body["messages"][0]["content"]]
    results = {r.record_id: r for r in (await evalsi.evaluate_async(played, ["builtin/bfcl-multi-turn"])).results}
    verdicts = []
    for record in played:
        reference = json.loads(record.reference.text)
        entry = {"id": record.id.partition("/")[0], "initial_config": reference["initial_config"],
                 "involved_classes": reference["involved_classes"]}
        expected = _bfcl_verdict(bfcl, entry, reference["ground_truth"], _turns_as_bfcl_records_them(record), False)
        score = results[record.id].scores[0]
        assert (score.passed, score.explanation.partition(": ")[0]) == expected, record.id
        verdicts.append((record.id.endswith("/right"), expected[0]))
    # BFCL's possible answers pass in FC mode (miss_func's held-back calls and long_context's too); a dropped call
    # fails (an empty turn, or another state)
    assert all(right == passed for right, passed in verdicts)
