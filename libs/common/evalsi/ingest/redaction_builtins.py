"""The built-in redaction rules (``email``, ``credit_card``, ``cpf``): their patterns, validity checks and what
lets ``redaction`` screen texts for them cheaply."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


def _luhn(text: str) -> bool:
    digits = [int(c) for c in text if c.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, digit in enumerate(reversed(digits)):
        if i % 2:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


def _cpf_valid(text: str) -> bool:
    digits = [int(c) for c in text if c.isdigit()]
    if len(digits) != 11 or len(set(digits)) == 1:
        return False
    for n in (9, 10):
        check = sum(d * w for d, w in zip(digits[:n], range(n + 1, 1, -1), strict=True)) * 10 % 11 % 10
        if check != digits[n]:
            return False
    return True


@dataclass(frozen=True)
class Builtin:
    pattern: str
    check: Callable[[str], bool] | None = None
    description: str = ""
    # ``pattern`` without its lookarounds: it matches wherever ``pattern`` does, in any text around it.
    screen: str = ""
    # Texts every match contains one of (a character, or its JSON escape).
    literals: tuple[str, ...] = ()
    # Every match lies inside one JSON string token: the pattern matches no quote, backslash, whitespace or JSON
    # punctuation, and a match needs a character no JSON number or literal has. Then, in a JSON text without
    # escapes, substituting the raw text changes exactly the strings (and keys) value-by-value redaction would.
    json_inert: bool = False
    # ``screen`` uses explicit ASCII classes only (no ``\d``, ``\w``, ``.``), so on UTF-8 bytes it matches where it
    # matches the text: a serialized message can be screened without decoding it.
    ascii_screen: bool = False
    # ``pattern`` is one or more of these characters followed by ``screen``, which starts with a literal: a match
    # is found by searching for the screen (fast: the engine skips to the literal) and extending it left, not by
    # trying the pattern at every position (which costs tens of microseconds on a few kilobytes of text).
    prefix_chars: str = ""


BUILTINS: dict[str, Builtin] = {
    "email": Builtin(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}", None, "e-mail addresses",
                     # From the "@": a search for a literal is fast, and long words cost no backtracking.
                     screen=r"@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}",
                     literals=("@", "\\u0040"), json_inert=True, ascii_screen=True,
                     prefix_chars="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%+-"),
    "credit_card": Builtin(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)", _luhn,
                           "payment card numbers (13 to 19 digits, spaces or dashes allowed, Luhn-checked)",
                           screen=r"(?:\d[ -]?){12,18}\d"),
    "cpf": Builtin(r"(?<!\d)\d{3}\.?\d{3}\.?\d{3}-?\d{2}(?!\d)", _cpf_valid,
                   "Brazilian CPF numbers (formatted or not, check digits verified)",
                   screen=r"\d{3}\.?\d{3}\.?\d{3}-?\d{2}"),
}
