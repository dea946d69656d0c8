"""BFCL's relevance detection, as a pure function: ``irrelevance`` and ``live_irrelevance`` pass when the model made
no function call, ``live_relevance`` (and v1's ``relevance``) when it made at least one.

"No call", as BFCL's ``_evaluate_single_relevance_entry`` decides it: the output did not decode (text that is not
BFCL's call format, a call with a value its decoder refuses), or it decoded to something that is not a list of
``{function_name: {arguments}}`` (tool-call arguments that are not an object), or to an empty list. A call with no
arguments (``[f()]``) is a call. The calls' names and arguments are not checked against the functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from evalsi.packs.benchmarks.bfcl_ast import Verdict
from evalsi.packs.benchmarks.bfcl_calls import Calls, DecodeError

CATEGORIES = ("irrelevance", "live_irrelevance", "live_relevance", "relevance")


def is_relevance_category(category: str) -> bool:
    """Whether BFCL grades the category by relevance detection (its ``is_relevance_or_irrelevance``)."""
    return category in CATEGORIES


def contains_call(calls: Any) -> bool:
    """BFCL's ``not is_empty_output``: a non-empty list of ``{name: {arguments}}`` items."""
    return isinstance(calls, list) and bool(calls) and all(
        isinstance(item, Mapping) and len(item) == 1 and isinstance(next(iter(item.values())), Mapping)
        for item in calls)


def check_relevance(decode: Callable[[], Calls], category: str) -> Verdict:
    """The verdict for a relevance category: ``decode`` reads the model's calls (raising :class:`DecodeError` when
    the output holds none BFCL could read)."""
    if not is_relevance_category(category):
        raise ValueError(f"BFCL category {category!r}: relevance detection grades {', '.join(CATEGORIES)}")
    try:
        called = contains_call(decode())
        decode_error = ""
    except DecodeError as exc:
        called, decode_error = False, str(exc)
    if "irrelevance" in category:
        if called:
            return Verdict(False, "irrelevance_error:decoder_success",
                           "Valid syntax. Successfully decode AST when it should not.")
        return Verdict(True)
    if not called:
        return Verdict(False, "relevance_error:decoder_failed",
                       f"Invalid syntax. Failed to decode AST when it should have. {decode_error}".strip())
    return Verdict(True)
