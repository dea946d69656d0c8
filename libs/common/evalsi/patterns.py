"""User-supplied regular expressions, compiled for RE2: matching takes time linear in the text, always.

Python's ``re`` backtracks, so a pattern like ``(a+)+$`` on 30 characters runs for minutes while holding
the GIL (nothing else in the process runs). Every pattern a request, spec, case or policy supplies goes
through :func:`compile_user_pattern` instead. RE2 has no backreferences, lookaround, atomic groups or
possessive quantifiers (they are what makes backtracking necessary); such a pattern is refused at bind time
with the reason. ``\\w``, ``\\d``, ``\\s`` and ``\\b`` are ASCII in RE2; ``\\pL``, ``\\p{Greek}`` and
``[[:alpha:]]`` name Unicode classes.
"""

from __future__ import annotations

import functools
from typing import Any, Protocol

import re2

from evalsi.errors import BadInputError
from evalsi.limits import MAX_PATTERN_CHARS

__all__ = ["Pattern", "PatternError", "compile_user_pattern"]


class Pattern(Protocol):
    """What callers use of a compiled pattern (RE2's ``_Regexp`` has the ``re.Pattern`` methods)."""

    pattern: str

    def search(self, text: str) -> Any: ...

    def fullmatch(self, text: str) -> Any: ...


def _why(message: str, pattern: str) -> str:
    """RE2's complaint, with the reason when it is a backtracking-only feature."""
    if message.startswith(("invalid perl operator: (?<=", "invalid perl operator: (?<!")):
        return f"lookbehind is not supported by the linear-time engine (RE2) ({message})"
    if message.startswith(("invalid perl operator: (?=", "invalid perl operator: (?!")):
        return f"lookahead is not supported by the linear-time engine (RE2) ({message})"
    if message.startswith("invalid perl operator: (?>") or message.startswith("bad repetition operator: *+"):
        return f"atomic groups and possessive quantifiers are not supported by RE2 ({message})"
    if (message == "invalid perl operator: (?P" and "(?P=" in pattern) or (
        message.startswith("invalid escape sequence: \\") and message[-1:].isdigit()
    ):
        return f"backreferences are not supported by the linear-time engine (RE2) ({message})"
    if message == "invalid escape sequence: \\Z":
        return "\\Z is written \\z in RE2 (end of text)"
    return message


@functools.lru_cache(maxsize=512)
def _compile(pattern: str, ignore_case: bool) -> Pattern:
    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern on stderr
    options.case_sensitive = not ignore_case
    return re2.compile(pattern, options)


class PatternError(BadInputError):
    """A refused pattern; ``problem`` says why, for callers that word the message their own way."""

    def __init__(self, where: str, pattern: str, problem: str) -> None:
        super().__init__(f"{where}: {pattern!r} is not a valid regular expression: {problem}")
        self.problem = problem


def compile_user_pattern(pattern: str, where: str, *, ignore_case: bool = False) -> Pattern:
    """``pattern`` compiled for RE2, or a ``PatternError`` starting with ``where`` that says why not."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(where, pattern[:40] + "...", f"{len(pattern)} characters exceed the limit of "
                           f"{MAX_PATTERN_CHARS}")
    try:
        return _compile(pattern, ignore_case)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        text = detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
        raise PatternError(where, pattern, _why(text, pattern)) from None
