"""BFCL's ``memory`` category as dataset rows: ``bfcl://DIR/memory_kv`` (or ``memory_rec_sum``, ``memory_vector``:
BFCL's three categories of one question file, one per memory backend).

``DIR/BFCL_v*_memory.json`` holds the questions (``{"id": "memory_0-customer-0", "question", "scenario"}``, one
turn each), ``DIR/possible_answer/`` the same name their possible answers (``ground_truth``, a list of strings), and
``DIR/memory_prereq_conversation/memory_<scenario>.json`` each scenario's prerequisite conversations, which BFCL
plays first so that the model writes its memories. As bfcl-eval's ``process_memory_test_case`` and
``process_agentic_test_case`` make them, each question's id names the category (``memory_kv_0-customer-0``), its
class is the backend's (``MemoryAPI_kv``), and its first message is BFCL's system prompt asking for the agentic
answer format; the memory's own system prompt is added when the question is played, from the memory the
prerequisite conversations left (``evalsi.datasets.bfcl_memory_drive``).

A row: ``input`` the question's messages, ``reference`` ``{"category", "ground_truth"}`` (``builtin/bfcl-agentic``
grades against it), metadata ``bfcl_category``, ``bfcl_memory`` (``backend``, ``scenario``, ``class``),
``bfcl_prereq`` (the scenario's prerequisite conversations: ``[{"id", "turns"}]``), ``bfcl_functions`` (the
backend's functions from ``multi_turn_func_doc/``, as JSON text, which keeps their keys' order for the prompting
mode's listing) and ``tools``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path, PosixPath
from typing import Any

from evalsi.datasets.formats import check_file, read_rows
from evalsi.errors import BadInputError

BACKENDS = ("kv", "rec_sum", "vector")  # BFCL's ALL_AVAILABLE_MEMORY_BACKENDS
CATEGORIES = tuple(f"memory_{backend}" for backend in BACKENDS)
SCENARIOS = ("student", "customer", "finance", "healthcare", "notetaker")  # BFCL's MEMORY_SCENARIO_NAME
PREREQ_DIR = "memory_prereq_conversation"
FUNC_DOC_DIR = "multi_turn_func_doc"
ANSWERS_DIR = "possible_answer"
# bfcl_eval.constants.default_prompts.ADDITIONAL_SYSTEM_PROMPT_FOR_AGENTIC_RESPONSE_FORMAT
AGENTIC_FORMAT_PROMPT = (
    "For your final answer to the user, you must respond in this format: {'answer': A short and precise answer to "
    "the question, 'context': A brief explanation of how you arrived at this answer or why it is correct}. If you "
    "do not know the answer, respond with {'answer': 'I do not know', 'context': 'I do not know'}. If you think the "
    "question cannot be properly answered, response with {'answer': 'I cannot answer this question', 'context': A "
    "short reason explaining why this question cannot be answered}.\n")
MAX_QUESTIONS = 10_000
MAX_PREREQ = 100  # prerequisite conversations of one scenario (BFCL's have at most 9)
_QUESTION_ID = re.compile(r"memory_(\d+)-([a-z_]+)-(\d+)")


class MemoryQuestions(PosixPath):
    """The memory question file a ``bfcl://DIR/memory_<backend>`` source names, with that backend: the file is
    the same for the three categories, so the path carries which one was asked for."""

    backend: str = "kv"


def memory_file(path: Path, category: str) -> MemoryQuestions | None:
    """The newest ``BFCL_v*_memory.json`` beside ``path`` for a memory category (None when ``category`` is none)."""
    if category not in CATEGORIES:
        return None
    exact = re.compile(r"BFCL_v(\d+)_memory\.json")
    found = sorted(((int(m.group(1)), p) for p in path.parent.glob("BFCL_v*_memory.json")
                    if (m := exact.fullmatch(p.name))), key=lambda pair: pair[0])
    if not found:
        raise BadInputError(f"{path}: no BFCL memory question file {path.parent}/BFCL_v*_memory.json")
    questions = MemoryQuestions(found[-1][1])
    questions.backend = category.removeprefix("memory_")
    return questions


def read_memory(path: MemoryQuestions, name: str, tool: Callable[[Mapping[str, Any]], dict[str, Any]]
                ) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line, row)`` for each memory question of ``path`` (see the module's docstring); ``tool`` makes a
    function's OpenAI-style tool (``bfcl.openai_tool``) for metadata ``tools``."""
    folder = name.rpartition("/")[0] + "/" if "/" in name else ""
    real = path.resolve().parent
    category, class_name = f"memory_{path.backend}", f"MemoryAPI_{path.backend}"
    answers = _answers(_inside(path.parent / ANSWERS_DIR / path.name, real, f"{folder}{ANSWERS_DIR}/{path.name}"))
    functions = _functions(path.parent, real, folder, path.backend)
    prereqs: dict[str, list[dict[str, Any]]] = {}
    name = folder + path.name
    check_file(path, name)
    for line, row in read_rows(path, "jsonl", name=name):
        where = f"{name}:{line}"
        question_id = row.get("id") if isinstance(row, Mapping) else None
        match = _QUESTION_ID.fullmatch(question_id) if isinstance(question_id, str) else None
        if match is None or not isinstance(row, Mapping):
            raise BadInputError(f"{where}: expected a BFCL memory question with an id memory_<n>-<scenario>-<n>")
        scenario = row.get("scenario")
        if scenario not in SCENARIOS or scenario != match.group(2):
            raise BadInputError(f"{where}: scenario: expected the id's, one of {', '.join(SCENARIOS)}")
        if question_id not in answers:
            raise BadInputError(f"{where}: id {question_id!r} has no possible answer in {ANSWERS_DIR}/{path.name}")
        if line > MAX_QUESTIONS:
            raise BadInputError(f"{name}: more than {MAX_QUESTIONS} questions")
        if scenario not in prereqs:
            prereqs[scenario] = _prereq(path.parent, real, folder, scenario, category)
        messages = agentic_turn(row.get("question"), where)
        yield line, {
            "id": question_id.replace("memory", category),
            "input": {"messages": messages},
            "reference": json.dumps({"category": category, "ground_truth": answers[question_id]},
                                    ensure_ascii=False),
            "tools": [tool(f) for f in functions],
            "bfcl_category": category,
            "bfcl_memory": {"backend": path.backend, "scenario": scenario, "class": class_name},
            "bfcl_prereq": prereqs[scenario],
            "bfcl_functions": json.dumps(functions, ensure_ascii=False),  # text: the prompt lists them in order
        }


def _inside(path: Path, real: Path, name: str) -> tuple[Path, str]:
    if not path.resolve().is_relative_to(real):
        raise BadInputError(f"{name}: leads outside the question file's directory")
    check_file(path, name)
    return path, name


def _answers(where: tuple[Path, str]) -> dict[str, list[str]]:
    path, name = where
    answers: dict[str, list[str]] = {}
    for line, row in read_rows(path, "jsonl", name=name):
        truth = row.get("ground_truth") if isinstance(row, Mapping) else None
        if not isinstance(truth, list) or not truth or not all(isinstance(answer, str) for answer in truth):
            raise BadInputError(f"{name}:{line}: ground_truth: expected a list of possible answers (text)")
        if len(answers) >= MAX_QUESTIONS:
            raise BadInputError(f"{name}: more than {MAX_QUESTIONS} possible answers")
        answers[str(row.get("id"))] = truth
    return answers


def _functions(folder: Path, real: Path, shown: str, backend: str) -> list[dict[str, Any]]:
    path, name = _inside(folder / FUNC_DOC_DIR / f"memory_{backend}.json", real,
                         f"{shown}{FUNC_DOC_DIR}/memory_{backend}.json")
    functions = [dict(row) for _line, row in read_rows(path, "jsonl", name=name) if isinstance(row, Mapping)]
    if not functions or not all(isinstance(f.get("name"), str) for f in functions):
        raise BadInputError(f"{name}: expected function descriptions with a name")
    return functions


def _prereq(folder: Path, real: Path, shown: str, scenario: str, category: str) -> list[dict[str, Any]]:
    """A scenario's prerequisite conversations in order, their ids as BFCL renames them
    (``memory_kv_prereq_0-customer-0``)."""
    path, name = _inside(folder / PREREQ_DIR / f"memory_{scenario}.json", real,
                         f"{shown}{PREREQ_DIR}/memory_{scenario}.json")
    conversations: list[dict[str, Any]] = []
    for line, row in read_rows(path, "jsonl", name=name):
        turns = row.get("question") if isinstance(row, Mapping) else None
        if not isinstance(row, Mapping) or not isinstance(row.get("id"), str) or not isinstance(turns, list) or not (
                turns and all(_messages(turn) for turn in turns)):
            raise BadInputError(f"{name}:{line}: expected {{\"id\", \"question\"}} with turns of messages")
        if len(conversations) >= MAX_PREREQ:
            raise BadInputError(f"{name}: more than {MAX_PREREQ} conversations")
        conversations.append({"id": str(row["id"]).replace("memory", category),
                              "turns": [[{"role": m["role"], "content": m["content"]} for m in turn]
                                        for turn in turns]})
    return conversations


def agentic_turn(question: Any, where: str) -> list[dict[str, Any]]:
    """An agentic question's one turn (memory, web search) led by BFCL's answer-format system message."""
    if not (isinstance(question, list) and len(question) == 1 and _messages(question[0])):
        raise BadInputError(f"{where}: question: expected one turn of {{\"role\", \"content\"}} messages")
    return [{"role": "system", "content": AGENTIC_FORMAT_PROMPT},
            *({"role": m["role"], "content": m["content"]} for m in question[0])]


def _messages(turn: Any) -> bool:
    return isinstance(turn, list) and bool(turn) and all(
        isinstance(m, Mapping) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
        for m in turn)

