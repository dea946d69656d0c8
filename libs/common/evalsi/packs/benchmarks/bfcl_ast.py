"""BFCL's AST checker for Python function calls (simple, multiple, parallel, parallel_multiple), as pure functions.

The rules are those of the Berkeley Function Calling Leaderboard's ``ast_checker`` (Python language): a call's
function name must match; required parameters must be present; every given parameter must be declared and named
in the possible answer; its type must be the declared one (an int where a float is declared counts as that float;
a value of the possible answers' own type counts as a variable and passes the type check); strings compare after
BFCL's standardization (case, spaces and ``,./-_*^`` ignored, ``'`` as ``"``); lists, dicts and lists of dicts
compare element-wise with the same standardization; any other value must be one of the possible values; a
parameter the model left out passes only when its possible values include ``""`` (BFCL's mark for optional).
Parallel categories match calls in any order, greedily in the possible answers' order as BFCL does.

A call is ``{function_name: {param: value}}``, as BFCL decodes a model's output; a possible answer is
``{function_name: {param: [possible values]}}``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# BFCL v3's names, v4's simple_python, and the live_ versions of each (Python: simple_java and simple_javascript
# convert their values by language first, which is not built)
CATEGORIES = ("simple", "simple_python", "multiple", "parallel", "parallel_multiple")

# BFCL's type names for Python functions and the Python type a value of each must have.
PYTHON_TYPES: dict[str, type] = {
    "string": str, "integer": int, "float": float, "boolean": bool, "array": list, "tuple": list, "dict": dict,
    "any": str,
}
_NESTED = ("array", "tuple")  # types whose items are type-checked too (one level deep, as BFCL does)
_STANDARDIZE = re.compile(r"[ ,./\-_*^]")
_OPTIONAL = ""  # a possible value meaning "the parameter may be left out"


@dataclass(frozen=True)
class Verdict:
    """Whether the calls pass; when not, BFCL's error type (``simple_function_checker:missing_required`` ...) and
    what went wrong."""

    valid: bool
    error_type: str = ""
    error: str = ""


_VALID = Verdict(True)


def _fail(error_type: str, error: str) -> Verdict:
    return Verdict(False, error_type, error)


def standardize(text: str) -> str:
    """BFCL's string form for comparison: no spaces or ``,./-_*^``, lower case, single quotes as double."""
    return _STANDARDIZE.sub("", text).lower().replace("'", '"')


def check_calls(functions: Sequence[Mapping[str, Any]], calls: Sequence[Mapping[str, Any]],
                answers: Sequence[Mapping[str, Any]], category: str, *, dots_as_underscores: bool = False) -> Verdict:
    """BFCL's ``ast_checker`` for one question: ``functions`` its function descriptions, ``calls`` the model's
    decoded calls, ``answers`` the possible answers, ``category`` one of :data:`CATEGORIES` (``live_`` ones too).
    ``dots_as_underscores``: the model saw function names with ``.`` written ``_`` (function-calling APIs that
    refuse dots), so that is the name it must call."""
    category = category.removeprefix("live_")
    if category not in CATEGORIES:
        raise ValueError(f"BFCL category {category!r}: the AST checker grades {', '.join(CATEGORIES)}")
    if len(calls) != len(answers):
        checker = {"simple": "simple_function_checker", "simple_python": "simple_function_checker",
                   "multiple": "multiple_function_checker"}.get(category, "parallel_function_checker_no_order")
        return _fail(f"{checker}:wrong_count",
                     f"wrong number of functions: {len(calls)} called, {len(answers)} expected")
    if "parallel" in category:
        return _parallel_no_order(functions, calls, answers, dots_as_underscores)
    # simple and multiple: the one call against the one possible answer, with the expected function's description
    expected = next(iter(answers[0]))
    return _check_call(_description(functions, expected), calls[0], answers[0], dots_as_underscores)


def _description(functions: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
    return next((f for f in functions if f.get("name") == name), None)


def _parallel_no_order(functions: Sequence[Mapping[str, Any]], calls: Sequence[Mapping[str, Any]],
                       answers: Sequence[Mapping[str, Any]], dots: bool) -> Verdict:
    matched: set[int] = set()
    for index, answer in enumerate(answers):
        description = _description(functions, next(iter(answer)))
        last = _fail("parallel_function_checker_no_order:cannot_find_match", "no call left to match")
        for position, call in enumerate(calls):
            if position in matched:
                continue
            last = _check_call(description, call, answer, dots)
            if last.valid:
                matched.add(position)
                break
        if not last.valid:
            return _fail("parallel_function_checker_no_order:cannot_find_match",
                         f"no call matches possible answer {index} ({next(iter(answer))}); last mismatch: "
                         f"{last.error}")
    return _VALID


def _check_call(description: Mapping[str, Any] | None, call: Mapping[str, Any], answer: Mapping[str, Any],
                dots: bool) -> Verdict:
    """BFCL's ``simple_function_checker``: one decoded call against one possible answer."""
    if description is None:
        return _fail("simple_function_checker:wrong_func_name",
                     f"no function description named {next(iter(answer))!r}")
    possible: Mapping[str, list[Any]] = next(iter(answer.values()))
    name = str(description["name"])
    if dots:
        name = name.replace(".", "_")
    if name not in call:
        return _fail("simple_function_checker:wrong_func_name", f"function name {name!r} not found in model output")
    given = call[name]
    if not isinstance(given, Mapping):
        return _fail("simple_function_checker:wrong_func_name", f"{name}: arguments are not an object")
    parameters = description.get("parameters") or {}
    declared: Mapping[str, Any] = parameters.get("properties") or {}
    for param in parameters.get("required") or ():
        if param not in given:
            return _fail("simple_function_checker:missing_required", f"missing required parameter: {param!r}")
    for param, value in given.items():
        if param not in declared or param not in possible:
            return _fail("simple_function_checker:unexpected_param", f"unexpected parameter: {param!r}")
        verdict = _check_param(param, value, declared[param], possible[param])
        if not verdict.valid:
            return verdict
    for param, values in possible.items():
        if param not in given and _OPTIONAL not in values:
            return _fail("simple_function_checker:missing_optional",
                         f"optional parameter {param!r} not provided and not marked as optional")
    return _VALID


def _check_param(param: str, value: Any, declared: Mapping[str, Any], possible: list[Any]) -> Verdict:
    type_name = declared.get("type")
    if type_name not in PYTHON_TYPES:
        return _fail("type_error:unknown",
                     f"parameter {param!r}: type {type_name!r} is not one BFCL checks for Python; accepted: "
                     f"{', '.join(PYTHON_TYPES)}")
    expected = PYTHON_TYPES[type_name]
    nested: type | None = None
    if type_name in _NESTED:
        item_type = (declared.get("items") or {}).get("type")
        if item_type not in PYTHON_TYPES:
            return _fail("type_error:unknown", f"parameter {param!r}: items type {item_type!r} is not one BFCL "
                                               f"checks; accepted: {', '.join(PYTHON_TYPES)}")
        nested = PYTHON_TYPES[item_type]
    if type_name == "tuple" and type(value) is tuple:
        value = list(value)
    if type_name == "float" and type(value) is int:  # Python's own int -> float conversion
        value = float(value)
    typed = _type_check(param, value, possible, type_name, expected, nested)
    if not typed.valid:
        return typed.verdict
    if not typed.is_variable:
        if expected is dict:
            return _dict_check(param, value, possible)
        if expected is list and nested is dict:
            return _list_dict_check(param, value, possible)
        if expected is str:
            return _string_check(param, value, possible)
        if expected is list:
            return _list_check(param, value, possible)
    if value not in possible:
        return _fail("value_error:others", f"invalid value for parameter {param!r}: {value!r}; expected one of "
                                           f"{possible!r}")
    return _VALID


@dataclass(frozen=True)
class _Typed:
    valid: bool
    is_variable: bool = False
    verdict: Verdict = _VALID


def _answer_type(possible: Any) -> type | None:
    """The type of the first possible value that is not the optional mark (BFCL's ``get_possible_answer_type``)."""
    for item in possible:
        if item != _OPTIONAL:
            return type(item)
    return None


def _type_check(param: str, value: Any, possible: Any, type_name: str, expected: type,
                nested: type | None) -> _Typed:
    """BFCL's ``type_checker``: a value of the declared type (items too, one level), or of the possible answers'
    own type (a variable standing for the value)."""
    answer_type = _answer_type(possible)
    is_variable = answer_type is not None and answer_type is not expected
    elements: Any = value  # a list when the declared type is a nested one
    if type(value) is expected:
        if nested is None:
            return _Typed(True, is_variable)
        for item in possible:
            if not isinstance(item, list) or all(
                    _type_check(param, element, item, nested.__name__, nested, None).valid for element in elements):
                return _Typed(True, is_variable)
        return _Typed(False, verdict=_fail(
            "type_error:nested", f"nested type checking failed for parameter {param!r}: expected {type_name} of "
                                 f"{nested.__name__}, got {value!r}"))
    if answer_type is not None and type(value) is answer_type:
        return _Typed(True, True)
    return _Typed(False, verdict=_fail(
        "type_error:simple", f"incorrect type for parameter {param!r}: expected {type_name}, got "
                             f"{type(value).__name__} ({value!r})"))


def _standard(item: Any) -> Any:
    return standardize(item) if type(item) is str else item


def _string_check(param: str, value: str, possible: list[Any]) -> Verdict:
    if standardize(value) not in [standardize(item) for item in possible if type(item) is str]:
        return _fail("value_error:string", f"invalid value for parameter {param!r}: {value!r}; expected one of "
                                           f"{possible!r} (case insensitive)")
    return _VALID


def _list_check(param: str, value: list[Any], possible: list[Any]) -> Verdict:
    # A possible value that is a string is read element by element, as BFCL's loop over it does ("" is [], so an
    # empty list matches the optional mark).
    options = [[_standard(element) for element in item] for item in possible if isinstance(item, list | str)]
    if [_standard(element) for element in value] not in options:
        return _fail("value_error:list/tuple", f"invalid value for parameter {param!r}: {value!r}; expected one of "
                                               f"{possible!r}")
    return _VALID


def _dict_check(param: str, value: Mapping[str, Any], possible: list[Any]) -> Verdict:
    """BFCL's ``dict_checker``: every key of the model's dict allowed with an allowed value, every key it leaves
    out optional, against some possible dict."""
    verdict = _fail("dict_checker:unclear", f"parameter {param!r}: no possible dict to compare with")
    for answer in possible:
        if answer == _OPTIONAL:
            continue
        verdict = _one_dict(value, answer)
        if verdict.valid:
            return verdict
    return verdict


def _one_dict(value: Mapping[str, Any], answer: Mapping[str, Any]) -> Verdict:
    for key, item in value.items():
        if key not in answer:
            return _fail("value_error:dict_key", f"unexpected dict key parameter: {key!r}")
        if _standard(item) not in [_standard(option) for option in answer[key]]:
            return _fail("value_error:dict_value", f"invalid value for dict key {key!r}: {item!r}; expected one of "
                                                   f"{answer[key]!r}")
    for key, options in answer.items():
        if key not in value and _OPTIONAL not in options:
            return _fail("value_error:dict_key", f"missing dict key parameter: {key!r}")
    return _VALID


def _list_dict_check(param: str, value: list[Any], possible: list[Any]) -> Verdict:
    """BFCL's ``list_dict_checker``: the dicts in order, each against the same position of some possible list."""
    verdict = _fail("list_dict_checker:unclear", f"parameter {param!r}: no possible list of dicts to compare with")
    for answer in possible:
        if not isinstance(answer, list | str):
            continue
        if len(value) != len(answer):
            verdict = _fail("value_error:list_dict_count", f"parameter {param!r}: wrong number of dictionaries")
            continue
        for element, expected in zip(value, answer, strict=True):
            verdict = _dict_check(param, element, [expected]) if isinstance(element, Mapping) else _fail(
                "value_error:dict_value", f"parameter {param!r}: {element!r} is not a dict")
            if not verdict.valid:
                break
        else:
            return _VALID
    return verdict
