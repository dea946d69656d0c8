"""BFCL's prompting-mode system prompt against bfcl-eval 2026.3.23's own code: for real questions of every category
it ships that ``bfcl://`` reads (single-turn AST, relevance, live, multi-turn, memory), the first turn a record (or
the memory driver) sends equals what bfcl-eval builds for that question: ``load_dataset_entry`` (the functions
with their language hint), then ``system_prompt_pre_processing_chat_model`` (``formulate_system_prompt`` of the
default format), after ``add_memory_instruction_system_prompt`` for memory."""

from __future__ import annotations

import copy
import json
import types
from typing import Any

import pytest

from benchmarks_import.test_bfcl_multi_reference import DATA, bfcl
from evalsi.datasets import load_dataset
from evalsi.datasets.bfcl_memory_drive import _first_turn, memory_prompt
from evalsi.datasets.bfcl_prompt import PROMPT, hinted, listed_functions, prompting_turn, system_prompt
from evalsi.packs.benchmarks.bfcl_memory import MemoryAPI_kv, MemoryAPI_rec_sum
from evalsi.records import content_value, from_value

__all__ = ["bfcl"]  # the reference tests' fixture, which stands in for BFCL's unused parsers

CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple", "live_multiple",
              "live_parallel", "live_parallel_multiple", "irrelevance", "live_irrelevance", "live_relevance",
              "multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
PER_CATEGORY = 3  # questions compared per category, besides every one whose first turn has its own system message


@pytest.fixture(scope="module")
def theirs(bfcl: types.SimpleNamespace) -> types.SimpleNamespace:
    """bfcl-eval's loader and prompt builders (imported once BFCL's parsers are stood in for)."""
    from bfcl_eval import utils  # type: ignore[import-untyped]
    from bfcl_eval.constants import default_prompts  # type: ignore[import-untyped]
    from bfcl_eval.model_handler import utils as handler_utils  # type: ignore[import-untyped]

    return types.SimpleNamespace(load=utils.load_dataset_entry, utils=handler_utils, prompts=default_prompts)


def _picked(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first few questions, and the first that comes with a system message of its own (which BFCL's prompt
    leads rather than replaces)."""
    own = [e for e in entries if e["question"][0] and e["question"][0][0]["role"] == "system"][:1]
    return entries[:PER_CATEGORY] + own


@pytest.mark.parametrize("category", CATEGORIES)
def test_a_records_first_turn_is_what_bfcl_eval_sends(theirs: types.SimpleNamespace, category: str) -> None:
    records = {record.id: record for record in load_dataset(f"bfcl://{DATA}/{category}")}
    picked = _picked(theirs.load(category))
    for entry in picked:
        expected = theirs.utils.system_prompt_pre_processing_chat_model(
            copy.deepcopy(entry["question"][0]), entry["function"], entry["id"])
        ours = content_value(records[entry["id"]].input)["messages"]
        assert ours == expected, entry["id"]
        # the functions listed are the ones bfcl-eval offers (hinted), which FC mode's tools are made from
        assert listed_functions(ours[0]["content"]) == entry["function"]
        for turn, missed in entry.get("missed_function", {}).items():  # held back: listed without the hint
            added = theirs.prompts.DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING.format(functions=missed)
            turns = from_value(records[entry["id"]].metadata["bfcl_turns"])
            assert turns[int(turn)] == [{"role": "user", "content": added}]
    if category.startswith("live_") and category != "live_parallel_multiple":  # those with a system message
        assert any(entry["question"][0][0]["role"] == "system" for entry in picked)


@pytest.mark.parametrize("backend", ["kv", "rec_sum"])
def test_a_memory_questions_first_turn_is_what_bfcl_eval_sends(theirs: types.SimpleNamespace, backend: str) -> None:
    category = f"memory_{backend}"
    records = {record.id: record for record in load_dataset(f"bfcl://{DATA}/{category}")}
    entries = [e for e in theirs.load(category) if e["id"] in records]
    picked = [next(e for e in entries if e["scenario"] == scenario) for scenario in ("customer", "notetaker")]
    memory: Any = MemoryAPI_kv() if backend == "kv" else MemoryAPI_rec_sum()
    if backend == "kv":
        memory.core_memory_add("first_name", "Michael")
    else:
        memory.memory_append("Michael; likes tea.")
    for entry in picked:
        record = records[entry["id"]]
        instance = copy.deepcopy(memory)
        expected = theirs.utils.add_memory_instruction_system_prompt(
            [copy.deepcopy(entry["question"][0])], category, entry["scenario"], instance)[0]
        functions = hinted(json.loads(record.metadata["bfcl_functions"].string_value))  # as the driver offers them
        assert functions == entry["function"]
        question = list(content_value(record.input)["messages"])
        prompt = memory_prompt(backend, entry["scenario"], memory)
        assert _first_turn(question, prompt, functions, "fc") == expected
        assert _first_turn(question, prompt, functions, "prompting") == (
            theirs.utils.system_prompt_pre_processing_chat_model(copy.deepcopy(expected), entry["function"],
                                                                 entry["id"]))


def test_the_prompt_is_formulate_system_prompts_default(theirs: types.SimpleNamespace) -> None:
    default = theirs.prompts.DEFAULT_SYSTEM_PROMPT_FORMAT
    functions = theirs.load("multiple")[0]["function"]
    assert system_prompt(functions) == theirs.utils.formulate_system_prompt(default, functions)
    assert system_prompt([]) == theirs.utils.formulate_system_prompt(default, [])
    assert PROMPT.count("{functions}") == 1 and "\n[\n    {" in system_prompt(functions)  # indented by 4
    turn = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    led = prompting_turn(turn, functions)
    assert led[0]["content"] == system_prompt(functions) + "\n\nBe brief." and led[1:] == turn[1:]
    assert turn[0]["content"] == "Be brief."  # the question's own messages are not changed
    assert listed_functions(led[0]["content"]) == functions
    with pytest.raises(ValueError, match="not BFCL's system prompt"):
        listed_functions("Be brief.")
