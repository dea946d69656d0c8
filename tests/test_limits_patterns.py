"""User-supplied regular expressions run on RE2: linear time on a backtracking bomb, the same answers as before
for the patterns RE2 takes, and a refusal naming the param and the reason for those it cannot run."""

from __future__ import annotations

import time

import pytest

from evalsi.cases.loader import load_text
from evalsi.cases.model import BrokenCase
from evalsi.errors import BadInputError
from evalsi.packs.agent.policy import policy_violations
from evalsi.packs.core.matching import regex_match
from evalsi.patterns import PatternError, compile_user_pattern
from evalsi.records import make_record

BOMB = "a" * 29 + "!"


def passed(output: str, **params: object) -> bool:
    bound = regex_match.bind(params)
    returned = regex_match.fn(make_record(output=output), **bound.params)
    return returned is True or bool(getattr(returned, "passed", False))


def test_a_backtracking_bomb_is_answered_in_linear_time() -> None:
    started = time.perf_counter()
    assert not passed(BOMB * 1000, pattern="(a+)+$")  # Python's re needs ~95 s for ONE copy
    assert not passed(BOMB, pattern="(a|aa)*$", mode="fullmatch")
    assert passed("a" * 100_000, pattern="(a+)+$")
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize(
    ("output", "params", "expected"),
    [
        ("order #12345 shipped", {"pattern": r"#\d{5}"}, True),
        ("#12345", {"pattern": r"#\d{5}", "mode": "fullmatch"}, True),
        ("order #12345", {"pattern": r"#\d{5}", "mode": "fullmatch"}, False),
        ("YES", {"pattern": "yes"}, False),
        ("YES", {"pattern": "yes", "ignore_case": True}, True),
        ("Grüße", {"pattern": r"^\pL+$"}, True),  # Unicode classes by name
        ("call 555-12-3456 now", {"pattern": r"\b\d{3}-\d{2}-\d{4}\b", "negate": True}, False),
        ("no number here", {"pattern": r"\b\d{3}-\d{2}-\d{4}\b", "negate": True}, True),
    ],
)
def test_regex_match_answers(output: str, params: dict, expected: bool) -> None:
    assert passed(output, **params) is expected


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(\w+) \1", "backreferences are not supported by the linear-time engine (RE2)"),
        (r"(?P<w>\w+) (?P=w)", "backreferences are not supported"),
        (r"^(?!.*secret)", "lookahead is not supported"),
        (r"(?<=\$)\d+", "lookbehind is not supported"),
        (r"(?>a+)b", "atomic groups and possessive quantifiers are not supported"),
        (r"done\Z", r"\Z is written \z in RE2"),
        ("(unclosed", "missing ): (unclosed"),
    ],
)
def test_patterns_re2_cannot_run_are_refused_at_bind_naming_the_param(pattern: str, reason: str) -> None:
    with pytest.raises(BadInputError) as caught:
        regex_match.bind({"pattern": pattern})
    message = str(caught.value)
    assert message.startswith(f"evaluator builtin/regex-match: param 'pattern': {pattern!r} is not a valid regular "
                              "expression: ")
    assert reason in message


def test_a_pattern_over_the_size_limit_is_refused() -> None:
    with pytest.raises(PatternError, match=r"^where: 'xxxx.*\.\.\.' is not a valid regular expression: 4097 "
                                           r"characters exceed the limit of 4096$"):
        compile_user_pattern("x" * 4097, "where")


def test_policy_violation_patterns_run_on_re2() -> None:
    with pytest.raises(BadInputError, match=r"param 'forbidden_output' entry 1 is not a valid regular expression "
                                            r"\('\(a\)\\\\1': backreferences are not supported"):
        policy_violations.bind({"forbidden_output": ["ok", r"(a)\1"]})
    bound = policy_violations.bind({"forbidden_output": ["(a+)+$"]})
    started = time.perf_counter()
    clean = policy_violations.fn(make_record(output=BOMB * 1000), **bound.params)
    assert time.perf_counter() - started < 1.0
    assert (clean["passed"].passed, clean["violations"].number) == (True, 0)
    caught = policy_violations.fn(make_record(output="aaa"), **bound.params)
    assert (caught["passed"].passed, caught["violations"].number) == (False, 1)


def test_case_claims_run_on_re2() -> None:
    text = "id: c\nagent: a\nturns:\n  - user: oi\nexpect:\n  claims:\n    add_to_cart: '(?<!não )adicionei'\n"
    [item] = load_text(text, "case.yaml")
    assert isinstance(item, BrokenCase)
    assert item.error.startswith("case.yaml:7: expect.claims.add_to_cart: regex does not compile: lookbehind is not "
                                 "supported by the linear-time engine (RE2)"), item.error
