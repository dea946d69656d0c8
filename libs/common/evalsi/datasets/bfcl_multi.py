"""BFCL's multi-turn questions (``multi_turn_base``, ``miss_func``, ``miss_param``, ``long_context``): the parts of
a row that ``evalsi.datasets.bfcl`` builds from one.

A multi-turn question holds ``question`` (a list of turns, each a list of ``{"role", "content"}`` messages),
``initial_config`` (each involved class's starting state), ``involved_classes``, and for ``miss_func``
``missed_function`` (``{"<turn>": [function names]}``: held back until that turn, whose messages are empty). Its
functions are its own ``function`` list when it has one, else, as BFCL's
``populate_test_cases_with_predefined_functions`` finds them, every involved class's file in
``multi_turn_func_doc/`` beside the question file. Its possible answer is
a list of turns, each a list of call strings (``"cd(folder='x')"``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalsi.datasets.formats import check_file, read_rows
from evalsi.errors import BadInputError

CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
FUNC_DOC_DIR = "multi_turn_func_doc"
# BFCL's MULTI_TURN_FUNC_DOC_FILE_MAPPING (the multi-turn classes)
FUNC_DOC_FILES = {
    "GorillaFileSystem": "gorilla_file_system.json", "MathAPI": "math_api.json", "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json", "TicketAPI": "ticket_api.json", "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json", "VehicleControlAPI": "vehicle_control.json",
}
# BFCL's user message for a turn that adds held-back functions, in its prompting mode (the functions as Python's
# text of their list, as BFCL formats them)
ADDED_FUNCTIONS_PROMPT = "{functions}\nI have updated some more functions you can choose from. What about now?"
MAX_TURNS = 100  # BFCL's questions have at most 8
MAX_DOCS = 1_000  # function descriptions read from one class's file


def is_multi_turn(category: str) -> bool:
    return category in CATEGORIES


def valid_ground_truth(truth: Any) -> bool:
    """A multi-turn possible answer: a list of turns, each a list of call strings."""
    return isinstance(truth, list) and all(
        isinstance(turn, list) and all(isinstance(call, str) for call in turn) for turn in truth)


@dataclass(frozen=True)
class MultiTurn:
    """A question's parts: the functions offered from the start, every turn's messages (a held-back functions'
    turn given BFCL's message), the held-back functions by turn, and the grader's reference (JSON text)."""

    functions: list[dict[str, Any]]
    turns: list[list[dict[str, str]]]
    missed: dict[str, list[dict[str, Any]]]
    reference: str


class FunctionDocs:
    """The classes' function descriptions from ``multi_turn_func_doc/`` beside a question file, read once each."""

    def __init__(self, question_path: Path, name: str) -> None:
        self._dir = question_path.parent / FUNC_DOC_DIR
        self._real = question_path.resolve().parent
        self._name = (name.rpartition("/")[0] + "/" if "/" in name else "") + FUNC_DOC_DIR
        self._docs: dict[str, list[dict[str, Any]]] = {}

    def of(self, class_name: str, where: str) -> list[dict[str, Any]]:
        if class_name not in FUNC_DOC_FILES:
            raise BadInputError(f"{where}: involved_classes: {class_name!r} is not one of BFCL's multi-turn classes; "
                                f"accepted: {', '.join(FUNC_DOC_FILES)}")
        if class_name not in self._docs:
            path, name = self._dir / FUNC_DOC_FILES[class_name], f"{self._name}/{FUNC_DOC_FILES[class_name]}"
            if not path.resolve().is_relative_to(self._real):
                raise BadInputError(f"{name}: leads outside the question file's directory")
            check_file(path, f"{name} (the functions of {class_name}, for {where})")
            docs: list[dict[str, Any]] = []
            for line, row in read_rows(path, "jsonl", name=name):
                if not isinstance(row, Mapping) or not isinstance(row.get("name"), str):
                    raise BadInputError(f"{name}:{line}: expected a function description with a name")
                if len(docs) >= MAX_DOCS:
                    raise BadInputError(f"{name}: more than {MAX_DOCS} functions")
                docs.append(dict(row))
            self._docs[class_name] = docs
        return [dict(doc) for doc in self._docs[class_name]]


def multi_turn(row: Mapping[str, Any], truth: Any, docs: FunctionDocs, category: str, where: str) -> MultiTurn:
    """One multi-turn question's parts (see :class:`MultiTurn`), checked."""
    classes = row.get("involved_classes")
    if not isinstance(classes, list) or not classes or not all(isinstance(c, str) for c in classes):
        raise BadInputError(f"{where}: involved_classes: expected a non-empty list of class names")
    config = row.get("initial_config", {})
    if not isinstance(config, Mapping):
        raise BadInputError(f"{where}: initial_config: expected an object of each class's state")
    own = row.get("function")
    if own is not None and not (isinstance(own, list) and all(
            isinstance(f, Mapping) and isinstance(f.get("name"), str) for f in own)):
        raise BadInputError(f"{where}: function: expected a list of function descriptions with a name")
    functions = [dict(f) for f in own] if own is not None else [doc for c in classes for doc in docs.of(c, where)]
    question = row.get("question")
    if not isinstance(question, list) or not question or len(question) > MAX_TURNS:
        raise BadInputError(f"{where}: question: expected a list of 1 to {MAX_TURNS} turns (each a list of messages)")
    missed = _missed(row.get("missed_function", {}), functions, len(question), where)
    if not valid_ground_truth(truth) or len(truth) != len(question):
        raise BadInputError(f"{where}: its possible answer: expected a list of {len(question)} turns (one per "
                            "question turn), each a list of call strings")
    turns = [_turn(turn, missed.get(str(index)), f"{where}: question[{index}]")
             for index, turn in enumerate(question)]
    reference = json.dumps({"category": category, "ground_truth": truth, "initial_config": config,
                            "involved_classes": classes}, ensure_ascii=False, sort_keys=True)
    return MultiTurn(functions, turns, missed, reference)


def _missed(value: Any, functions: list[dict[str, Any]], turns: int, where: str) -> dict[str, list[dict[str, Any]]]:
    """The held-back functions by turn, taken out of ``functions`` (as BFCL does)."""
    if not isinstance(value, Mapping):
        raise BadInputError(f"{where}: missed_function: expected {{\"<turn>\": [function names]}}")
    missed: dict[str, list[dict[str, Any]]] = {}
    for turn, names in value.items():
        if not (isinstance(turn, str) and turn.isdigit() and int(turn) < turns) or not isinstance(names, list):
            raise BadInputError(f"{where}: missed_function: {turn!r}: expected a turn index below {turns} and a "
                                "list of function names")
        for held in names:
            index = next((i for i, f in enumerate(functions) if f["name"] == held), None)
            if index is None:
                raise BadInputError(f"{where}: missed_function[{turn!r}]: {held!r} is not one of the functions")
            missed.setdefault(turn, []).append(functions.pop(index))
    return missed


def _turn(turn: Any, added: list[dict[str, Any]] | None, where: str) -> list[dict[str, str]]:
    if not isinstance(turn, list) or not all(
            isinstance(m, Mapping) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in turn):
        raise BadInputError(f"{where}: expected a list of {{\"role\", \"content\"}} messages")
    if added is not None:
        if turn:
            raise BadInputError(f"{where}: a turn that adds held-back functions has no messages in BFCL's format")
        return [{"role": "user", "content": ADDED_FUNCTIONS_PROMPT.format(functions=added)}]
    if not turn:
        raise BadInputError(f"{where}: no messages (only a turn that adds held-back functions has none)")
    return [{"role": m["role"], "content": m["content"]} for m in turn]
