"""BFCL's AST checker rules, each worked by hand: a passing and a failing case per rule, per category."""

from __future__ import annotations

from typing import Any

import pytest

from evalsi.packs.benchmarks.bfcl_ast import check_calls, standardize
from evalsi.packs.benchmarks.bfcl_calls import DecodeError, json_calls, text_calls

AREA = {"name": "geometry.area", "parameters": {"type": "dict", "properties": {
    "base": {"type": "integer"}, "height": {"type": "float"}, "unit": {"type": "string"},
    "tags": {"type": "array", "items": {"type": "string"}},
    "sizes": {"type": "array", "items": {"type": "float"}},
    "options": {"type": "dict"},
    "rows": {"type": "array", "items": {"type": "dict"}},
    "exact": {"type": "boolean"},
}, "required": ["base", "height"]}}
ANSWER = {"geometry.area": {"base": [10], "height": [5.0], "unit": ["cm", ""], "tags": [["Big Shape"], ""],
                            "sizes": [[1.5, 2.0], ""], "options": ["", {"round": [True], "mode": ["fast", ""]}],
                            "rows": ["", [{"k": ["a"]}, {"k": ["b"]}]], "exact": [True, ""]}}


def simple(call: dict[str, Any], answer: dict[str, Any] = ANSWER) -> tuple[bool, str]:
    verdict = check_calls([AREA], [call], [answer], "simple")
    return verdict.valid, verdict.error_type


def test_function_name_must_match() -> None:
    assert simple({"geometry.area": {"base": 10, "height": 5.0}}) == (True, "")
    assert simple({"area": {"base": 10, "height": 5.0}}) == (False, "simple_function_checker:wrong_func_name")
    # function-calling APIs refuse dots: with dots_as_underscores the model must call geometry_area
    underscored = check_calls([AREA], [{"geometry_area": {"base": 10, "height": 5.0}}], [ANSWER], "simple",
                              dots_as_underscores=True)
    assert underscored.valid
    assert not check_calls([AREA], [{"geometry_area": {"base": 10, "height": 5.0}}], [ANSWER], "simple").valid


def test_required_and_unexpected_parameters() -> None:
    assert simple({"geometry.area": {"base": 10}}) == (False, "simple_function_checker:missing_required")
    assert simple({"geometry.area": {"base": 10, "height": 5.0, "colour": "red"}}) == (
        False, "simple_function_checker:unexpected_param")
    # declared but absent from the possible answer: unexpected too
    narrow = {"geometry.area": {"base": [10], "height": [5.0]}}
    assert simple({"geometry.area": {"base": 10, "height": 5.0, "unit": "cm"}}, narrow) == (
        False, "simple_function_checker:unexpected_param")


def test_optional_parameters_need_the_empty_string_mark() -> None:
    # unit may be left out ("" among its possible values); a parameter without "" may not
    strict = {"geometry.area": {"base": [10], "height": [5.0], "unit": ["cm"]}}
    assert simple({"geometry.area": {"base": 10, "height": 5.0}}, strict) == (
        False, "simple_function_checker:missing_optional")
    assert simple({"geometry.area": {"base": 10, "height": 5.0, "unit": "cm"}}, strict) == (True, "")


def test_types_with_int_to_float_allowance() -> None:
    assert simple({"geometry.area": {"base": 10, "height": 5}}) == (True, "")  # int for a float: allowed
    assert simple({"geometry.area": {"base": 10.0, "height": 5.0}}) == (False, "type_error:simple")  # not reverse
    assert simple({"geometry.area": {"base": True, "height": 5.0}}) == (False, "type_error:simple")  # bool != int
    assert simple({"geometry.area": {"base": 10, "height": 5.0, "exact": "yes"}}) == (False, "type_error:simple")
    # arrays check their items' type, without the int -> float allowance
    assert simple({"geometry.area": {"base": 10, "height": 5.0, "sizes": [1.5, 2.0]}}) == (True, "")
    required_sizes = {"geometry.area": {"base": [10], "height": [5.0], "sizes": [[1.5, 2.0]]}}
    assert simple({"geometry.area": {"base": 10, "height": 5.0, "sizes": [1.5, 2]}}, required_sizes) == (
        False, "type_error:nested")
    # as in BFCL, the optional mark "" among the possible values passes any items' types
    assert simple({"geometry.area": {"base": 10, "height": 5.0, "sizes": [1.5, 2]}}) == (True, "")


def test_a_value_of_the_answers_own_type_is_a_variable() -> None:
    # BFCL writes a variable as a string in the possible answer: a string for an integer param passes the type
    # check and is then compared as a value
    answer = {"geometry.area": {"base": ["side"], "height": [5.0]}}
    assert simple({"geometry.area": {"base": "side", "height": 5.0}}, answer) == (True, "")
    assert simple({"geometry.area": {"base": "other", "height": 5.0}}, answer) == (False, "value_error:others")


def test_any_of_the_possible_values() -> None:
    assert simple({"geometry.area": {"base": 11, "height": 5.0}}) == (False, "value_error:others")
    two = {"geometry.area": {"base": [10, 12], "height": [5.0]}}
    assert simple({"geometry.area": {"base": 12, "height": 5.0}}, two) == (True, "")


def test_strings_compare_standardized() -> None:
    assert standardize("New York, NY") == "newyorkny"
    assert simple({"geometry.area": {"base": 10, "height": 5.0, "unit": " C.M "}}) == (True, "")
    assert simple({"geometry.area": {"base": 10, "height": 5.0, "unit": "mm"}}) == (False, "value_error:string")
    assert simple({"geometry.area": {"base": 10, "height": 5.0, "tags": ["big_shape"]}}) == (True, "")
    assert simple({"geometry.area": {"base": 10, "height": 5.0, "tags": ["small"]}}) == (
        False, "value_error:list/tuple")


def test_dicts_and_lists_of_dicts() -> None:
    base = {"base": 10, "height": 5.0}
    assert simple({"geometry.area": {**base, "options": {"round": True}}}) == (True, "")  # mode is optional
    assert simple({"geometry.area": {**base, "options": {"round": True, "mode": "FAST"}}}) == (True, "")
    assert simple({"geometry.area": {**base, "options": {"round": False}}}) == (False, "value_error:dict_value")
    assert simple({"geometry.area": {**base, "options": {"round": True, "x": 1}}}) == (False, "value_error:dict_key")
    assert simple({"geometry.area": {**base, "options": {"mode": "fast"}}}) == (False, "value_error:dict_key")
    assert simple({"geometry.area": {**base, "rows": [{"k": "a"}, {"k": "b"}]}}) == (True, "")
    assert simple({"geometry.area": {**base, "rows": [{"k": "b"}, {"k": "a"}]}}) == (False, "value_error:dict_value")
    assert simple({"geometry.area": {**base, "rows": [{"k": "a"}]}}) == (False, "value_error:list_dict_count")


WEATHER = {"name": "weather", "parameters": {"type": "dict", "properties": {"city": {"type": "string"}},
                                              "required": ["city"]}}
BOOK = {"name": "book", "parameters": {"type": "dict", "properties": {"people": {"type": "integer"}},
                                        "required": ["people"]}}


def test_simple_takes_exactly_one_call() -> None:
    call = {"geometry.area": {"base": 10, "height": 5.0}}
    verdict = check_calls([AREA], [call, call], [ANSWER], "simple")
    assert (verdict.valid, verdict.error_type) == (False, "simple_function_checker:wrong_count")


def test_multiple_picks_the_expected_function() -> None:
    answer = [{"book": {"people": [4]}}]
    assert check_calls([WEATHER, BOOK], [{"book": {"people": 4}}], answer, "multiple").valid
    wrong = check_calls([WEATHER, BOOK], [{"weather": {"city": "Piran"}}], answer, "multiple")
    assert (wrong.valid, wrong.error_type) == (False, "simple_function_checker:wrong_func_name")
    none = check_calls([WEATHER, BOOK], [], answer, "live_multiple")
    assert none.error_type == "multiple_function_checker:wrong_count"


def test_parallel_calls_in_any_order() -> None:
    answers = [{"weather": {"city": ["Paris"]}}, {"weather": {"city": ["Rome"]}}]
    rome_first = [{"weather": {"city": "Rome"}}, {"weather": {"city": "Paris"}}]
    assert check_calls([WEATHER], rome_first, answers, "parallel").valid
    twice = check_calls([WEATHER], [{"weather": {"city": "Rome"}}] * 2, answers, "parallel")
    assert (twice.valid, twice.error_type) == (False, "parallel_function_checker_no_order:cannot_find_match")
    short = check_calls([WEATHER], rome_first[:1], answers, "parallel")
    assert short.error_type == "parallel_function_checker_no_order:wrong_count"
    mixed = [{"weather": {"city": ["Piran"]}}, {"book": {"people": [2]}}]
    assert check_calls([WEATHER, BOOK], [{"book": {"people": 2}}, {"weather": {"city": "piran"}}], mixed,
                       "parallel_multiple").valid
    assert not check_calls([WEATHER, BOOK], [{"book": {"people": 3}}, {"weather": {"city": "Piran"}}], mixed,
                           "parallel_multiple").valid


def test_categories_outside_the_ast_checker_are_refused() -> None:
    with pytest.raises(ValueError, match="irrelevance"):
        check_calls([WEATHER], [], [], "irrelevance")


def test_decoding_bfcl_prompting_output() -> None:
    assert text_calls('[weather(city="Paris"), book(people=4)]') == [{"weather": {"city": "Paris"}},
                                                                      {"book": {"people": 4}}]
    # BFCL adds missing brackets, strips backticks, reads dotted names, negatives, arithmetic, names as strings
    assert text_calls("```geo.area(base=-3, height=2*1.5, unit=cm, tags=['a'], t=(1, 2))```") == [
        {"geo.area": {"base": -3, "height": 3.0, "unit": "cm", "tags": ["a"], "t": (1, 2)}}]
    with pytest.raises(DecodeError, match="not a function call"):  # JSON in text: BFCL's prompting mode fails it
        text_calls('[{"weather": {"city": "Rome"}}]')
    assert json_calls([{"name": "book", "arguments": '{"people": 2}'}]) == [{"book": {"people": 2}}]
    assert text_calls("area(2, height=3)") == [{"area": {"height": 3}}]  # positional arguments are not read
    with pytest.raises(DecodeError, match="invalid syntax"):
        text_calls("I cannot help with that (")
    with pytest.raises(DecodeError, match="not a function call"):
        text_calls("[1, 2]")
    assert text_calls("[f(x=2**1000)]") == [{"f": {"x": "2 ** 1000"}}]  # huge powers are not evaluated
