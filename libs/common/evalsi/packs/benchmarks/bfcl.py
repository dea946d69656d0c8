"""``builtin/bfcl-ast``: BFCL's AST checker over a record imported from ``bfcl://`` (``evalsi.datasets.bfcl``).

The record's reference carries the question's function descriptions, its possible answers and its category (the
JSON the importer writes); its output (or trajectory) carries the model's calls, decoded as BFCL does (a
format_sensitivity record's in the return format its metadata's ``bfcl_prompt_config`` asked for).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from evalsi.errors import SkipRecord
from evalsi.evaluators import evaluator
from evalsi.packs.benchmarks.bfcl_ast import check_calls
from evalsi.packs.benchmarks.bfcl_calls import DecodeError, record_calls
from evalsi.packs.benchmarks.bfcl_relevance import check_relevance, is_relevance_category
from evalsi.packs.benchmarks.bfcl_return_formats import configured_calls
from evalsi.records import content_value
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

REFERENCE_KEYS = ("category", "function", "ground_truth")


@lru_cache(maxsize=1024)
def _parsed(text: str) -> Any:
    """A reference's JSON text decoded once: a dataset's records of one question share it (read-only here)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def bfcl_reference(record: Record) -> Mapping[str, Any]:
    """The record's BFCL reference ``{"category", "function", "ground_truth"}``, from JSON text (as the importer
    writes it, so floats stay floats) or JSON content."""
    value = content_value(record.reference)
    if isinstance(value, str):
        value = _parsed(value)
    if not isinstance(value, Mapping) or not set(REFERENCE_KEYS) <= set(value):
        raise SkipRecord("the reference is not a BFCL reference: expected a JSON object with "
                         f"{', '.join(REFERENCE_KEYS)} (records read from bfcl:// carry one)")
    return value


@evaluator(
    "builtin/bfcl-ast",
    version="1.2.0",  # 1.1: relevance categories, text decoded strictly as BFCL does; 1.1.1: unhashable keys;
    # 1.2: a format_sensitivity record's answer decoded in the return format of its prompt configuration
    pack="benchmarks",
    requires=["reference"],
    cheap=True,  # pure, bounded by the output's MAX_TEXT and the reference's size: no thread hop
    description="BFCL's AST checker (simple, multiple, parallel, parallel_multiple and their live_ versions; "
    "Python): the function name, required and optional parameters, types (an int for a float allowed), any of the "
    "possible values, string standardization, and order-insensitive parallel calls; and BFCL's relevance detection "
    "(irrelevance, live_irrelevance: no call made; live_relevance: at least one). The explanation gives BFCL's "
    "error type.",
    params={"dots_as_underscores": "The model called functions with '.' in their names written '_' (as "
            "function-calling APIs that refuse dots require); BFCL does this for those models."},
)
def bfcl_ast(record: Record, *, dots_as_underscores: bool = False) -> Score:
    """Pass when the model's calls satisfy BFCL's AST checker against the possible answers, or, for a relevance
    category, when the model called no function (irrelevance) or some function (relevance), as BFCL decides."""
    reference = bfcl_reference(record)
    category = str(reference["category"])
    if is_relevance_category(category):
        verdict = check_relevance(lambda: record_calls(record), category)
        return Score(passed=True) if verdict.valid else Score(
            passed=False, explanation=f"{verdict.error_type}: {verdict.error}"[:2000])
    try:
        configured = configured_calls(record)  # format_sensitivity: in the format its configuration asked for
        calls = record_calls(record) if configured is None else configured
    except DecodeError as exc:
        return Score(passed=False, explanation=f"ast_decoder:decoder_failed: {exc}")
    try:
        verdict = check_calls(reference["function"], calls, reference["ground_truth"], category,
                              dots_as_underscores=dots_as_underscores)
    except ValueError as exc:
        raise SkipRecord(str(exc)) from None
    if verdict.valid:
        return Score(passed=True)
    return Score(passed=False, explanation=f"{verdict.error_type}: {verdict.error}"[:2000])


EVALUATORS = (bfcl_ast,)
