"""BFCL's multi-turn questions played against a model on a local OpenAI-compatible server, as bfcl-eval's prompting
loop plays them (the next user turn once the model stops calling, held-back functions at their turn, the calls
answered by the simulators), then graded by builtin/bfcl-multi-turn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import evalsi
from evalsi.datasets import load_dataset
from evalsi.datasets.bfcl_multi_drive import MAX_STEPS, SIMULATION_KEY, play_questions
from evalsi.judges import JudgeConfig
from evalsi.judges.panel import JudgeSet
from evalsi.packs.benchmarks.bfcl_multi_sim import SIMULATORS
from evalsi.records import content_value, from_value
from evalsi.testing import FakeOpenAI

EXAMPLES = Path(__file__).parents[2] / "examples" / "benchmarks" / "bfcl"
RESULTS = "[{'role': 'tool'"  # how BFCL's prompting mode hands a step's results back, as a user message
SCRIPT = {  # the miss_func example: per user turn, the model's answers in order
    "Open a ticket titled 'VPN down' with priority 3.": ["[create_ticket(title='VPN down', priority=3)]", "Done."],
    "Resolve ticket 2 with the resolution 'Restarted the VPN gateway'.": ["I have no function that resolves tickets."],
    "I have updated some more functions": ["[resolve_ticket(ticket_id=2, resolution='Restarted the VPN gateway')]",
                                           "Resolved."],
    "Tell Cene the VPN works again: send 'VPN is back.'": [
        "```\n[get_user_id(user='Cene')]\n```", "[send_message(receiver_id='USR003', message='VPN is back.')]",
        "Sent."],
}
seen: list[list[dict[str, Any]]] = []


def _model(body: dict[str, Any]) -> str:
    messages = body["messages"]
    seen.append(messages)
    if body["model"] == "looping":
        return "[get_ticket(ticket_id=1)]"
    turn = max(i for i, m in enumerate(messages) if m["role"] == "user" and not m["content"].startswith(RESULTS))
    asked = messages[turn]["content"]
    answers = next(script for start, script in SCRIPT.items() if start in asked)
    return answers[sum(1 for m in messages[turn:] if m["role"] == "assistant")]


async def _play(model: str, category: str) -> tuple[list[Any], dict[str, str]]:
    records = list(load_dataset(f"bfcl://{EXAMPLES}/{category}"))
    async with FakeOpenAI(_model) as server:
        config = JudgeConfig.from_mapping({"model": model, "base_url": server.base_url, "max_retries": 0,
                                           "name": "model"})
        async with JudgeSet({"model": config}, cache=False) as models:
            return await play_questions(records, models.clients["model"])


async def test_a_miss_func_question_is_played_turn_by_turn_and_graded() -> None:
    seen.clear()
    [record], errors = await _play("scripted", "multi_turn_miss_func")
    assert errors == {}
    messages = content_value(record.output)["messages"]
    assert [m["role"] for m in messages].count("user") == 3  # turns 1 to 3; turn 0 is the input's
    # the simulator answered the model: the ticket it created got the next id, 2
    first_results = next(m for m in seen[1] if m["content"].startswith(RESULTS))["content"]
    assert "'name': \"create_ticket(title='VPN down', priority=3)\"" in first_results and '"id": 2' in first_results
    # resolve_ticket is offered only from its turn: in the system message of no request, in turn 2's user message
    assert all("resolve_ticket" not in request[0]["content"] for request in seen)
    added = [m for m in seen[-1] if m["role"] == "user" and "I have updated some more functions" in m["content"]]
    assert len(added) == 1 and "'name': 'resolve_ticket'" in added[0]["content"]
    assert from_value(record.metadata[SIMULATION_KEY]) == {"reason": "done", "turns": 4, "mode": "prompting"}
    results = await evalsi.evaluate_async([record], ["builtin/bfcl-multi-turn"])
    assert results.results[0].scores[0].passed, results.results[0].scores[0].explanation


async def test_a_model_that_keeps_calling_is_stopped_and_fails_as_force_terminated() -> None:
    seen.clear()
    [record], errors = await _play("looping", "multi_turn_base")
    assert errors == {} and len(seen) == MAX_STEPS + 1  # BFCL's limit: the 21st step with calls ends the question
    assert from_value(record.metadata[SIMULATION_KEY]) == {"reason": "step_limit", "turns": 1, "mode": "prompting"}
    [result] = (await evalsi.evaluate_async([record], ["builtin/bfcl-multi-turn"])).results
    assert result.scores[0].explanation.startswith("multi_turn:force_terminated")


async def test_a_question_whose_class_has_no_simulator_is_refused_before_the_model_is_asked() -> None:
    # every class of BFCL's files has a simulator: the record's reference names one that has none
    records = list(load_dataset(f"bfcl://{EXAMPLES}/multi_turn_base"))
    reference = json.loads(records[0].reference.text)
    records[0].reference.text = json.dumps({**reference, "involved_classes": ["MessageAPI", "WeatherAPI"]})
    seen.clear()
    async with FakeOpenAI(_model) as server:
        config = JudgeConfig.from_mapping({"model": "scripted", "base_url": server.base_url, "max_retries": 0,
                                           "name": "model"})
        async with JudgeSet({"model": config}, cache=False) as models:
            played, errors = await play_questions(records, models.clients["model"])
    assert played == [] and seen == []
    assert errors == {"multi_turn_base_0": f"BFCL class 'WeatherAPI': no simulator; built: {', '.join(SIMULATORS)}"}
