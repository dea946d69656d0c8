"""BFCL's memory category end to end: ``bfcl://DIR/memory_kv`` rows (BFCL's own questions, ids, prerequisite
conversations and functions), BFCL's prompts (its constants, and the system message bfcl-eval's own
``add_memory_instruction_system_prompt`` and ``system_prompt_pre_processing_chat_model`` build), and a scenario
played offline against a scripted local model in both modes: the prerequisite conversations write the memory, the
questions start from its snapshot, and ``builtin/bfcl-agentic`` grades the final answers."""

from __future__ import annotations

import copy
import json
import shutil
import types
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import evalsi
from benchmarks_import.test_bfcl_multi_reference import DATA, bfcl
from evalsi.cli.main import cli
from evalsi.datasets import load_dataset
from evalsi.datasets.bfcl_memory import AGENTIC_FORMAT_PROMPT
from evalsi.datasets.bfcl_memory_drive import (
    AGENT_SETTINGS,
    CORE_ARCHIVAL_PROMPT,
    SNAPSHOT_KEY,
    UNIFIED_PROMPT,
    _first_turn,
    memory_prompt,
    play_memory,
)
from evalsi.datasets.bfcl_multi_drive import SIMULATION_KEY, Mode
from evalsi.datasets.bfcl_prompt import PYTHON_HINT, hinted, listed_functions
from evalsi.errors import BadInputError
from evalsi.harness.models import ConnectorModel
from evalsi.judges import JudgeConfig
from evalsi.packs.benchmarks.bfcl_memory import MemoryAPI_kv
from evalsi.records import content_value, from_value
from evalsi.testing import FakeOpenAI
from evalsi.testing.threaded import ThreadedProvider
from evalsi.v1alpha1.record_pb2 import Record

__all__ = ["bfcl"]  # the reference tests' fixture, which stands in for BFCL's unused parsers


def test_bfcls_memory_questions_are_read_per_backend() -> None:
    rows = {backend: list(load_dataset(f"bfcl://{DATA}/memory_{backend}")) for backend in ("kv", "rec_sum")}
    kv = rows["kv"]
    assert len(kv) == len(rows["rec_sum"]) == 155
    assert kv[0].id == "memory_kv_0-customer-0" and rows["rec_sum"][0].id == "memory_rec_sum_0-customer-0"
    assert json.loads(kv[0].reference.text) == {"category": "memory_kv", "ground_truth": ["Michael"]}
    assert from_value(kv[0].metadata["bfcl_memory"]) == {"backend": "kv", "scenario": "customer",
                                                         "class": "MemoryAPI_kv"}
    prereq = from_value(kv[0].metadata["bfcl_prereq"])
    source = [json.loads(line) for line in (DATA / "memory_prereq_conversation" / "memory_customer.json")
              .read_text().splitlines() if line.strip()]
    assert [p["id"] for p in prereq] == [s["id"].replace("memory", "memory_kv") for s in source]
    assert [p["turns"] for p in prereq] == [s["question"] for s in source]
    names = [f["name"] for f in json.loads(rows["rec_sum"][0].metadata["bfcl_functions"].string_value)]
    assert names == ["memory_append", "memory_clear", "memory_replace", "memory_retrieve", "memory_update"]
    messages = content_value(kv[0].input)["messages"]
    assert messages == [{"role": "system", "content": AGENTIC_FORMAT_PROMPT},
                        {"role": "user", "content": "What is my first name?"}]
    assert len(list(load_dataset(f"bfcl://{DATA}/memory_vector"))) == 155  # played: test_bfcl_memory_vector_drive
    with pytest.raises(BadInputError, match="memory_kv"):
        load_dataset(f"bfcl://{DATA}/memory_nothing")


def test_the_prompts_are_bfcls(bfcl: types.SimpleNamespace) -> None:
    from bfcl_eval.constants import default_prompts  # type: ignore[import-untyped]
    from bfcl_eval.model_handler.utils import (  # type: ignore[import-untyped]
        add_memory_instruction_system_prompt,
        system_prompt_pre_processing_chat_model,
    )

    assert AGENTIC_FORMAT_PROMPT == default_prompts.ADDITIONAL_SYSTEM_PROMPT_FOR_AGENTIC_RESPONSE_FORMAT
    assert AGENT_SETTINGS == default_prompts.MEMORY_AGENT_SETTINGS
    assert CORE_ARCHIVAL_PROMPT == default_prompts.MEMORY_BACKEND_INSTRUCTION_CORE_ARCHIVAL
    assert UNIFIED_PROMPT == default_prompts.MEMORY_BACKEND_INSTRUCTION_UNIFIED
    record = next(iter(load_dataset(f"bfcl://{DATA}/memory_kv")))
    functions = json.loads(record.metadata["bfcl_functions"].string_value)
    memory = MemoryAPI_kv()
    memory.core_memory_add("first_name", "Michael")
    question = list(content_value(record.input)["messages"])
    for mode in ("fc", "prompting"):
        theirs = add_memory_instruction_system_prompt([copy.deepcopy(question)], "memory_kv", "customer", memory)[0]
        if mode == "prompting":
            theirs = system_prompt_pre_processing_chat_model(theirs, functions, record.id)
        assert _first_turn(question, memory_prompt("kv", "customer", memory), functions, mode) == theirs
    prereq_turn = [{"role": "user", "content": "Hi"}]  # a prerequisite conversation has no system message
    theirs = add_memory_instruction_system_prompt([copy.deepcopy(prereq_turn)], "memory_rec_sum", "notetaker",
                                                  memory)[0]
    assert _first_turn(prereq_turn, memory_prompt("rec_sum", "notetaker", memory), [], "fc") == theirs


def _scenario(tmp_path: Path) -> Path:
    """A notetaker scenario of two short prerequisite conversations and three questions, in BFCL's layout."""
    (tmp_path / "possible_answer").mkdir(parents=True)
    (tmp_path / "memory_prereq_conversation").mkdir()
    (tmp_path / "multi_turn_func_doc").mkdir()
    for name in ("memory_kv.json", "memory_rec_sum.json"):
        shutil.copy(DATA / "multi_turn_func_doc" / name, tmp_path / "multi_turn_func_doc" / name)
    prereq = [
        {"id": "memory_prereq_32-notetaker-0", "scenario": "notetaker", "involved_classes": ["MemoryAPI"],
         "question": [[{"role": "user", "content": "My dentist appointment is on May 3."}],
                      [{"role": "user", "content": "Thanks!"}]]},
        {"id": "memory_prereq_33-notetaker-1", "scenario": "notetaker", "involved_classes": ["MemoryAPI"],
         "question": [[{"role": "user", "content": "Rent is due on the 1st."}]]},
    ]
    questions = [("When is my dentist appointment?", ["May 3"]), ("When is rent due?", ["1st", "first"]),
                 ("What is my cat's name?", ["Tom"])]
    lines = (json.dumps(entry) for entry in prereq)
    (tmp_path / "memory_prereq_conversation" / "memory_notetaker.json").write_text("\n".join(lines) + "\n")
    ids = [f"memory_{index}-notetaker-{index}" for index in range(len(questions))]
    (tmp_path / "BFCL_v4_memory.json").write_text("".join(json.dumps(
        {"id": i, "question": [[{"role": "user", "content": q}]], "involved_classes": ["MemoryAPI"],
         "scenario": "notetaker"}) + "\n" for i, (q, _a) in zip(ids, questions, strict=True)))
    (tmp_path / "possible_answer" / "BFCL_v4_memory.json").write_text("".join(
        json.dumps({"id": i, "ground_truth": a}) + "\n" for i, (_q, a) in zip(ids, questions, strict=True)))
    return tmp_path


# What the scripted model does, by the user message that starts the conversation: its answers in order (calls or
# text); a prompting-mode run gets each call as text in BFCL's format.
SCRIPT: dict[str, dict[str, list[Any]]] = {
    "kv": {
        "My dentist appointment is on May 3.": [
            [{"core_memory_add": {"key": "dentist_appointment", "value": "May 3"}}], "Noted.", "You are welcome."],
        "Rent is due on the 1st.": [[{"archival_memory_add": {"key": "rent_due", "value": "the 1st"}}], "Noted."],
        "When is my dentist appointment?": ["{'answer': 'May 3', 'context': 'in my core memory'}"],
        "When is rent due?": [[{"archival_memory_retrieve": {"key": "rent_due"}}],
                              "{'answer': 'the 1st', 'context': 'archival memory'}"],
        "What is my cat's name?": ["{'answer': 'I do not know', 'context': 'I do not know'}"],
    },
    "rec_sum": {
        "My dentist appointment is on May 3.": [[{"memory_append": {"text": "Dentist: May 3. "}}], "Noted.", "Bye."],
        "Rent is due on the 1st.": [[{"memory_append": {"text": "Rent due: the 1st. "}}], "Noted."],
        "When is my dentist appointment?": ["{'answer': 'May 3', 'context': 'memory'}"],
        "When is rent due?": [[{"memory_retrieve": {}}], "{'answer': 'the 1st', 'context': 'memory'}"],
        "What is my cat's name?": ["{'answer': 'Felix', 'context': 'a guess'}"],
    },
}


def _reply(script: dict[str, list[Any]], mode: Mode, seen: list[dict[str, Any]]) -> Any:
    def reply(body: dict[str, Any]) -> Any:
        seen.append(copy.deepcopy(body))
        messages = body["messages"]
        first_user = next(m["content"] for m in messages if m["role"] == "user")
        answers = script[first_user]
        answer = answers[min(sum(1 for m in messages if m["role"] == "assistant"), len(answers) - 1)]
        if isinstance(answer, str):
            return answer
        if mode == "prompting":
            return "[" + ", ".join(f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"
                                   for call in answer for name, arguments in call.items()) + "]"
        return ("tool_calls", [{"name": name, "arguments": arguments} for call in answer
                               for name, arguments in call.items()])
    return reply


async def _play(records: list[Record], backend: str, mode: Mode, seen: list[dict[str, Any]]
                ) -> tuple[list[Record], dict[str, str]]:
    async with FakeOpenAI(_reply(SCRIPT[backend], mode, seen)) as server:
        model = ConnectorModel(JudgeConfig(model="scripted", base_url=server.base_url, max_retries=0), [])
        try:
            return await play_memory(records, model, mode=mode, concurrency=2)
        finally:
            await model.aclose()


@pytest.mark.parametrize(("backend", "mode"), [("kv", "fc"), ("kv", "prompting"), ("rec_sum", "prompting"),
                                               ("rec_sum", "fc")])
async def test_a_scenario_is_played_prereqs_first_and_graded(tmp_path: Path, backend: str, mode: Mode) -> None:
    records = list(load_dataset(f"bfcl://{_scenario(tmp_path)}/memory_{backend}"))
    seen: list[dict[str, Any]] = []
    played, errors = await _play(records, backend, mode, seen)
    assert errors == {}
    by_id = {record.id: record for record in played}
    assert set(by_id) == {f"memory_{backend}_{i}-notetaker-{i}" for i in range(3)}
    expected = ({"core_memory": {"dentist_appointment": "May 3"}, "archival_memory": {"rent_due": "the 1st"}}
                if backend == "kv" else {"memory": "Dentist: May 3. Rent due: the 1st. "})
    for record in played:
        assert from_value(record.metadata[SNAPSHOT_KEY]) == expected
        assert from_value(record.metadata[SIMULATION_KEY])["mode"] == mode
    # the second prerequisite conversation saw what the first wrote; the questions saw both
    first_system = next(body["messages"][0]["content"] for body in seen
                        if body["messages"][1]["content"] == "Rent is due on the 1st.")
    assert ("dentist_appointment" if backend == "kv" else "Dentist: May 3.") in first_system
    assert "rent_due" not in first_system and "Rent due" not in first_system
    question = content_value(by_id[f"memory_{backend}_0-notetaker-0"].input)["messages"]
    assert question[0]["content"].endswith(AGENTIC_FORMAT_PROMPT)
    if backend == "kv":  # the core memory is shown; the archival memory is not
        assert '"dentist_appointment": "May 3"' in question[0]["content"] and "rent_due" not in question[0]["content"]
    leading = "You are an expert" if mode == "prompting" else AGENT_SETTINGS["notetaker"]
    assert question[0]["content"].startswith(leading)
    # the functions are offered as bfcl-eval offers them, each description with its language hint
    functions = hinted(json.loads(records[0].metadata["bfcl_functions"].string_value))
    if mode == "fc":
        assert all("tools" in body for body in seen)
        assert all(tool["function"]["description"].endswith(PYTHON_HINT) for body in seen for tool in body["tools"])
    else:
        assert listed_functions(question[0]["content"]) == functions
    results = {r.record_id: r.scores[0] for r in evalsi.evaluate(played, ["builtin/bfcl-agentic"]).results}
    assert [results[f"memory_{backend}_{i}-notetaker-{i}"].passed for i in range(3)] == [True, True, False]
    assert results[f"memory_{backend}_2-notetaker-2"].explanation.startswith("agentic:answer_not_found")
    rent = content_value(by_id[f"memory_{backend}_1-notetaker-1"].output)["messages"]
    assert [m["role"] for m in rent] == ["assistant", "tool", "assistant"]


def test_play_bfcl_plays_and_grades_memory_questions(tmp_path: Path) -> None:
    source = f"bfcl://{_scenario(tmp_path / 'data')}/memory_kv"
    out = tmp_path / "played.jsonl"
    with ThreadedProvider(_reply(SCRIPT["kv"], "fc", [])) as server:
        done = CliRunner().invoke(cli, ["cases", "play-bfcl", source, "--model", "scripted", "--base-url",
                                        server.base_url, "-o", str(out), "--format", "json", "--no-progress"])
    assert done.exit_code == 0, done.output
    summary = json.loads(done.output)
    assert [(q["question"], q["passed"]) for q in summary["questions"]] == [
        ("memory_kv_0-notetaker-0", True), ("memory_kv_1-notetaker-1", True), ("memory_kv_2-notetaker-2", False)]
    assert summary["pass_rate"] == pytest.approx(2 / 3)
    again = evalsi.evaluate(list(load_dataset(str(out))), ["builtin/bfcl-agentic"])  # the records grade again
    assert [r.scores[0].passed for r in again.results] == [True, True, False]


async def test_bfcls_own_scenario_fills_the_memory_to_its_limits() -> None:
    """BFCL's notetaker scenario (five prerequisite conversations, 24 user turns) against a model that stores each
    user message in its core memory: the eighth store meets BFCL's core-memory limit, and every question starts
    from the seven that fit."""
    records = [r for r in load_dataset(f"bfcl://{DATA}/memory_kv") if "notetaker" in r.id][:2]
    stored: list[str] = []

    def reply(body: dict[str, Any]) -> Any:
        messages = body["messages"]
        if messages[-1]["role"] == "tool":
            stored.append(messages[-1]["content"])
            return "Noted."
        if "answer" in messages[0]["content"].split("\n\n")[-1]:  # a question: BFCL's answer format leads it
            return "{'answer': 'I do not know', 'context': 'I do not know'}"
        return ("tool_calls", [{"name": "core_memory_add",
                                "arguments": {"key": f"note_{len(stored)}", "value": messages[-1]["content"][:50]}}])

    async with FakeOpenAI(reply) as server:
        model = ConnectorModel(JudgeConfig(model="scripted", base_url=server.base_url, max_retries=0), [])
        try:
            played, errors = await play_memory(records, model, mode="fc")
        finally:
            await model.aclose()
    assert errors == {} and len(played) == 2
    turns = sum(len(p["turns"]) for p in from_value(records[0].metadata["bfcl_prereq"]))
    assert turns == 24 and len(stored) == turns
    assert stored[:7] == ['{"status": "Key-value pair added."}'] * 7
    assert set(stored[7:]) == {'{"error": "Core memory is full. Please clear some entries."}'}
    snapshot = from_value(played[0].metadata[SNAPSHOT_KEY])
    assert list(snapshot["core_memory"]) == [f"note_{i}" for i in range(7)] and snapshot["archival_memory"] == {}
    assert '"note_6"' in content_value(played[1].input)["messages"][0]["content"]
