"""BFCL's ``web_search`` category as dataset rows: ``bfcl://DIR/web_search_base`` or ``web_search_no_snippet``
(BFCL's two categories of one question file: the search results with and without their snippets), and
``bfcl://DIR/web_search`` or the file itself for both (bfcl-eval's ``web_search`` group).

``DIR/BFCL_v*_web_search.json`` holds the questions (``{"id": "web_search_0", "question", "involved_classes":
["WebSearchAPI"]}``, one turn each), ``DIR/possible_answer/`` the same name their possible answers
(``ground_truth``, a list of strings), ``DIR/multi_turn_func_doc/web_search.json`` the class's functions. As
bfcl-eval's ``process_web_search_test_case``, ``process_agentic_test_case`` and
``populate_initial_settings_for_web_search_test_cases`` make them, each id names the category
(``web_search_no_snippet_0``), the first message is BFCL's system prompt asking for the agentic answer format, and
the class starts with ``show_snippet`` off for ``no_snippet``. Played by ``evalsi.datasets.bfcl_web_search_drive``
(which adds the prompting mode's system prompt), graded by ``builtin/bfcl-agentic``.

A row: ``input`` the question's messages, ``reference`` ``{"category", "ground_truth"}``, metadata
``bfcl_category``, ``bfcl_web_search`` (``{"show_snippet"}``), ``bfcl_functions`` (JSON text, in order) and
``tools``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path, PosixPath
from typing import Any

from evalsi.datasets.bfcl_memory import (
    ANSWERS_DIR,
    FUNC_DOC_DIR,
    MAX_QUESTIONS,
    _answers,
    _inside,
    agentic_turn,
)
from evalsi.datasets.formats import check_file, read_rows
from evalsi.errors import BadInputError

CATEGORIES = ("web_search_base", "web_search_no_snippet")  # bfcl_eval's WEB_SEARCH_CATEGORY
GROUP = "web_search"  # bfcl-eval's name for both: their questions, base ones first
CLASS_NAME = "WebSearchAPI"
_QUESTION_ID = re.compile(r"web_search_(\d+)")


class WebSearchQuestions(PosixPath):
    """The web search question file a ``bfcl://DIR/web_search_<variant>`` source names, with that category."""

    category: str = "web_search_base"


def web_search_file(path: Path, category: str) -> WebSearchQuestions | None:
    """The newest ``BFCL_v*_web_search.json`` beside ``path`` for a web search category or ``web_search`` (None for
    another); ``path`` itself when it is such a file (both categories)."""
    exact = re.compile(r"BFCL_v(\d+)_web_search\.json")
    if path.is_file() and exact.fullmatch(path.name):
        named = WebSearchQuestions(path)
        named.category = GROUP
        return named
    if category not in (*CATEGORIES, GROUP):
        return None
    found = sorted(((int(m.group(1)), p) for p in path.parent.glob("BFCL_v*_web_search.json")
                    if (m := exact.fullmatch(p.name))), key=lambda pair: pair[0])
    if not found:
        raise BadInputError(f"{path}: no BFCL web search question file {path.parent}/BFCL_v*_web_search.json")
    questions = WebSearchQuestions(found[-1][1])
    questions.category = category
    return questions


def read_web_search(path: WebSearchQuestions, name: str, tool: Callable[[Mapping[str, Any]], dict[str, Any]]
                    ) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line, row)`` for each web search question of ``path`` (see the module's docstring); ``tool`` makes a
    function's OpenAI-style tool (``bfcl.openai_tool``)."""
    folder = name.rpartition("/")[0] + "/" if "/" in name else ""
    real = path.resolve().parent
    answers = _answers(_inside(path.parent / ANSWERS_DIR / path.name, real, f"{folder}{ANSWERS_DIR}/{path.name}"))
    doc, doc_name = _inside(path.parent / FUNC_DOC_DIR / "web_search.json", real,
                            f"{folder}{FUNC_DOC_DIR}/web_search.json")
    functions = [dict(row) for _line, row in read_rows(doc, "jsonl", name=doc_name) if isinstance(row, Mapping)]
    if not functions or not all(isinstance(f.get("name"), str) for f in functions):
        raise BadInputError(f"{doc_name}: expected function descriptions with a name")
    name = folder + path.name
    check_file(path, name)
    for category in CATEGORIES if path.category == GROUP else (path.category,):
        yield from _rows(path, name, category, answers, [tool(f) for f in functions], functions)


def _rows(path: Path, name: str, category: str, answers: dict[str, list[str]], tools: list[dict[str, Any]],
          functions: list[dict[str, Any]]) -> Iterator[tuple[int, dict[str, Any]]]:
    for line, row in read_rows(path, "jsonl", name=name):
        where = f"{name}:{line}"
        question_id = row.get("id") if isinstance(row, Mapping) else None
        if not isinstance(row, Mapping) or not isinstance(question_id, str) or not _QUESTION_ID.fullmatch(
                question_id):
            raise BadInputError(f"{where}: expected a BFCL web search question with an id web_search_<n>")
        if row.get("involved_classes") != [CLASS_NAME]:
            raise BadInputError(f"{where}: involved_classes: expected [{CLASS_NAME!r}]")
        if question_id not in answers:
            raise BadInputError(f"{where}: id {question_id!r} has no possible answer in {ANSWERS_DIR}/{path.name}")
        if line > MAX_QUESTIONS:
            raise BadInputError(f"{name}: more than {MAX_QUESTIONS} questions")
        messages = agentic_turn(row.get("question"), where)
        yield line, {
            "id": question_id.replace("web_search", category),
            "input": {"messages": messages},
            "reference": json.dumps({"category": category, "ground_truth": answers[question_id]},
                                    ensure_ascii=False),
            "tools": tools,
            "bfcl_category": category,
            "bfcl_web_search": {"show_snippet": "no_snippet" not in category},
            "bfcl_functions": json.dumps(functions, ensure_ascii=False),
        }
