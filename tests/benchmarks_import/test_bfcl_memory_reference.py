"""The memory category's native parts against bfcl-eval's own: BM25+ scores equal ``rank_bm25.BM25Plus``'s,
``MemoryAPI_kv`` and ``MemoryAPI_rec_sum`` return what BFCL's classes return (as the executor's text) and keep the
same memory on the same random call sequences, and ``builtin/bfcl-agentic``'s verdicts equal
``_evaluate_single_agentic_entry`` with ``agentic_checker`` on generated and real answers, in both modes."""

from __future__ import annotations

import json
import random
import sys
import types
from typing import Any

import pytest

from benchmarks_import.test_bfcl_multi_reference import DATA, bfcl
from benchmarks_import.test_bfcl_relevance import BFCL, _bfcl_function
from evalsi.packs.benchmarks.bfcl_agentic import agentic_checker, check_agentic, standardize_string
from evalsi.packs.benchmarks.bfcl_memory import BM25Plus, MemoryAPI_kv, MemoryAPI_rec_sum
from evalsi.packs.benchmarks.bfcl_multi_exec import Call, Simulators

__all__ = ["bfcl"]

pytest.importorskip("rank_bm25")  # scripts/test.sh installs it beside bfcl-eval
FUNC_SOURCE = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
WORDS = ("dentist", "may", "3", "kid", "school", "pickup", "budget", "rent", "due", "a", "the", "x_y", "Mom", "")


@pytest.fixture(scope="module")
def reference() -> types.SimpleNamespace:
    """bfcl-eval's memory classes (its base needs ``overrides.final``, a decorator, not installed here)."""
    stand_in = types.ModuleType("overrides")
    stand_in.final = lambda function: function  # type: ignore[attr-defined]
    sys.modules.setdefault("overrides", stand_in)
    from bfcl_eval.eval_checker.multi_turn_eval.func_source_code import (  # type: ignore[import-untyped]
        memory_kv,
        memory_rec_sum,
    )
    from rank_bm25 import BM25Plus as ReferenceBM25  # type: ignore[import-untyped]

    return types.SimpleNamespace(kv=memory_kv.MemoryAPI_kv, rec_sum=memory_rec_sum.MemoryAPI_rec_sum,
                                 bm25=ReferenceBM25)


def _text(rng: random.Random, most: int = 6) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, most)))


def test_bm25_plus_scores_equal_rank_bm25s(reference: types.SimpleNamespace) -> None:
    rng = random.Random(7)
    for _ in range(300):
        corpus = [_text(rng, 8).split() for _ in range(rng.randint(1, 9))]
        if not any(corpus):
            continue  # rank_bm25 divides by a zero average length (numpy: nan); keys are never empty
        query = _text(rng, 5).split()
        assert BM25Plus(corpus).get_scores(query) == list(reference.bm25(corpus).get_scores(query))
    with pytest.raises(ZeroDivisionError):
        BM25Plus([])


def _kv_call(rng: random.Random) -> tuple[str, dict[str, Any]]:
    side = rng.choice(("core", "archival"))
    key = rng.choice(("dentist_date", "kid_school", "rent_due", "Bad Key", "x1", "budget", "a_b_c", 7))
    value = rng.choice(("May 3", "x" * 299, "x" * 301, "y" * 2001, 12, _text(rng)))
    name = rng.choice(("add", "add", "add", "remove", "replace", "clear", "retrieve", "list_keys", "key_search",
                       "retrieve_all"))
    if side == "archival" and name == "retrieve_all":
        name = "add"
    arguments: dict[str, Any] = {
        "add": {"key": key, "value": value}, "replace": {"key": key, "value": value}, "remove": {"key": key},
        "retrieve": {"key": key}, "clear": {}, "list_keys": {}, "retrieve_all": {},
        "key_search": {"query": rng.choice(("dentist", "kid school", "rent_due", "zzz", _text(rng)))} | (
            {"k": rng.randint(1, 4)} if rng.random() < 0.5 else {}),
    }[name]
    return f"{side}_memory_{name}", arguments


def _rec_sum_call(rng: random.Random) -> tuple[str, dict[str, Any]]:
    text = rng.choice(("Dentist May 3. ", "kid", "z" * 9990, "w" * 10001, _text(rng), 5))
    name = rng.choice(("memory_append", "memory_append", "memory_update", "memory_clear", "memory_replace",
                       "memory_retrieve"))
    arguments: dict[str, Any] = {"memory_append": {"text": text}, "memory_update": {"text": text},
                                 "memory_clear": {}, "memory_retrieve": {},
                                 "memory_replace": {"old_text": rng.choice(("kid", "May", "nope")),
                                                    "new_text": text}}[name]
    return name, arguments


def _reference_result(instance: Any, name: str, arguments: dict[str, Any]) -> str:
    """A call's result as BFCL's executor writes it (a dict as JSON, an error as its message)."""
    try:
        value = getattr(instance, name)(**arguments)
    except Exception as exc:
        return f"Error during execution: {exc}"
    return json.dumps(value) if type(value) is dict else str(value)


@pytest.mark.parametrize("backend", ["kv", "rec_sum"])
def test_the_memories_return_and_keep_what_bfcls_classes_do(reference: types.SimpleNamespace, backend: str) -> None:
    rng = random.Random(11)
    generate = _kv_call if backend == "kv" else _rec_sum_call
    compared = 0
    for _sequence in range(40):
        ours = Simulators({f"MemoryAPI_{backend}": {}}, [f"MemoryAPI_{backend}"], long_context=False)
        theirs = getattr(reference, backend)()
        for _step in range(60):
            name, arguments = generate(rng)
            assert ours.execute([Call(name, arguments)]) == [_reference_result(theirs, name, arguments)], name
            compared += 1
        instance = ours.instances[f"MemoryAPI_{backend}"]
        if backend == "kv":
            assert (instance.core_memory, instance.archival_memory) == (theirs.core_memory, theirs.archival_memory)
            assert instance._snapshot() == {"core_memory": theirs.core_memory,
                                            "archival_memory": theirs.archival_memory}
        else:
            assert instance.memory == theirs.memory and instance._snapshot() == {"memory": theirs.memory}
        assert instance._dump_core_memory_to_context() == theirs._dump_core_memory_to_context()
    assert compared == 2400
    public = {name for name in dir(getattr(reference, backend)) if not name.startswith("_")}
    assert public == {name for name in dir(MemoryAPI_kv if backend == "kv" else MemoryAPI_rec_sum)
                      if not name.startswith("_")}


def test_a_snapshot_starts_the_next_memory_where_the_last_one_left_off() -> None:
    first = MemoryAPI_kv()
    first.core_memory_add("dentist_date", "May 3")
    second = MemoryAPI_kv()
    second._load_scenario(first._snapshot())
    assert second.core_memory_retrieve("dentist_date") == {"value": "May 3"}
    second.core_memory_clear()
    assert first.core_memory == {"dentist_date": "May 3"}  # a copy: the snapshot is not shared
    summary = MemoryAPI_rec_sum()
    summary.memory_append("ab")
    # BFCL's replace of "" puts the new text between every character (so a long text grows the memory past the
    # limit its checks keep): the same here
    assert summary.memory_replace("", "-") == {"status": "Memory updated."} and summary.memory == "-a-b-"
    with pytest.raises(ValueError, match="should be a string"):
        summary._load_scenario({"memory": ["not", "text"]})


def _answers() -> list[list[str]]:
    return [json.loads(line)["ground_truth"]
            for line in (DATA / "possible_answer" / "BFCL_v4_memory.json").read_text().splitlines() if line.strip()]


def test_the_checker_equals_bfcls_on_real_and_generated_answers() -> None:
    from bfcl_eval.eval_checker.agentic_eval import agentic_checker as theirs  # type: ignore[import-untyped]

    rng = random.Random(3)
    answers = _answers()
    assert len(answers) == 155
    pieces = [*{answer for truth in answers for answer in truth}, "I do not know", "May-3", "(35)", "3 5", "thirty"]
    responses: list[tuple[Any, list[str]]] = []  # a response and the possible answers it is checked against
    for truth in answers:
        responses.append((f"{{'answer': '{rng.choice(truth)}', 'context': 'from memory'}}", truth))
        responses.append((f"{{'answer': '{rng.choice(pieces)}', 'context': '{rng.choice(pieces)}'}}", truth))
    for _ in range(600):
        truth = rng.choice(answers)
        words = [rng.choice(pieces + truth * 8) for _ in range(rng.randint(0, 3))]
        text = rng.choice(("", " ", "-", "_", ", ", ".", "*")).join(words)
        responses.append((rng.choice((text, text.upper(), f"'{text}'", [text, "later"], 35, None)), truth))
    checked = passed = 0
    for response, truth in responses:
        verdict, expected = agentic_checker(response, truth), theirs.agentic_checker(response, truth)
        assert verdict.valid == expected["valid"], (response, truth)
        assert verdict.error_type == expected.get("error_type", "")
        checked, passed = checked + 1, passed + verdict.valid
    assert checked > 900 and 150 < passed < checked - 300  # both verdicts well represented
    for text in ("April 1, 2024", "a/b-c_d*e^f(g).h", "It's 'Q'"):
        assert standardize_string(text) == theirs.standardize_string(text)


def _bfcl_entry(bfcl: types.SimpleNamespace, mode: str) -> Any:
    from bfcl_eval.eval_checker.agentic_eval.agentic_checker import (  # type: ignore[import-untyped]
        agentic_checker as theirs,
    )

    decode = bfcl.fc if mode == "fc" else (lambda result: bfcl.prompting(result))
    handler = types.SimpleNamespace(decode_execute=lambda item, has_tool_call_tag: decode(item))
    evaluate = _bfcl_function(BFCL / "eval_checker" / "eval_runner.py", "_evaluate_single_agentic_entry",
                              {"agentic_checker": theirs,
                               "is_empty_execute_response": bfcl.utils.is_empty_execute_response})
    return lambda steps, truth: evaluate(handler, "memory_kv_0", [steps], truth, {"question": []}, "m", "memory_kv")


@pytest.mark.parametrize("mode", ["fc", "prompting"])
def test_the_final_answer_is_the_one_bfcl_grades(bfcl: types.SimpleNamespace, mode: str) -> None:
    evaluate = _bfcl_entry(bfcl, mode)
    rng = random.Random(5)
    fc_steps: list[Any] = [[{"core_memory_retrieve": json.dumps({"key": "first_name"})}],
                           [{"memory_retrieve": "{}"}], [{"memory_append": "not json"}], [{"f": "[1]"}]]
    text_steps = ["{'answer': 'Michael', 'context': 'core memory'}", "[core_memory_retrieve(key='first_name')]",
                  "core_memory_list_keys()", "", "Michael", "I do not know", "```\n[memory_retrieve()]\n```",
                  "{'answer': 'Seattle'}", "[f(a={})]"]
    outcomes: dict[str, int] = {}
    for _ in range(400):
        steps = [rng.choice(fc_steps + text_steps if mode == "fc" else text_steps)
                 for _ in range(rng.randint(0, 4))]
        truth = rng.choice((["Michael"], ["Seattle", "SEA"], ["35", "thirty five"]))
        expected = evaluate(steps, truth)
        verdict = check_agentic(steps, mode, 1, truth)
        assert verdict.valid == expected["valid"], steps
        assert verdict.error_type == ("" if expected["valid"] else expected["error"]["error_type"]), steps
        outcomes[verdict.error_type] = outcomes.get(verdict.error_type, 0) + 1
    assert set(outcomes) == {"", "agentic:no_last_message", "agentic:answer_not_found"}
    assert check_agentic(["{'answer': 'Michael'}"], mode, 2, ["Michael"]).error_type == "agentic:inference_error"
