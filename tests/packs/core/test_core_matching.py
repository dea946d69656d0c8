"""builtin/exact-match, fuzzy-match, numeric-match, contains and regex-match."""

from __future__ import annotations

from typing import Any

import pytest

from evalsi.errors import BadInputError, SkipRecord
from evalsi.evaluators import Evaluator, normalize_scores
from evalsi.packs.core.matching import contains, exact_match, fuzzy_match, numeric_match, parse_number, regex_match
from evalsi.records import make_record
from evalsi.v1alpha1.score_pb2 import Score


def run(ev: Evaluator, record: Any, **params: Any) -> dict[str, Score]:
    """Validate params as the runner does, fill in defaults, call, and normalize the result."""
    bound = ev.bind(params)
    defaults = {p.name: p.default for p in ev.params if not p.required}
    return {s.name: s for s in normalize_scores(ev, ev(record, **{**defaults, **bound.params}))}


def passed(ev: Evaluator, output: Any, reference: Any = None, **params: Any) -> bool:
    return run(ev, make_record(output=output, reference=reference), **params)["passed"].passed


# --- exact-match ---


@pytest.mark.parametrize(
    ("output", "reference", "params", "expected"),
    [
        ("Paris", "Paris", {}, True),
        ("  paris\n", "PARIS", {}, True),
        ("New   York", "new york", {}, True),
        ("Paris", "London", {}, False),
        (" Paris", "Paris", {"normalize": False}, False),
        ("paris", "Paris", {"normalize": False}, False),
        ("Paris!", "paris", {}, False),
        ("Paris!", "paris", {"ignore_punctuation": True}, True),
        ("the Eiffel Tower", "Eiffel tower", {}, False),
        ("The Eiffel Tower.", "eiffel tower", {"ignore_articles": True, "ignore_punctuation": True}, True),
        ("a theory", "theory", {"ignore_articles": True}, True),
        ("theory", "ory", {"ignore_articles": True}, False),
        ("Straße", "STRASSE", {}, True),
    ],
)
def test_exact_match(output: str, reference: str, params: dict[str, Any], expected: bool) -> None:
    assert passed(exact_match, output, reference, **params) is expected


def test_exact_match_failure_explains() -> None:
    scores = run(exact_match, make_record(output="Lyon", reference="Paris"))
    assert not scores["passed"].passed
    assert "'Lyon'" in scores["passed"].explanation and "'Paris'" in scores["passed"].explanation


def test_exact_match_json_list_reference_any_of() -> None:
    scores = run(exact_match, make_record(output="NYC", reference=["New York", "nyc", "New York City"]))
    assert scores["passed"].passed
    assert "reference 2 of 3" in scores["passed"].explanation
    scores = run(exact_match, make_record(output="Boston", reference=["New York", "NYC"]))
    assert not scores["passed"].passed
    assert "none of 2" in scores["passed"].explanation


def test_exact_match_json_references_read_numbers_as_written() -> None:
    assert passed(exact_match, "42", [42, "forty-two"])
    assert passed(exact_match, "42", 42)
    assert passed(exact_match, "1.5", [1.5])
    assert passed(exact_match, {"a": 1}, {"a": 1})


def test_exact_match_empty_list_reference_skips() -> None:
    record = make_record(output="x")
    record.reference.json.list_value.SetInParent()
    with pytest.raises(SkipRecord, match=r"empty"):
        run(exact_match, record)


def test_exact_match_compares_last_assistant_message() -> None:
    output = {"messages": [{"role": "user", "content": "capital?"}, {"role": "assistant", "content": "Paris"}]}
    assert passed(exact_match, output, "paris")


def test_exact_match_returns_cheap_values_on_the_hot_path() -> None:
    assert exact_match(make_record(output="a", reference="A")) is True


def test_exact_match_params_validation() -> None:
    with pytest.raises(BadInputError, match=r"unknown param.*ignore_case"):
        exact_match.bind({"ignore_case": True})
    with pytest.raises(BadInputError, match=r"'normalize' must be bool"):
        exact_match.bind({"normalize": "yes"})
    assert exact_match.bind({"normalize": False}).params == {"normalize": False}


# --- fuzzy-match ---


def test_fuzzy_match_scores_similarity() -> None:
    scores = run(fuzzy_match, make_record(output="kitten", reference="sitting"))
    assert 0.0 < scores["similarity"].number < 0.8
    assert not scores["passed"].passed
    assert "threshold 0.8" in scores["passed"].explanation
    scores = run(fuzzy_match, make_record(output="Hello World ", reference="hello world"))
    assert scores["similarity"].number == 1.0 and scores["passed"].passed


def test_fuzzy_match_threshold_and_methods() -> None:
    record = make_record(output="world hello", reference="hello world")
    assert not run(fuzzy_match, record)["passed"].passed
    assert run(fuzzy_match, record, method="token_sort_ratio")["similarity"].number == 1.0
    record = make_record(output="the answer is Paris, France", reference="Paris")
    assert run(fuzzy_match, record, method="partial_ratio")["passed"].passed
    assert run(fuzzy_match, make_record(output="kitten", reference="sitting"), threshold=0.5)["passed"].passed


def test_fuzzy_match_normalize_off_is_case_sensitive() -> None:
    record = make_record(output="PARIS", reference="paris")
    assert run(fuzzy_match, record, normalize=False)["similarity"].number == 0.0


def test_fuzzy_match_json_list_takes_best() -> None:
    scores = run(fuzzy_match, make_record(output="colour", reference=["zebra", "color"]))
    assert scores["similarity"].number > 0.8
    assert scores["passed"].passed and "reference 2" in scores["passed"].explanation


def test_fuzzy_match_params_validation() -> None:
    with pytest.raises(BadInputError, match=r"'method' must be one of"):
        fuzzy_match.bind({"method": "levenshtein"})
    with pytest.raises(BadInputError, match=r"'threshold' must be float"):
        fuzzy_match.bind({"threshold": "high"})
    assert fuzzy_match.bind({"threshold": 1}).params == {"threshold": 1.0}
    with pytest.raises(BadInputError, match=r"threshold"):
        run(fuzzy_match, make_record(output="a", reference="a"), threshold=1.5)


# --- numeric-match ---


@pytest.mark.parametrize(
    ("text", "last", "first", "exact"),
    [
        ("The answer is 42.", 42, 42, None),
        ("1,234,567.89", 1234567.89, 1234567.89, 1234567.89),
        ("-3.5e2 units", -350, -350, None),
        ("about 50%", 50, 50, None),
        ("50 %", 50, 50, 50),
        ("from 3 to 7", 7, 3, None),
        ("3-4", 4, 3, None),
        ("v1.2.3", None, None, None),
        ("x = \u22125", -5, -5, None),
        ("costs $1,000", 1000, 1000, None),
        ("1,2,3", 3, 1, None),
        ("  .5 ", 0.5, 0.5, 0.5),
        ("答案是42", 42, 42, None),
        ("no number here", None, None, None),
    ],
)
def test_parse_number(text: str, last: float | None, first: float | None, exact: float | None) -> None:
    assert parse_number(text, "last") == last
    assert parse_number(text, "first") == first
    assert parse_number(text, "exact") == exact


def test_numeric_match_pass_and_fail() -> None:
    assert passed(numeric_match, "So the total is 1,024.", "1024")
    assert passed(numeric_match, "3.0000001", "3")
    scores = run(numeric_match, make_record(output="I think 41", reference="42"))
    assert not scores["passed"].passed
    assert "41" in scores["passed"].explanation and "42" in scores["passed"].explanation


def test_numeric_match_tolerances() -> None:
    assert not passed(numeric_match, "105", "100")
    assert passed(numeric_match, "105", "100", abs_tol=5)
    assert passed(numeric_match, "105", "100", rel_tol=0.05)
    assert not passed(numeric_match, "106", "100", rel_tol=0.05)


def test_numeric_match_extract_modes() -> None:
    assert passed(numeric_match, "3 apples, 5 pears", "3", extract="first")
    assert not passed(numeric_match, "3 apples, 5 pears", "3")
    assert passed(numeric_match, " -12.5 ", "-12.5", extract="exact")
    scores = run(numeric_match, make_record(output="about 12", reference="12"), extract="exact")
    assert not scores["passed"].passed and "not a number" in scores["passed"].explanation


def test_numeric_match_output_without_number_fails() -> None:
    scores = run(numeric_match, make_record(output="I don't know", reference="7"))
    assert not scores["passed"].passed
    assert "no number" in scores["passed"].explanation


def test_numeric_match_json_references() -> None:
    assert passed(numeric_match, "12", 12)
    assert passed(numeric_match, "It is 0.5", [0.25, "0.5"])
    assert not passed(numeric_match, "It is 0.75", [0.25, 0.5])


def test_numeric_match_reference_not_a_number_skips() -> None:
    with pytest.raises(SkipRecord, match=r"'forty' is not a number"):
        run(numeric_match, make_record(output="40", reference="forty"))
    with pytest.raises(SkipRecord, match=r"not a number"):
        run(numeric_match, make_record(output="40", reference=[40, True]))


def test_numeric_match_params_validation() -> None:
    with pytest.raises(BadInputError, match=r"'extract' must be one of last, first, exact"):
        numeric_match.bind({"extract": "middle"})
    with pytest.raises(BadInputError, match=r"'abs_tol' must be float"):
        numeric_match.bind({"abs_tol": "0.1"})
    with pytest.raises(BadInputError, match=r"unknown param.*tolerance"):
        numeric_match.bind({"tolerance": 0.1})
    with pytest.raises(BadInputError, match=r">= 0"):
        run(numeric_match, make_record(output="1", reference="1"), abs_tol=-1)


# --- contains ---


def test_contains_values_any_and_all() -> None:
    assert passed(contains, "The capital is Paris.", values=["paris", "london"])
    assert not passed(contains, "The capital is Paris.", values=["paris", "london"], mode="all")
    assert passed(contains, "Paris and London", values=["paris", "london"], mode="all")
    assert not passed(contains, "The capital is Paris.", values=["paris"], ignore_case=False)


def test_contains_explains_missing_values() -> None:
    scores = run(contains, make_record(output="Paris"), values=["Paris", "Rome", "Berlin"], mode="all")
    assert not scores["passed"].passed
    assert "'Rome'" in scores["passed"].explanation and "'Berlin'" in scores["passed"].explanation
    assert "'Paris'" not in scores["passed"].explanation
    scores = run(contains, make_record(output="Madrid"), values=["Rome"])
    assert "none found" in scores["passed"].explanation and "'Rome'" in scores["passed"].explanation


def test_contains_uses_the_reference() -> None:
    assert passed(contains, "It is Paris, of course", "paris")
    assert passed(contains, "It is 42", ["forty-two", "42"])
    assert not passed(contains, "It is 42", ["forty-two", "42"], mode="all")
    # explicit values win over the reference
    assert not passed(contains, "It is Paris", "Paris", values=["Rome"])


def test_contains_without_values_or_reference_skips() -> None:
    with pytest.raises(SkipRecord, match=r"no values to look for: set values or give a reference"):
        run(contains, make_record(output="anything"))


def test_contains_params_validation() -> None:
    with pytest.raises(BadInputError, match=r"'values' must be list"):
        contains.bind({"values": "paris"})
    with pytest.raises(BadInputError, match=r"'mode' must be one of any, all"):
        contains.bind({"mode": "some"})
    with pytest.raises(BadInputError, match=r"list of strings"):
        run(contains, make_record(output="1"), values=[1])
    with pytest.raises(BadInputError, match=r"empty"):
        run(contains, make_record(output="1"), values=[])


# --- regex-match ---


def test_regex_match_search_and_fullmatch() -> None:
    assert passed(regex_match, "Order #12345 confirmed", pattern=r"#\d{5}\b")
    assert not passed(regex_match, "Order #12345 confirmed", pattern=r"#\d{5}", mode="fullmatch")
    assert passed(regex_match, "#12345", pattern=r"#\d{5}", mode="fullmatch")
    assert not passed(regex_match, "YES", pattern="yes")
    assert passed(regex_match, "YES", pattern="yes", ignore_case=True)


def test_regex_match_failure_explains() -> None:
    scores = run(regex_match, make_record(output="no digits"), pattern=r"\d+")
    assert not scores["passed"].passed
    assert "/\\d+/" in scores["passed"].explanation


def test_regex_match_invalid_pattern_is_bad_input() -> None:
    expected = r"param 'pattern': '\(unclosed' is not a valid regular expression: missing \)"
    with pytest.raises(BadInputError, match=expected):
        run(regex_match, make_record(output="x"), pattern="(unclosed")


def test_regex_match_params_validation() -> None:
    with pytest.raises(BadInputError, match=r"missing required param.*pattern"):
        regex_match.bind({})
    with pytest.raises(BadInputError, match=r"'pattern' must be str"):
        regex_match.bind({"pattern": 5})
    with pytest.raises(BadInputError, match=r"'mode' must be one of search, fullmatch"):
        regex_match.bind({"pattern": "x", "mode": "match"})
