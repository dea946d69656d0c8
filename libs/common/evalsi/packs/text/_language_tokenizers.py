"""sacrebleu's two language tokenizers beside 13a: ``zh`` (Chinese characters apart, then 13a's rules) and
``intl`` (mteval-v14's international tokenization, on Unicode punctuation and symbols), each equal to
sacrebleu's on every string (tests/packs/test_text_bleu_languages.py).

``zh`` takes sacrebleu's character ranges as written, including two whose bounds are two characters long
(``'\\u20000'`` is U+2000 then "0"): compared as strings, those ranges hold U+2001 to U+2A6D and U+2F81 to
U+2FA1, so general punctuation, arrows and mathematical operators are split out too. ``intl`` needs the
``regex`` package for the Unicode categories (``\\p{P}``, ``\\p{S}``, ``\\p{N}``) at sacrebleu's Unicode
version; it comes with nltk in the text extra.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from evalsi.errors import BadInputError

INTL_INSTALL_HINT = "pip install 'evalsi[text]' (it brings the regex package, whose Unicode categories this uses)"

# sacrebleu's tokenizer_zh._UCODE_RANGES, as written there.
_ZH_RANGES = (
    ("\u3400", "\u4db5"), ("\u4e00", "\u9fa5"), ("\u9fa6", "\u9fbb"), ("\uf900", "\ufa2d"), ("\ufa30", "\ufa6a"),
    ("\ufa70", "\ufad9"), ("\u20000", "\u2a6d6"), ("\u2f800", "\u2fa1d"), ("\uff00", "\uffef"),
    ("\u2e80", "\u2eff"), ("\u3000", "\u303f"), ("\u31c0", "\u31ef"), ("\u2f00", "\u2fdf"), ("\u2ff0", "\u2fff"),
    ("\u3100", "\u312f"), ("\u31a0", "\u31bf"), ("\ufe10", "\ufe1f"), ("\ufe30", "\ufe4f"), ("\u2600", "\u26ff"),
    ("\u2700", "\u27bf"), ("\u3200", "\u32ff"), ("\u3300", "\u33ff"),
)


def _one_character_range(start: str, end: str) -> tuple[str, str]:
    """The characters c with ``start <= c <= end`` as strings: for a bound of two characters, c >= "xy" holds
    from the character after x on, and c <= "xy" up to x itself."""
    low = start if len(start) == 1 else chr(ord(start[0]) + 1)
    return low, end[0]


_ZH_CHARACTER = re.compile("([" + "".join(f"{re.escape(low)}-{re.escape(high)}" for low, high in (
    _one_character_range(start, end) for start, end in _ZH_RANGES)) + "])")


def zh_spaced(line: str, regexp_spaced: Callable[[str], str]) -> str:
    """sacrebleu's TokenizerZh before its final split: the line stripped, each Chinese character between spaces,
    then the 13a rules (``regexp_spaced``, sacrebleu's TokenizerRegexp) on that."""
    return regexp_spaced(_ZH_CHARACTER.sub(r" \1 ", line.strip()))


@lru_cache(maxsize=1)
def _intl_rules() -> tuple[tuple[Any, str], ...]:
    try:
        import regex  # heavy optional dependency (the text extra, through nltk)
    except ImportError as exc:
        raise BadInputError(f"tokenize 'intl' needs the regex package, which is not installed: "
                            f"{INTL_INSTALL_HINT}") from exc
    return ((regex.compile(r"(\P{N})(\p{P})"), r"\1 \2 "), (regex.compile(r"(\p{P})(\P{N})"), r" \1 \2"),
            (regex.compile(r"(\p{S})"), r" \1 "))


def intl_spaced(line: str) -> str:
    """sacrebleu's TokenizerV14International before its final split."""
    for pattern, replacement in _intl_rules():
        line = pattern.sub(replacement, line)
    return line


def check_intl() -> None:
    """At bind time: ``intl`` needs the regex package (raises BadInputError naming the install)."""
    _intl_rules()
