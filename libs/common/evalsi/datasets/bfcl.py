"""BFCL (Berkeley Function Calling Leaderboard) question files as dataset rows: ``bfcl://<path-or-category>``.

BFCL ships each category as JSON lines: ``BFCL_v3_<category>.json`` holds ``{"id", "question", "function"}``
(``question`` a list of turns, each a list of ``{"role", "content"}`` messages; ``function`` the function
descriptions), and ``possible_answer/BFCL_v3_<category>.json`` beside it holds ``{"id", "ground_truth"}``. The AST
categories are single-turn: simple (v4: simple_python), multiple, parallel, parallel_multiple (and ``live_`` ones).
The relevance categories (irrelevance, live_irrelevance, live_relevance) are single-turn too and have no possible
answers: whether the model called a function at all is what is graded. The multi-turn categories (multi_turn_base,
miss_func, miss_param, long_context) hold several user turns, graded by ``builtin/bfcl-multi-turn``
(``evalsi.datasets.bfcl_multi`` reads their parts). The memory categories (memory_kv, memory_rec_sum,
memory_vector) are read by ``evalsi.datasets.bfcl_memory`` and graded by ``builtin/bfcl-agentic``. The
format_sensitivity category (listed questions of the AST categories under each of bfcl-eval's prompt
configurations) is read by ``evalsi.datasets.bfcl_format_sensitivity``.

Each question becomes a row: ``input`` the messages as bfcl-eval's prompting mode sends them
(``evalsi.datasets.bfcl_prompt``: its system prompt listing the functions and asking for its call format first in
the question's system message, or a new one), ``reference`` the JSON text ``{"category", "function",
"ground_truth"}`` that ``builtin/bfcl-ast`` grades against (text, so a float stays a float), and metadata
``tools`` (the functions as OpenAI-style tools, for a target that passes tools) and ``bfcl_category``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from evalsi.datasets import bfcl_format_sensitivity, bfcl_memory, bfcl_multi, bfcl_web_search
from evalsi.datasets.bfcl_prompt import hinted, prompting_turn
from evalsi.datasets.formats import check_file, read_rows
from evalsi.errors import BadInputError

SCHEME = "bfcl://"
FORMAT = "bfcl"
CATEGORIES = ("simple", "simple_python", "multiple", "parallel", "parallel_multiple")  # v3's, and v4's simple_python
RELEVANCE_CATEGORIES = ("irrelevance", "relevance")  # graded on whether a call is made; no possible answers
ANSWERS_DIR = "possible_answer"
MAX_ANSWERS = 100_000  # possible answers held while the questions are read (BFCL's largest category has ~1,000)

_ID_SUFFIX = re.compile(r"_\d+(-\d+)*$")  # simple_12, live_simple_3-2-0
# BFCL's type names as JSON Schema types, for the OpenAI-style tools in metadata
_SCHEMA_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": "string"}


def question_file(target: str, name: str) -> Path:
    """The question file ``bfcl://`` names: a file, or ``<dir>/<category>`` for ``<dir>/BFCL_v*_<category>.json``."""
    path = Path(target).expanduser()
    searched = bfcl_web_search.web_search_file(path, path.name)  # web_search_base, _no_snippet, web_search: one file
    if searched is not None:
        return searched
    listed = bfcl_format_sensitivity.sensitivity_file(path)  # format_sensitivity: an id file of other categories
    if listed is not None:
        return listed
    if path.is_file():
        return path
    memory = bfcl_memory.memory_file(path, path.name)  # memory_kv, memory_rec_sum, memory_vector: one file
    if memory is not None:
        return memory
    exact = re.compile(rf"BFCL_v(\d+)_{re.escape(path.name)}\.json")  # BFCL_v*_multiple.json: not parallel_multiple
    found = [(m, p) for p in path.parent.glob(f"BFCL_v*_{path.name}.json") if (m := exact.fullmatch(p.name))]
    matches = [p for _m, p in sorted(found, key=lambda pair: int(pair[0].group(1)))] if path.name else []
    if not matches:
        raise BadInputError(f"{name}: no such file, nor a BFCL category file {path.parent}/BFCL_v*_{path.name}"
                            ".json; accepted: bfcl://<question file> or bfcl://<dir>/<category> with category "
                            f"one of {', '.join(CATEGORIES + RELEVANCE_CATEGORIES)} (live_ ones too) or "
                            f"{', '.join(bfcl_multi.CATEGORIES + bfcl_memory.CATEGORIES + bfcl_web_search.CATEGORIES)}"
                            f", {bfcl_format_sensitivity.CATEGORY}")
    return matches[-1]  # the newest version


def read_bfcl(path: Path, name: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line, row)`` for each question of a BFCL question file, its possible answers read from
    ``possible_answer/<same name>`` beside it (which must not lead out of the file's directory; it may be absent
    when every question is of a relevance category, which has none)."""
    if isinstance(path, bfcl_memory.MemoryQuestions):
        yield from bfcl_memory.read_memory(path, name, openai_tool)
        return
    if isinstance(path, bfcl_web_search.WebSearchQuestions):
        yield from bfcl_web_search.read_web_search(path, name, openai_tool)
        return
    if isinstance(path, bfcl_format_sensitivity.FormatSensitivityQuestions):
        yield from bfcl_format_sensitivity.read_format_sensitivity(
            path, name, CATEGORIES, lambda category, where: read_bfcl(question_file(str(path.parent / category),
                                                                                     where), where))
        return
    # Errors name the files as the source was given: its directory, then the question or answers file.
    folder = name.rpartition("/")[0] + "/" if "/" in name else ""
    name, answers_name = folder + path.name, f"{folder}{ANSWERS_DIR}/{path.name}"
    check_file(path, name)
    answers_path = path.parent / ANSWERS_DIR / path.name
    real_dir = path.resolve().parent
    if not answers_path.resolve().is_relative_to(real_dir):
        raise BadInputError(f"{answers_name}: leads outside the question file's directory")
    answers: dict[str, list[Any]] = {}
    if answers_path.exists():
        check_file(answers_path, answers_name)
        answers = _answers(answers_path, answers_name)
    docs = bfcl_multi.FunctionDocs(path, name)  # a multi-turn question's functions, read when one needs them
    for line, row in read_rows(path, "jsonl", name=name):
        where = f"{name}:{line}"
        if not isinstance(row, Mapping):
            raise BadInputError(f"{where}: expected a BFCL question object, got {type(row).__name__}")
        question_id = row.get("id")
        if not isinstance(question_id, str) or not question_id:
            raise BadInputError(f"{where}: id: expected a non-empty string, got {question_id!r}")
        relevance = category_of(question_id, where).removeprefix("live_") in RELEVANCE_CATEGORIES
        if not relevance and question_id not in answers:
            raise BadInputError(f"{where}: id {question_id!r} has no possible answer in {answers_name}")
        truth = [] if relevance else answers[question_id]
        category = category_of(question_id, where)
        yield line, (multi_turn_row(row, truth, docs, category, where) if bfcl_multi.is_multi_turn(category)
                     else question_row(row, truth, where))


def _answers(path: Path, name: str) -> dict[str, list[Any]]:
    answers: dict[str, list[Any]] = {}
    for line, row in read_rows(path, "jsonl", name=name):
        truth = row.get("ground_truth") if isinstance(row, Mapping) else None
        if not isinstance(truth, list) or not (all(
                isinstance(call, Mapping) and len(call) == 1 and isinstance(next(iter(call.values())), Mapping)
                for call in truth) or bfcl_multi.valid_ground_truth(truth)):
            raise BadInputError(f"{name}:{line}: ground_truth: expected a list of {{function_name: {{param: "
                                "[possible values]}}}}, or (multi-turn) a list of turns of call strings")
        if len(answers) >= MAX_ANSWERS:
            raise BadInputError(f"{name}: more than {MAX_ANSWERS} possible answers")
        answers[str(row.get("id"))] = truth
    return answers


def category_of(question_id: str, where: str) -> str:
    """The category an id names (``parallel_multiple_3`` -> ``parallel_multiple``), refused unless an AST, a
    relevance or a multi-turn one."""
    category = _ID_SUFFIX.sub("", question_id)
    if category.removeprefix("live_") not in CATEGORIES + RELEVANCE_CATEGORIES and not bfcl_multi.is_multi_turn(
            category):
        raise BadInputError(f"{where}: id {question_id!r}: category {category!r} is not one the AST checker grades "
                            f"nor a relevance or multi-turn one; accepted: "
                            f"{', '.join(CATEGORIES + RELEVANCE_CATEGORIES)} (live_ ones too), "
                            f"{', '.join(bfcl_multi.CATEGORIES)}")
    return category


def question_row(row: Mapping[str, Any], truth: list[Any], where: str) -> dict[str, Any]:
    """One BFCL question (and its possible answers) as a dataset row."""
    question_id = str(row["id"])
    category = category_of(question_id, where)
    functions = row.get("function")
    if isinstance(functions, Mapping):
        functions = [functions]
    relevance = category.removeprefix("live_") in RELEVANCE_CATEGORIES  # may offer no function at all
    if not isinstance(functions, list) or not (functions or relevance) or not all(
            isinstance(f, Mapping) and isinstance(f.get("name"), str) for f in functions):
        raise BadInputError(f"{where}: function: expected a list of function descriptions with a name"
                            + ("" if relevance else " (at least one)"))
    messages = _messages(row.get("question"), where)
    return {
        "id": question_id,
        "input": {"messages": prompting_turn(messages, hinted(functions))},
        "reference": json.dumps({"category": category, "function": functions, "ground_truth": truth},
                                ensure_ascii=False, sort_keys=True),
        "tools": [openai_tool(f) for f in functions],
        "bfcl_category": category,
    }


def _messages(question: Any, where: str) -> list[dict[str, str]]:
    if isinstance(question, str):  # BFCL v1's form: the question as plain text
        return [{"role": "user", "content": question}]
    if not isinstance(question, list) or not question:
        raise BadInputError(f"{where}: question: expected a list of turns (each a list of messages)")
    if len(question) != 1:
        raise BadInputError(f"{where}: question: {len(question)} turns; the AST categories are single-turn "
                            "(a multi_turn_ category's id names a multi-turn question)")
    turn = question[0]
    if not isinstance(turn, list) or not all(
            isinstance(m, Mapping) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in turn):
        raise BadInputError(f"{where}: question[0]: expected a list of {{\"role\", \"content\"}} messages")
    return [{"role": m["role"], "content": m["content"]} for m in turn]


def multi_turn_row(row: Mapping[str, Any], truth: Any, docs: bfcl_multi.FunctionDocs, category: str,
                   where: str) -> dict[str, Any]:
    """One multi-turn question as a row: ``input`` the first turn after the system message listing the functions
    offered from the start; metadata ``bfcl_turns`` (every turn's messages), ``bfcl_missed_functions`` (held-back
    functions by the turn that adds them), ``bfcl_involved_classes``, ``tools``; ``reference`` what
    ``builtin/bfcl-multi-turn`` grades against (the calls per turn, the classes and their initial config)."""
    parts = bfcl_multi.multi_turn(row, truth, docs, category, where)
    return {
        "id": str(row["id"]),
        "input": {"messages": prompting_turn(parts.turns[0], hinted(parts.functions))},
        "reference": parts.reference,
        "tools": [openai_tool(f) for f in parts.functions],
        "bfcl_category": category,
        "bfcl_turns": parts.turns,
        "bfcl_missed_functions": parts.missed,
        "bfcl_involved_classes": list(row["involved_classes"]),
    }


def openai_tool(function: Mapping[str, Any]) -> dict[str, Any]:
    """A BFCL function description as an OpenAI-style tool: its types as JSON Schema's, dots in the name as ``_``
    (those APIs refuse dots; grade with ``dots_as_underscores``)."""
    return {"type": "function", "function": {
        "name": str(function["name"]).replace(".", "_"),
        "description": str(function.get("description", "")),
        "parameters": _schema(function.get("parameters") or {"type": "dict", "properties": {}}),
    }}


def _schema(node: Any) -> Any:
    if isinstance(node, list):
        return [_schema(item) for item in node]
    if not isinstance(node, Mapping):
        return node
    out = {key: _schema(value) for key, value in node.items()}
    if isinstance(node.get("type"), str):
        out["type"] = _SCHEMA_TYPES.get(node["type"], node["type"])
    return out
