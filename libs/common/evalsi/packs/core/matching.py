"""Matching evaluators: compare an output with its reference (or with given values and patterns)."""

from __future__ import annotations

import math
import re
from typing import Literal

from google.protobuf import struct_pb2
from rapidfuzz import fuzz

from evalsi.errors import BadInputError, SkipRecord
from evalsi.evaluators import Output, Verdict, evaluator
from evalsi.evaluators._evaluator import BatchVerdicts
from evalsi.patterns import Pattern, compile_user_pattern
from evalsi.records import content_text
from evalsi.v1alpha1.record_pb2 import Content, Record
from evalsi.v1alpha1.score_pb2 import Score

_PUNCTUATION = re.compile(r"[^\w\s]|_")
_ARTICLES = re.compile(r"\b(?:a|an|the)\b", re.IGNORECASE)
# A number as people write it: optional sign, thousands commas, decimals, exponent, a trailing percent sign.
# It may not start right after a Latin letter, digit or dot, so "v1.2.3", "GPT4" and "3-4" read sensibly
# (other scripts may: "答案是42" holds 42).
_NUMBER_BODY = r"""
    [-+\u2212]?
    (?: \d{1,3}(?:,\d{3})+(?!\d)(?:\.\d+)?
      | \d+(?:\.\d+)?
      | \.\d+
    )
    (?:[eE][-+]?\d+)?
"""
_NUMBER = re.compile(rf"(?<![\dA-Za-z_.]){_NUMBER_BODY}(?:\s?%)?", re.VERBOSE)
_EXACT_NUMBER = re.compile(rf"\s*({_NUMBER_BODY})\s*%?\s*", re.VERBOSE)
_CLIP = 80


def shorten(text: str, limit: int = _CLIP) -> str:
    """Text cut to ``limit`` characters, with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clip(text: str, limit: int = _CLIP) -> str:
    """A short repr of text for explanations."""
    return repr(shorten(text, limit))


def value_text(value: struct_pb2.Value) -> str:
    """The text of one JSON value (one element of a JSON-list reference)."""
    return content_text(Content(json=value))


text_of = content_text


def reference_list(record: Record) -> list[struct_pb2.Value] | None:
    """The elements of a JSON-list reference ("any of these"), or None when the reference is not a list."""
    reference = record.reference
    if reference.WhichOneof("kind") == "json" and reference.json.WhichOneof("kind") == "list_value":
        values = list(reference.json.list_value.values)
        if not values:
            raise SkipRecord("reference is an empty JSON list")
        return values
    return None


def reference_texts(record: Record) -> tuple[list[str], bool]:
    """The reference texts to compare with, and whether they came from a JSON list."""
    values = reference_list(record)
    if values is None:
        return [text_of(record.reference)], False
    return [value_text(v) for v in values], True


def normalize_text(text: str, normalize: bool, ignore_punctuation: bool, ignore_articles: bool) -> str:
    """SQuAD-style normalization: case-fold, drop punctuation, drop articles, collapse whitespace."""
    if normalize:
        text = text.casefold()
    if ignore_punctuation:
        text = _PUNCTUATION.sub("", text)
    if ignore_articles:
        text = _ARTICLES.sub(" ", text)
    if normalize or ignore_articles:
        text = " ".join(text.split())
    return text


# --- exact-match ---------------------------------------------------------------------------------------------


def _exact_match_batch(
    texts: dict[str, list[str]],
    *,
    normalize: bool = True,
    ignore_punctuation: bool = False,
    ignore_articles: bool = False,
) -> BatchVerdicts:
    """``exact_match`` over the texts' columns where both texts are present (non-empty text contents): True where
    they are equal, or equal once normalized, else the function's failing Score with its explanation; None (the
    function decides) for everything else, so non-text contents keep their own rules."""
    plain = not (ignore_punctuation or ignore_articles)
    decided: BatchVerdicts = []
    for output, expected in zip(texts["output"], texts["reference"], strict=True):
        if output and expected:
            if output == expected:
                decided.append(True)
                continue
            if plain:
                if normalize and " ".join(output.split()).casefold() == " ".join(expected.split()).casefold():
                    decided.append(True)
                    continue
            elif normalize_text(output, normalize, ignore_punctuation, ignore_articles) == normalize_text(
                expected, normalize, ignore_punctuation, ignore_articles
            ):
                decided.append(True)
                continue
            decided.append(Verdict(False, f"output {clip(output)} != reference {clip(expected)}"))
            continue
        decided.append(None)
    return decided


@evaluator(
    "builtin/exact-match",
    version="1.0.0",
    pack="core",
    requires=["output", "reference"],
    cheap=True,  # linear in the texts' length
    batch=_exact_match_batch,
    outputs=[Output("passed", "boolean", description="The output equals the reference (or one of them).")],
    params={
        "normalize": "Strip, case-fold and collapse internal whitespace before comparing.",
        "ignore_punctuation": "Drop punctuation (and symbols) before comparing.",
        "ignore_articles": "Drop the English articles a, an and the before comparing, as SQuAD does.",
    },
)
def exact_match(
    record: Record,
    *,
    normalize: bool = True,
    ignore_punctuation: bool = False,
    ignore_articles: bool = False,
) -> Score | bool:
    """The output text equals the reference text; a JSON-list reference passes when any element matches."""
    # Non-empty ``text`` means a text content: reading it first spares WhichOneof, which costs more than the
    # comparison on the hot path (one text reference, default normalization).
    output = record.output.text or content_text(record.output)
    reference = record.reference
    expected = reference.text
    plain = not (ignore_punctuation or ignore_articles)
    if expected or reference.WhichOneof("kind") == "text":
        if output == expected:  # equal texts are equal under every normalization
            return True
        if plain:
            if normalize and " ".join(output.split()).casefold() == " ".join(expected.split()).casefold():
                return True
        elif normalize_text(output, normalize, ignore_punctuation, ignore_articles) == normalize_text(
            expected, normalize, ignore_punctuation, ignore_articles
        ):
            return True
        return Score(passed=False, explanation=f"output {clip(output)} != reference {clip(expected)}")
    references, is_list = reference_texts(record)
    got = normalize_text(output, normalize, ignore_punctuation, ignore_articles)
    for index, expected in enumerate(references):
        if got == normalize_text(expected, normalize, ignore_punctuation, ignore_articles):
            if is_list:
                return Score(
                    passed=True,
                    explanation=f"matched reference {index + 1} of {len(references)}: {clip(expected)}",
                )
            return True
    if is_list:
        return Score(
            passed=False, explanation=f"output {clip(output)} matched none of {len(references)} references"
        )
    return Score(passed=False, explanation=f"output {clip(output)} != reference {clip(references[0])}")


# --- fuzzy-match ---------------------------------------------------------------------------------------------

_FUZZ = {
    "ratio": fuzz.ratio,
    "partial_ratio": fuzz.partial_ratio,
    "token_sort_ratio": fuzz.token_sort_ratio,
    "token_set_ratio": fuzz.token_set_ratio,
}


@evaluator(
    "builtin/fuzzy-match",
    version="1.0.0",
    pack="core",
    requires=["output", "reference"],
    outputs=[
        Output("similarity", "number", min=0.0, max=1.0, description="rapidfuzz similarity, scaled to [0, 1]."),
        Output("passed", "boolean", description="similarity >= threshold."),
    ],
    params={
        "threshold": "Similarity (0 to 1) at or above which the output passes.",
        "method": "The rapidfuzz scorer: ratio, partial_ratio, token_sort_ratio or token_set_ratio.",
        "normalize": "Strip, case-fold and collapse internal whitespace before comparing.",
    },
)
def fuzzy_match(
    record: Record,
    *,
    threshold: float = 0.8,
    method: Literal["ratio", "partial_ratio", "token_sort_ratio", "token_set_ratio"] = "ratio",
    normalize: bool = True,
) -> dict[str, Score | float]:
    """Fuzzy string similarity between output and reference; a JSON-list reference scores its best match."""
    if not 0.0 <= threshold <= 1.0:
        raise BadInputError(f"evaluator builtin/fuzzy-match: param 'threshold' must be in [0, 1], got {threshold}")
    scorer = _FUZZ.get(method)
    if scorer is None:
        raise BadInputError(
            f"evaluator builtin/fuzzy-match: param 'method' must be one of {', '.join(_FUZZ)}, got {method!r}"
        )
    raw_output = content_text(record.output)
    output = normalize_text(raw_output, normalize, False, False)
    references, is_list = reference_texts(record)
    best, best_index = -1.0, 0
    for index, reference in enumerate(references):
        expected = normalize_text(reference, normalize, False, False)
        similarity = 1.0 if output == expected else scorer(output, expected) / 100.0
        if similarity > best:
            best, best_index = similarity, index
    best = min(max(best, 0.0), 1.0)
    passed = best >= threshold
    which = f" (best of {len(references)}: reference {best_index + 1})" if is_list else ""
    if passed:
        return {"similarity": best, "passed": Score(passed=True, explanation=f"similarity {best:.3f}{which}")}
    return {
        "similarity": best,
        "passed": Score(
            passed=False,
            explanation=f"similarity {best:.3f} < threshold {threshold:g}{which}: output {clip(raw_output)} "
            f"vs reference {clip(references[best_index])}",
        ),
    }


# --- numeric-match -------------------------------------------------------------------------------------------


def _to_float(token: str) -> float:
    token = token.strip().rstrip("%").strip().replace(",", "").replace("\u2212", "-")
    return float(token)


def parse_number(text: str, extract: str) -> float | None:
    """The number in text: the last, the first, or (``exact``) the whole text; None when there is none."""
    if extract == "exact":
        match = _EXACT_NUMBER.fullmatch(text)
        return _to_float(match.group(1)) if match else None
    if extract == "first":
        match = _NUMBER.search(text)
        return _to_float(match.group(0)) if match else None
    last = None
    for last in _NUMBER.finditer(text):  # noqa: B007 - we want the last match
        pass
    return _to_float(last.group(0)) if last else None


def _reference_number(value: struct_pb2.Value | Content) -> float:
    if isinstance(value, Content):
        if value.WhichOneof("kind") == "json":
            return _reference_number(value.json)
        text = content_text(value)
    elif value.WhichOneof("kind") == "number_value":
        return value.number_value
    else:
        text = value_text(value)
    number = parse_number(text, "exact")
    if number is None:
        raise SkipRecord(f"reference {clip(text)} is not a number")
    return number


@evaluator(
    "builtin/numeric-match",
    version="1.0.0",
    pack="core",
    requires=["output", "reference"],
    outputs=[Output("passed", "boolean", description="The number in the output is close to the reference.")],
    params={
        "abs_tol": "Absolute tolerance: |output - reference| <= abs_tol passes.",
        "rel_tol": "Relative tolerance, as a fraction of the larger magnitude (math.isclose).",
        "extract": "Which number to take from the output: the last, the first, or exact (the whole stripped "
        "text must be a number).",
    },
)
def numeric_match(
    record: Record,
    *,
    abs_tol: float = 1e-6,
    rel_tol: float = 0.0,
    extract: Literal["last", "first", "exact"] = "last",
) -> Score:
    """A number in the output equals the reference number within tolerance.

    Understands thousands commas, signs, decimals, scientific notation and percentages (50% reads as 50).
    A JSON-list reference passes when any element matches.
    """
    if abs_tol < 0 or rel_tol < 0:
        raise BadInputError("evaluator builtin/numeric-match: params 'abs_tol' and 'rel_tol' must be >= 0")
    if extract not in ("last", "first", "exact"):
        raise BadInputError(
            f"evaluator builtin/numeric-match: param 'extract' must be one of last, first, exact, got {extract!r}"
        )
    values = reference_list(record)
    references = [_reference_number(record.reference)] if values is None else [_reference_number(v) for v in values]
    output = content_text(record.output)
    got = parse_number(output, extract)
    if got is None:
        what = "is not a number" if extract == "exact" else "has no number"
        return Score(passed=False, explanation=f"output {clip(output)} {what}")
    for expected in references:
        if math.isclose(got, expected, rel_tol=rel_tol, abs_tol=abs_tol):
            return Score(passed=True)
    expected_text = (
        f"reference {references[0]:g}" if len(references) == 1
        else f"any of references {', '.join(f'{r:g}' for r in references)}"
    )
    return Score(
        passed=False,
        explanation=f"output number {got:g} != {expected_text} (abs_tol {abs_tol:g}, rel_tol {rel_tol:g})",
    )


# --- contains ------------------------------------------------------------------------------------------------


@evaluator(
    "builtin/contains",
    version="1.0.0",
    pack="core",
    requires=["output"],
    outputs=[Output("passed", "boolean", description="The output contains the values (any or all of them).")],
    params={
        "values": "Substrings to look for; when unset, the reference's text, or each element of a JSON-list "
        "reference.",
        "mode": "any: pass when one value is found; all: pass when every value is found.",
        "ignore_case": "Compare case-insensitively.",
    },
)
def contains(
    record: Record,
    *,
    values: list[str] | None = None,
    mode: Literal["any", "all"] = "any",
    ignore_case: bool = True,
) -> Score:
    """The output contains any (or all) of the given values, or of the reference's."""
    if mode not in ("any", "all"):
        raise BadInputError(f"evaluator builtin/contains: param 'mode' must be one of any, all, got {mode!r}")
    if values is not None:
        bad = [v for v in values if not isinstance(v, str)]
        if bad:
            raise BadInputError(f"evaluator builtin/contains: param 'values' must be a list of strings, got {bad[0]!r}")
        if not values:
            raise BadInputError("evaluator builtin/contains: param 'values' is an empty list")
        wanted = list(values)
    elif record.reference.WhichOneof("kind") is not None:
        wanted = reference_texts(record)[0]
    else:
        raise SkipRecord("no values to look for: set values or give a reference")
    output = content_text(record.output)
    if ignore_case:
        haystack = output.casefold()
        found = [v for v in wanted if v.casefold() in haystack]
    else:
        found = [v for v in wanted if v in output]
    if mode == "any":
        if found:
            return Score(passed=True, explanation=f"found {clip(found[0])}")
        return Score(passed=False, explanation=f"none found of: {', '.join(clip(v, 40) for v in wanted[:10])}")
    missing = [v for v in wanted if v not in found]
    if not missing:
        return Score(passed=True)
    more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
    return Score(
        passed=False,
        explanation=f"missing {len(missing)} of {len(wanted)}: {', '.join(clip(v, 40) for v in missing[:10])}{more}",
    )


# --- regex-match ---------------------------------------------------------------------------------------------


def compile_pattern(pattern: str, ignore_case: bool) -> Pattern:
    """RE2, not ``re``: the pattern comes from the caller, and RE2 matches in linear time (evalsi.patterns)."""
    return compile_user_pattern(pattern, "evaluator builtin/regex-match: param 'pattern'", ignore_case=ignore_case)


def _check_regex(*, pattern: str, mode: str, ignore_case: bool, negate: bool) -> None:
    """At bind time, so a bad pattern is a 400 before any record is evaluated."""
    compile_pattern(pattern, ignore_case)
    if mode not in ("search", "fullmatch"):
        raise BadInputError(
            f"evaluator builtin/regex-match: param 'mode' must be one of search, fullmatch, got {mode!r}"
        )


@evaluator(
    "builtin/regex-match",
    version="1.0.0",
    pack="core",
    requires=["output"],
    outputs=[Output("passed", "boolean", description="The output matches the pattern.")],
    check=_check_regex,
    cheap=True,  # RE2: linear in the output's length
    params={
        "pattern": "The regular expression (RE2 syntax: linear-time; no backreferences or lookaround).",
        "mode": "search: the pattern may match anywhere; fullmatch: it must match the whole output.",
        "ignore_case": "Match case-insensitively.",
        "negate": "Pass when the output does NOT match (e.g. no SSN anywhere), which RE2 cannot say with lookahead.",
    },
)
def regex_match(
    record: Record,
    *,
    pattern: str,
    mode: Literal["search", "fullmatch"] = "search",
    ignore_case: bool = False,
    negate: bool = False,
) -> Score | bool:
    """The output matches a regular expression (anywhere, or as a whole), or with ``negate`` does not."""
    compiled = compile_pattern(pattern, ignore_case)
    output = content_text(record.output)
    if mode == "search":
        matched = compiled.search(output) is not None
    elif mode == "fullmatch":
        matched = compiled.fullmatch(output) is not None
    else:
        raise BadInputError(
            f"evaluator builtin/regex-match: param 'mode' must be one of search, fullmatch, got {mode!r}"
        )
    if matched != negate:
        return True
    if negate:
        verb = "matches" if mode == "search" else "fully matches"
    else:
        verb = "does not match" if mode == "search" else "does not fully match"
    return Score(passed=False, explanation=f"output {clip(output)} {verb} /{pattern}/")


EVALUATORS = (exact_match, fuzzy_match, numeric_match, contains, regex_match)
