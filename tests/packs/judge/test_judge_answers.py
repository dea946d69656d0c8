"""Parsing judge answers: JSON in fences or prose, the ``Score: N`` fallback, and unparseable answers."""

from __future__ import annotations

import pytest

from evalsi.packs.judge.answers import coerce, find_json_objects, normalize, parse_answer


def test_bare_json() -> None:
    answer = parse_answer('{"reasoning": "matches the reference", "score": 5}', "1-5")
    assert answer.ok and answer.value == 5.0
    assert answer.reasoning == "matches the reference"
    assert answer.explanation == "matches the reference"


def test_code_fence() -> None:
    text = 'Here is my verdict:\n```json\n{\n  "reasoning": "mostly right",\n  "score": 4\n}\n```\n'
    answer = parse_answer(text, "1-5")
    assert answer.value == 4.0 and answer.reasoning == "mostly right"


def test_prose_around_and_braces_in_prose() -> None:
    text = (
        'The output uses {curly} words and a set {1, 2}. Format: {"reasoning": "...", "score": N}\n'
        'My answer: {"reasoning": "it is off topic", "score": 2} Thanks!'
    )
    answer = parse_answer(text, "1-5")
    assert answer.value == 2.0 and answer.reasoning == "it is off topic"


def test_last_scored_object_wins_and_nested_objects_are_not_separate() -> None:
    text = '{"reasoning": "x", "score": 1, "detail": {"score": 5}} then {"reasoning": "final", "score": 3}'
    assert [o.get("score") for o in find_json_objects(text)] == [1, 3]
    assert parse_answer(text, "1-5").value == 3.0


def test_keys_are_case_insensitive_and_scores_may_be_strings() -> None:
    answer = parse_answer('{"Reasoning": "ok", "Score": "4"}', "1-5")
    assert answer.value == 4.0 and answer.reasoning == "ok"
    assert parse_answer('{"score": "4/5"}', "1-5").value == 4.0
    assert not parse_answer('{"score": "4/10"}', "1-5").ok


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("The answer is mostly correct.\nScore: 4", 4.0),
        ("**Score:** 3/5", 3.0),
        ("reasoning...\nFinal score = 2", 2.0),
        ("- score: 5.", 5.0),
    ],
)
def test_score_line_fallback(text: str, value: float) -> None:
    answer = parse_answer(text, "1-5")
    assert answer.ok and answer.value == value


def test_fallback_reasoning_is_the_text_before_the_line() -> None:
    answer = parse_answer("It cites the wrong year.\nScore: 2", "1-5")
    assert answer.reasoning == "It cites the wrong year."


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("I think this is a pretty good answer overall.", "no JSON object"),
        ('{"reasoning": "great", "score": 7}', "not on the 1-5 scale"),
        ('{"reasoning": "great", "score": 0}', "not on the 1-5 scale"),
        ('{"reasoning": "great", "score": "excellent"}', "not on the 1-5 scale"),
        ('{"reasoning": "no score here"}', "no JSON object"),
        ("Score: ten", "not on the 1-5 scale"),
        ("", "no JSON object"),
    ],
)
def test_unparseable(text: str, error: str) -> None:
    answer = parse_answer(text, "1-5")
    assert not answer.ok and answer.value is None
    assert error in answer.error
    assert answer.explanation == f"unparseable judge answer: {text[:200]}"


def test_unparseable_explanation_keeps_the_first_200_chars() -> None:
    text = "garbage " * 100
    assert parse_answer(text, "1-5").explanation == "unparseable judge answer: " + text[:200]


@pytest.mark.parametrize(
    ("raw", "value"),
    [(1, 1.0), (0, 0.0), (True, 1.0), (False, 0.0), ("pass", 1.0), ("FAIL", 0.0), ("1", 1.0), ("correct", 1.0),
     (0.5, None), (2, None), ("maybe", None), (None, None)],
)
def test_pass_fail_scale(raw: object, value: float | None) -> None:
    assert coerce(raw, "pass-fail") == value


@pytest.mark.parametrize(
    ("raw", "value"),
    [("A", "A"), ("b", "B"), ("tie", "tie"), ("Tie", "tie"), ("[[A]]", "A"), ("Output B", "B"), ("draw", "tie"),
     ("C", None), (1, None), ("A or B", None)],
)
def test_pairwise_scale(raw: object, value: str | None) -> None:
    assert coerce(raw, "pairwise") == value


def test_zero_one_scale_accepts_fractions() -> None:
    assert parse_answer('{"score": 0.75}', "0-1").value == 0.75
    assert not parse_answer('{"score": 1.5}', "0-1").ok
    assert not parse_answer('{"score": NaN}', "0-1").ok


def test_pairwise_verdict_key_and_line() -> None:
    assert parse_answer('{"reasoning": "A is right", "verdict": "A"}', "pairwise").value == "A"
    assert parse_answer("B is clearer.\nVerdict: B", "pairwise").value == "B"
    assert parse_answer("Verdict: B is clearer", "pairwise").value == "B"
    assert parse_answer("Winner: **Output A**", "pairwise").value == "A"
    assert parse_answer("Verdict: [[tie]]", "pairwise").value == "tie"


def test_normalize() -> None:
    assert [normalize(s, "1-5") for s in (1, 2, 3, 4, 5)] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert normalize(0.3, "0-1") == 0.3
    assert normalize(1.0, "pass-fail") == 1.0
