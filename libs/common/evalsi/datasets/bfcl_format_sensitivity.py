"""BFCL's format_sensitivity category: ``bfcl://DIR/format_sensitivity``.

bfcl-eval 2026.3.23 (``load_format_sensitivity_test_cases``) reads ``BFCL_v4_format_sensitivity.json``, an object
``{category: [question ids]}`` naming questions of the single-turn AST categories, takes each category's listed
questions in its own file's order (categories in the id file's order, an empty list skipped), and asks each under
every prompt configuration of ``get_all_format_sensitivity_configs()`` (``bfcl_formats.CONFIGS``, 26): one row
per question and configuration, id ``format_sensitivity_<n>:<configuration>:<question id>`` (``n`` counting from 0
over all of them), ``input`` the question as that configuration prompts it (each function's description hinted
twice, as bfcl-eval does), the question's own reference (its category, functions and possible answers: graded as
that category is), and metadata ``bfcl_prompt_config`` (the
configuration, which ``builtin/bfcl-ast`` decodes the answer's return format by), ``bfcl_question_id``,
``bfcl_category`` (the question's category). The category does not score a model: bfcl-eval reports each
configuration's accuracy and their spread (:func:`config_summary`). bfcl-eval asks it of prompting models only.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path, PosixPath
from typing import Any

from evalsi.datasets import bfcl_formats
from evalsi.datasets.bfcl_prompt import hinted, listed_functions, system_prompt
from evalsi.datasets.formats import check_file
from evalsi.errors import BadInputError

CATEGORY = "format_sensitivity"
CONFIG_KEY = "bfcl_prompt_config"
MAX_ID_FILE = 1_000_000  # bytes: bfcl-eval's lists 200 ids
_FILE = re.compile(r"BFCL_v(\d+)_format_sensitivity\.json")
Rows = Iterator[tuple[int, dict[str, Any]]]


class FormatSensitivityQuestions(PosixPath):
    """The id file a ``bfcl://DIR/format_sensitivity`` source names (read as that category, not as questions)."""


def sensitivity_file(path: Path) -> FormatSensitivityQuestions | None:
    """The newest ``BFCL_v*_format_sensitivity.json`` beside ``path`` when it names that category, or ``path``
    itself when it is such a file; None for any other source."""
    if _FILE.fullmatch(path.name) and path.is_file():
        return FormatSensitivityQuestions(path)
    if path.name != CATEGORY:
        return None
    found = sorted(((int(m.group(1)), p) for p in path.parent.glob("BFCL_v*_format_sensitivity.json")
                    if (m := _FILE.fullmatch(p.name))), key=lambda pair: pair[0])
    if not found:
        raise BadInputError(f"{path}: no BFCL format_sensitivity id file {path.parent}/BFCL_v*_format_sensitivity"
                            ".json")
    return FormatSensitivityQuestions(found[-1][1])


def read_format_sensitivity(path: FormatSensitivityQuestions, name: str, categories: tuple[str, ...],
                            category_rows: Callable[[str, str], Rows]) -> Rows:
    """``(line, row)`` for each listed question under each configuration (see the module's docstring).
    ``categories`` those the id file may name; ``category_rows(category, name)`` the rows ``bfcl://DIR/<category>``
    reads (``name`` for its errors), each prompted with the default configuration."""
    folder = name.rpartition("/")[0] + "/" if "/" in name else ""
    where = folder + path.name
    listed = _listed(path, where, categories)
    index = 0
    for category, ids in listed.items():
        wanted, seen = set(ids), set()
        for line, row in category_rows(category, folder + category):
            if row["id"] not in wanted:
                continue
            seen.add(row["id"])
            for config in bfcl_formats.CONFIGS:
                yield line, reprompted(row, config, f"format_sensitivity_{index}:{config}:{row['id']}")
                index += 1
        if missing := sorted(wanted - seen):
            raise BadInputError(f"{where}: {category}: {len(missing)} listed id(s) not in {folder}{category}'s "
                                f"questions, e.g. {missing[0]!r}")


def _listed(path: Path, where: str, categories: tuple[str, ...]) -> dict[str, list[str]]:
    check_file(path, where)
    if path.stat().st_size > MAX_ID_FILE:
        raise BadInputError(f"{where}: over {MAX_ID_FILE} bytes; a format_sensitivity id file lists question ids")
    try:
        listed = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadInputError(f"{where}: not JSON: {exc}") from None
    if not isinstance(listed, dict) or not all(
            isinstance(ids, list) and all(isinstance(i, str) for i in ids) for ids in listed.values()):
        raise BadInputError(f"{where}: expected an object {{category: [question ids]}}")
    for category in listed:
        if category.removeprefix("live_") not in categories:
            raise BadInputError(f"{where}: category {category!r}: format_sensitivity asks single-turn AST "
                                f"questions; accepted: {', '.join(categories)} (live_ ones too)")
    return {category: ids for category, ids in listed.items() if ids}  # an empty list skipped, as bfcl-eval does


def reprompted(row: Mapping[str, Any], config: str, row_id: str) -> dict[str, Any]:
    """A question's row (prompted with the default configuration) asked under ``config`` as ``row_id``: the
    default prompt that leads its first message replaced by ``config``'s, the question's own system text kept."""
    messages = [dict(message) for message in row["input"]["messages"]]
    # the functions as the default prompt lists them (hinted, their keys in order; the reference's are sorted)
    functions = listed_functions(messages[0]["content"])
    default = system_prompt(functions)
    if not messages[0]["content"].startswith(default):  # the importer wrote it: a bug if not
        raise AssertionError(f"{row['id']}: the first message does not start with BFCL's default prompt")
    # bfcl-eval hints the listed questions' functions twice (once loading their category, once loading this one:
    # " Note that the provided function is in Python 3 syntax." ends each description two times); so does this
    messages[0]["content"] = system_prompt(hinted(functions), config) + messages[0]["content"][len(default):]
    return {**row, "id": row_id, "input": {"messages": messages}, CONFIG_KEY: config,
            "bfcl_question_id": row["id"]}


def config_summary(results: Iterable[tuple[str, bool]]) -> dict[str, Any]:
    """bfcl-eval's format_sensitivity summary of ``(configuration, passed)`` pairs (a record's metadata
    ``bfcl_prompt_config`` and its score): each configuration's accuracy, correct and total counts, and across
    configurations the accuracy's variance, standard deviation and largest difference (in points, rounded to 2
    places as bfcl-eval rounds them; 0 for one configuration)."""
    counts: dict[str, list[int]] = {}
    for config, passed in results:
        tally = counts.setdefault(config, [0, 0])
        tally[0] += bool(passed)
        tally[1] += 1
    by_config = {config: {"accuracy": correct / total, "correct_count": correct, "total_count": total}
                 for config, (correct, total) in counts.items()}
    accuracies = [entry["accuracy"] for entry in by_config.values()]
    spread = len(accuracies) > 1
    return {
        "by_config": by_config,
        "accuracy_variance": round(statistics.variance(accuracies) * 100**2, 2) if spread else 0.0,
        "accuracy_std": round(statistics.stdev(accuracies) * 100, 2) if spread else 0.0,
        "accuracy_max_delta": round((max(accuracies) - min(accuracies)) * 100, 2) if spread else 0.0,
    }
