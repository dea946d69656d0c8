"""Reading judge answers: find ``{"reasoning": ..., "score": ...}`` in whatever the model wrote.

Judges are asked for a bare JSON object, and usually comply; the parser also accepts the object inside a
code fence or surrounded by prose, and, failing any JSON, a ``Score: N`` line. An answer with no score, or
one outside the scale, is *unparseable*: the judge evaluators raise ``UnparseableAnswer``, so the evaluation is
an evaluator error (counted apart, the answer's start in its reason), never a score: a misbehaving judge neither
drags a metric down nor lifts it, and shows as errors.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Literal

ScaleName = Literal["1-5", "0-1", "pass-fail", "pairwise"]
SCALES: tuple[ScaleName, ...] = ("1-5", "0-1", "pass-fail", "pairwise")

SCORE_KEYS = ("score", "verdict", "winner", "rating")
REASONING_KEYS = ("reasoning", "explanation", "rationale", "reason")
EXPLANATION_CHARS = 200

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)"
_NUMERIC = re.compile(rf"^\s*({_NUMBER})\s*(?:/\s*({_NUMBER}))?\s*$")
_SCORE_LINE = re.compile(
    r"^[\s>*_#`-]*(?:final\s+)?(?:score|verdict|winner|rating)[\s*_`]*[:=][\s*_`]*(?P<rest>.+?)\s*$",
    re.IGNORECASE | re.MULTILINE,
)
_LINE_VALUE = re.compile(
    rf"""^["'\[(]*(?P<value>{_NUMBER}(?:\s*/\s*{_NUMBER})?|(?:output|response|answer|assistant)\s+[A-Za-z]\b"""
    r"""|[A-Za-z]+)""",
    re.IGNORECASE,
)
_PASS = {"1": 1.0, "true": 1.0, "pass": 1.0, "passed": 1.0, "yes": 1.0, "correct": 1.0,
         "0": 0.0, "false": 0.0, "fail": 0.0, "failed": 0.0, "no": 0.0, "incorrect": 0.0}
_PAIRWISE = re.compile(r"^(?:(?:output|response|answer|assistant)\s*)?([ab])$|^(tie|draw|equal|both)$")


@dataclass(frozen=True)
class Answer:
    """A parsed judge answer. ``value`` is the score on its scale (a float, or "A"/"B"/"tie" for pairwise),
    None when the answer is unparseable; ``error`` then says why."""

    raw: str
    value: float | str | None
    reasoning: str = ""
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.value is not None

    @property
    def explanation(self) -> str:
        """The judge's reasoning, or ``unparseable judge answer: <first 200 chars>``."""
        if not self.ok:
            return unparseable_explanation(self.raw)
        return self.reasoning


class UnparseableAnswer(Exception):
    """A judge answer with no score on its scale: the evaluation is an evaluator error whose reason says why and
    how the answer began."""

    def __init__(self, answer: Answer) -> None:
        super().__init__(f"{answer.error}; the answer began: {answer.raw[:EXPLANATION_CHARS]!r}")
        self.answer = answer


def unparseable_explanation(raw: str) -> str:
    return f"unparseable judge answer: {raw[:EXPLANATION_CHARS]}"


def coerce(value: Any, scale: ScaleName) -> float | str | None:
    """``value`` on ``scale`` (1..5, 0..1, 0/1, or A/B/tie), or None when it is not a value of the scale."""
    if scale == "pairwise":
        if not isinstance(value, str):
            return None
        match = _PAIRWISE.match(value.strip().strip("\"'[]()*.").strip().lower())
        if match is None:
            return None
        return match.group(1).upper() if match.group(1) else "tie"
    if scale == "pass-fail":
        if isinstance(value, bool):
            return 1.0 if value else 0.0
        if isinstance(value, int | float):
            return float(value) if value in (0, 1) else None
        if isinstance(value, str):
            return _PASS.get(value.strip().strip("\"'.").lower())
        return None
    number = _number(value, denominator=5.0 if scale == "1-5" else 1.0)
    if number is None:
        if scale == "0-1" and isinstance(value, bool):
            return 1.0 if value else 0.0
        return None
    low, high = (1.0, 5.0) if scale == "1-5" else (0.0, 1.0)
    return number if low <= number <= high else None


def _number(value: Any, denominator: float) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        match = _NUMERIC.match(value)
        if match is None:
            return None
        if match.group(2) is not None and float(match.group(2)) != denominator:
            return None  # "4/10" on a 1-5 scale is not a 4
        number = float(match.group(1))
        return number if math.isfinite(number) else None
    return None


def normalize(value: float, scale: ScaleName) -> float:
    """A numeric scale value mapped to [0, 1]: ``(s - 1) / 4`` on the 1-5 scale, as is otherwise."""
    return (value - 1.0) / 4.0 if scale == "1-5" else float(value)


def find_json_objects(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object in ``text``, in order (code fences and prose around them are skipped)."""
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    index = text.find("{")
    while index != -1:
        try:
            obj, end = decoder.raw_decode(text, index)
        except ValueError:
            index = text.find("{", index + 1)
            continue
        if isinstance(obj, dict):
            found.append(obj)
        index = text.find("{", end)
    return found


def _get(obj: dict[str, Any], keys: tuple[str, ...]) -> tuple[bool, Any]:
    lowered = {str(k).strip().lower(): v for k, v in obj.items()}
    for key in keys:
        if key in lowered:
            return True, lowered[key]
    return False, None


def parse_answer(text: str, scale: ScaleName) -> Answer:
    """Parse a judge's answer on ``scale``. Never raises: an unusable answer is ``Answer(value=None)``."""
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {', '.join(SCALES)}, got {scale!r}")
    raw = text if isinstance(text, str) else str(text)
    scored = [obj for obj in find_json_objects(raw) if _get(obj, SCORE_KEYS)[0]]
    if scored:
        obj = scored[-1]  # the last one: judges that restate an example answer give theirs after it
        _, score = _get(obj, SCORE_KEYS)
        _, reasoning = _get(obj, REASONING_KEYS)
        value = coerce(score, scale)
        if value is None:
            return Answer(raw, None, error=f"score {score!r} is not on the {scale} scale")
        return Answer(raw, value, reasoning=_reasoning_text(reasoning))
    lines = list(_SCORE_LINE.finditer(raw))
    if lines:
        line = lines[-1]
        match = _LINE_VALUE.match(line.group("rest"))
        value = coerce(match.group("value"), scale) if match else None
        if value is None:
            return Answer(raw, None, error=f"score line {line.group(0).strip()!r} is not on the {scale} scale")
        return Answer(raw, value, reasoning=raw[: line.start()].strip())
    return Answer(raw, None, error="no JSON object with a score and no 'Score:' line")


def _reasoning_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    return json.dumps(value, ensure_ascii=False)
