"""Finding personal data and secrets in text: RE2 patterns (linear time, never backtracking) plus checksums.

Each kind is one named group of a single RE2 alternation, so a text is scanned once whatever the kinds; a
candidate a checksum or range rules out (a 16-digit number failing Luhn, an IBAN failing mod-97, an octet over
255) is not a finding. A finding carries its kind and span, never shown to users as such: explanations name
kinds and counts, and ``redact`` masks the matched text where a caller must show context.
"""

from __future__ import annotations

import bisect
import functools
import ipaddress
import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import re2

from evalsi.errors import BadInputError
from evalsi.evaluators._evaluator import BatchVerdicts

# Kind -> RE2 pattern. Digits and word boundaries are ASCII in RE2, which is what these formats use.
PII_PATTERNS: Mapping[str, str] = {
    # Letters of any script in the local part and domain (internationalized addresses: élodie@exemple.fr).
    "email": r"[\pL\pN._%+-]+@[\pL\pN-]+(?:\.[\pL\pN-]+)*\.\pL{2,24}",
    # A card number: 13-19 digits, optionally grouped by single spaces or dashes (checked with Luhn).
    "credit_card": r"\b\d(?:[ -]?\d){12,18}\b",
    # An IBAN: country code, two check digits, 11-30 letters/digits, optionally grouped by spaces (mod-97).
    "iban": r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b",
    "us_ssn": r"\b\d{3}-\d{2}-\d{4}\b",
    "ipv4": r"\b\d{1,3}(?:\.\d{1,3}){3}\b",
    # Hex groups and colons; validated by ``ipaddress`` (times like 12:30:45 are not addresses).
    "ipv6": r"[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?:\d{1,3}(?:\.\d{1,3}){3})?",
    # E.164 (+ and 8-15 digits, spaces, dots or dashes between groups) and national forms: (555) 123-4567,
    # 555-123-4567, 020 7946 0958 (a trunk 0 first), 06 12 34 56 78. Checked for 7-15 digits in all. Grouped numbers
    # without a trunk 0 or the 3-3-4 shape (100 000 000, 12.345.678) are amounts, not phones.
    "phone": (r"\+[1-9](?:[ .-]?\(?\d{1,4}\)?){2,6}"
              r"|\(\d{2,5}\)[ .-]?\d{3,4}[ .-]?\d{3,4}"
              r"|\b\d{3}[.-]\d{3}[.-]\d{4}\b"
              r"|\b0\d{1,4}[ -]\d{3,4}[ -]\d{3,4}\b"
              r"|\b0\d(?:[ .]\d{2}){4}\b"),
}

SECRET_PATTERNS: Mapping[str, str] = {
    "aws_access_key": r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b",
    "aws_secret_key": r"(?i:aws_?secret_?access_?key)[\"']?\s*[:=]\s*[\"']?[A-Za-z0-9/+=]{40}",
    "github_token": r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}\b|\bgithub_pat_[A-Za-z0-9_]{22,255}\b",
    "openai_key": r"\bsk-(?:proj-|svcacct-|admin-|ant-(?:api\d\d-)?)?[A-Za-z0-9_-]{20,}",
    "slack_token": r"\bxox[abposr]-[A-Za-z0-9-]{10,}|https://hooks\.slack\.com/services/[A-Za-z0-9/]{20,}",
    "stripe_key": r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}",
    "google_api_key": r"\bAIza[0-9A-Za-z_-]{35}",
    "private_key": r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
    "jwt": r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{10,}",
}
HIGH_ENTROPY = "high_entropy"
# A long run of token characters; flagged when its Shannon entropy per character reaches the threshold.
_TOKEN = r"[A-Za-z0-9+/=_-]{20,}"
MAX_ALLOW = 1_000
# Joins the texts ``matching`` scans at once: no pattern here reads it (\s is ASCII whitespace, \pL and \pN
# are letters and digits).
SEPARATOR = "\x00"


@dataclass(frozen=True)
class Finding:
    kind: str
    start: int
    end: int


def luhn_ok(digits: str) -> bool:
    """The Luhn checksum of a digit string (card numbers)."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def iban_ok(text: str) -> bool:
    """ISO 13616 mod-97: the country code and check digits moved to the end, letters as 10..35, remainder 1."""
    compact = text.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def iban_length(text: str) -> int:
    """The length of the longest prefix of a spaced IBAN candidate that passes mod-97 (0 for none): the pattern
    runs on into a following capitalized word ("DE89 3704 0044 0532 0130 00 AND"), so groups are dropped from
    the end until the check holds."""
    while True:
        if iban_ok(text):
            return len(text)
        if " " not in text:
            return 0
        text = text.rsplit(" ", 1)[0]


def ssn_ok(text: str) -> bool:
    """SSA rules: no area 000, 666 or 9xx, no group 00, no serial 0000."""
    area, group, serial = text.split("-")
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


def ipv4_ok(text: str) -> bool:
    return all(int(part) <= 255 and (part == "0" or not part.startswith("0")) for part in text.split("."))


def ipv6_ok(text: str) -> bool:
    if text.count(":") < 2 or not any(c not in ":." for c in text):
        return False
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def _digit_count(text: str, low: int, high: int) -> bool:
    return low <= sum(c.isdigit() for c in text) <= high


def card_ok(text: str) -> bool:
    digits = "".join(c for c in text if c.isdigit())
    return 13 <= len(digits) <= 19 and luhn_ok(digits)


_CHECKS: Mapping[str, Callable[[str], bool]] = {
    "credit_card": card_ok,
    "us_ssn": ssn_ok,
    "ipv4": ipv4_ok,
    "ipv6": ipv6_ok,
    "phone": lambda text: _digit_count(text, 7, 15),
}


def shannon_entropy(text: str) -> float:
    """Bits per character of ``text``'s character distribution."""
    if not text:
        return 0.0
    length = len(text)
    return -sum(n / length * math.log2(n / length) for n in Counter(text).values())


# RE2's budget for a compiled scanner and its DFA caches. At the default 8 MiB the Unicode classes of the email
# pattern leave the alternation's DFA too little cache: it is flushed again and again on any text holding a match,
# and a search of 200 characters takes 40-70 us instead of 10. A budget, not an allocation: a scanner's process
# grows by about 3 MiB either way.
DFA_MEMORY = 32 << 20


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False
    options.max_mem = DFA_MEMORY
    return options


@functools.lru_cache(maxsize=64)
def _scanner(kinds: tuple[str, ...], entropy: bool) -> re2._Regexp:
    patterns = {**PII_PATTERNS, **SECRET_PATTERNS}
    groups = [f"(?P<{kind}>{patterns[kind]})" for kind in kinds]
    if entropy:
        groups.append(f"(?P<{HIGH_ENTROPY}>{_TOKEN})")
    return re2.compile("|".join(groups), _options())


def check_kinds(evaluator: str, kinds: Iterable[str], known: Mapping[str, str]) -> tuple[str, ...]:
    """The kinds, in the catalog's order; an unknown one is a BadInputError listing the known."""
    chosen = list(kinds)
    unknown = [k for k in chosen if k not in known]
    if unknown:
        raise BadInputError(f"evaluator {evaluator}: param 'kinds' has unknown kind(s) {', '.join(unknown)}; "
                            f"known: {', '.join(known)}")
    if not chosen:
        raise BadInputError(f"evaluator {evaluator}: param 'kinds' is empty; leave it unset for every kind")
    return tuple(k for k in known if k in chosen)


def check_allow(evaluator: str, allow: Iterable[str]) -> frozenset[str]:
    values = list(allow)
    if len(values) > MAX_ALLOW or not all(isinstance(v, str) and v for v in values):
        raise BadInputError(f"evaluator {evaluator}: param 'allow' must be a list of at most {MAX_ALLOW} "
                            "non-empty strings (exact matched values that are not leaks)")
    return frozenset(values)


def matching(regex: re2._Regexp, texts: Sequence[str]) -> list[bool]:
    """Whether ``regex`` finds a match in each of ``texts``, from one scan of them joined by ``SEPARATOR``: RE2's
    Python wrapper costs about 4 us a call, most of a short text's search. ``regex`` must not use ``^``, ``$``,
    ``\\A`` or ``\\z`` (a joined text's edges are not the texts'); ``\\b`` at an edge sees the separator, a non-word
    character, as it sees a text's start or end. A match holding the separator (a pattern that reads it, or a text
    holding it) or an empty match could belong to two texts: then each text is searched on its own."""
    joined = SEPARATOR.join(texts)
    starts = list(itertools.accumulate((len(text) + 1 for text in texts), initial=0))
    found = [False] * len(texts)
    for match in regex.finditer(joined):
        start, end = match.span()
        if start == end or SEPARATOR in joined[start:end]:
            return [regex.search(text) is not None for text in texts]
        found[bisect.bisect_right(starts, start) - 1] = True
    return found


def clean(texts: list[str], kinds: tuple[str, ...], entropy: bool) -> BatchVerdicts:
    """A batch form's verdicts: True (nothing to find) where a non-empty text has no candidate at all, None (the
    function decides, checksums and all) elsewhere, "" included since it may stand for a non-text content."""
    found = matching(_scanner(kinds, entropy), texts)
    return [True if text and not hit else None for text, hit in zip(texts, found, strict=True)]


def find(text: str, kinds: tuple[str, ...], *, allow: frozenset[str] = frozenset(), entropy: float | None = None
         ) -> list[Finding]:
    """Every finding of ``kinds`` in ``text`` (and, with ``entropy`` bits/char, high-entropy tokens), left to right,
    without overlaps; values in ``allow`` (exact, case-sensitive) are not findings."""
    scanner = _scanner(kinds, entropy is not None)
    found = []
    for match in scanner.finditer(text):
        kind, value = match.lastgroup, match.group()
        if value in allow:
            continue
        if kind == HIGH_ENTROPY:
            if entropy is None or shannon_entropy(value) < entropy:
                continue
        elif kind == "iban":
            length = iban_length(value)
            if not length:
                continue
            found.append(Finding(kind, match.start(), match.start() + length))
            continue
        else:
            check = _CHECKS.get(kind)
            if check is not None and not check(value):
                continue
            if kind in ("ipv6", "email") and _glued(text, match.start(), match.end()):
                continue
        found.append(Finding(kind, match.start(), match.end()))
    return found


def _glued(text: str, start: int, end: int) -> bool:
    """Whether a match runs on into a longer word (RE2 has no lookbehind to say so in the pattern)."""
    before = text[start - 1] if start else " "
    after = text[end] if end < len(text) else " "
    return before.isalnum() or before in "_:" or after.isalnum() or after == "_"


def count_kinds(findings: Iterable[Finding]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for finding in findings:
        counts[finding.kind] = counts.get(finding.kind, 0) + 1
    return counts


def redact(text: str, findings: Iterable[Finding]) -> str:
    """``text`` with each finding replaced by ``[KIND]``."""
    pieces, last = [], 0
    for finding in sorted(findings, key=lambda f: f.start):
        pieces.append(text[last:finding.start])
        pieces.append(f"[{finding.kind.upper()}]")
        last = finding.end
    pieces.append(text[last:])
    return "".join(pieces)
