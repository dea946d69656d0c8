"""The CEL type check agrees with evaluation: what it accepts evaluates to a value of the type it said (numbers
compared across types included), what it refuses is named with its position and types."""

from __future__ import annotations

from typing import Any

import celpy
import pytest
from celpy import celtypes

from evalsi.cel import (
    BOOL,
    DOUBLE,
    DYN,
    INT,
    STRING,
    Declarations,
    Function,
    check_expression,
    describe_problems,
    list_of,
    map_of,
    object_type,
    parse_expression,
    program,
)

ITEM = object_type("item", {"name": STRING, "score": DOUBLE, "count": INT, "ok": BOOL})
DECLARATIONS = Declarations(
    variables={"item": ITEM, "items": list_of(ITEM), "labels": map_of(STRING, DYN), "limit": INT, "ratio": DOUBLE},
    functions={"weight": Function((STRING,), DOUBLE)},
)
ACTIVATION: dict[str, Any] = {
    "item": {"name": "a", "score": 0.75, "count": 3, "ok": True},
    "items": [{"name": "a", "score": 0.75, "count": 3, "ok": True}, {"name": "b", "score": 0.25, "count": 1,
                                                                      "ok": False}],
    "labels": {"team": "search", "size": 3},
    "limit": 2,
    "ratio": 0.5,
}
_CEL_CLASS: dict[str, type | tuple[type, ...]] = {
    "bool": celtypes.BoolType, "int": celtypes.IntType, "string": celtypes.StringType, "list": celtypes.ListType,
    "double": (celtypes.DoubleType, float),  # cel-python's arithmetic on doubles returns plain floats
}


def evaluate(expression: str) -> object:
    activation = {name: celpy.json_to_cel(value) for name, value in ACTIVATION.items()}
    return program(parse_expression(expression), {"weight": lambda name: celtypes.DoubleType(len(name))}).evaluate(
        activation
    )


@pytest.mark.parametrize(
    ("expression", "kind", "value"),
    [
        ("item.count >= 0.5", "bool", True),  # int against double: compared as numbers
        ("item.score > limit", "bool", False),
        ("item.count == 3.0 && 3u == item.count", "bool", True),
        ("item.count + limit", "int", 5),
        ("item.score * ratio", "double", 0.375),
        ("double(item.count) / 2.0", "double", 1.5),
        ("items.all(i, i.score > 0)", "bool", True),
        ("items.exists(i, i.ok && i.count >= 2.5)", "bool", True),
        ("items.filter(i, i.ok).size() == 1", "bool", True),
        ("items.map(i, i.count)", "list", [3, 1]),
        ("size(items) > 1 ? item.name : 'none'", "string", "a"),
        ("labels['team'] == 'search' && labels.size >= 3", "bool", True),
        ("item.name.startsWith('a') && 'a' in ['a', 'b']", "bool", True),
        ("weight('abc') >= 3", "bool", True),
        ("has(item.name) && !item.ok == false", "bool", True),
        ("-item.score < 0", "bool", True),
    ],
)
def test_what_the_check_accepts_evaluates_to_the_type_it_said(expression: str, kind: str, value: object) -> None:
    checked, problems = check_expression(parse_expression(expression), DECLARATIONS, expression)
    assert problems == [] and str(checked).split("(")[0] == kind
    result = evaluate(expression)
    assert isinstance(result, _CEL_CLASS[kind]) and result == value


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("item.score == 'high'", "== compares double with string, which are never equal (in \"item.score == 'high'\" "
                                 "at column 12)"),
        ("item.count + 0.5 > 1", "+ mixes int and double, which CEL does not do in arithmetic; convert one side, "
                                 "e.g. double(item.count) (in 'item.count + 0.5 > 1' at column 12)"),
        ("item.scor > 1", "item has no field 'scor'; did you mean score? accepted: name, score, count, ok "
                          "(in 'item.scor > 1' at column 6)"),
        ("items.all(i, i.score)", "the condition of all() must be a bool; 'i.score' is a double "
                                  "(in 'items.all(i, i.score)' at column 14)"),
        ("weight(3) > 1", "weight() takes a string; '3' is an int (in 'weight(3) > 1' at column 8)"),
        ("other > 1", "unknown name 'other'; this expression can use item, items, labels, limit, ratio, weight() "
                      "(in 'other > 1' at column 1)"),
        ("item.ok ? 1 : 'x'", "the two branches of ?: have different types, int and string "
                              "(in \"item.ok ? 1 : 'x'\" at column 1)"),
        ("1 in [1.0]", "in looks for an int among list(double) (in '1 in [1.0]' at column 3)"),
        ("item.name < 3", "< cannot order string and int (in 'item.name < 3' at column 11)"),
        ("!item.count", "! needs a bool; 'item.count' is an int (in '!item.count' at column 2)"),
    ],
)
def test_what_the_check_refuses_is_named_with_its_position_and_types(expression: str, message: str) -> None:
    _, problems = check_expression(parse_expression(expression), DECLARATIONS, expression)
    assert describe_problems(expression, problems) == [message]


def test_cel_python_alone_refuses_the_mixed_comparison_the_check_accepts() -> None:
    # Why NUMERIC_COMPARISONS exists: without it the accepted `n >= 0.5` failed only when evaluated.
    plain = celpy.Environment()
    with pytest.raises(celpy.CELEvalError, match="no matching overload"):
        plain.program(plain.compile("3 >= 0.5")).evaluate({})
    assert evaluate("3 >= 0.5") == celtypes.BoolType(True)


def test_an_expression_nested_past_the_bound_is_a_problem_not_a_recursion_error() -> None:
    """A hostile caller's 400 nested parentheses (well within the 4,096-character limit) get a problem, which the
    api answers with a 400, not the checker's RecursionError (a 500)."""
    from evalsi.cel.checker import MAX_TREE_DEPTH
    from evalsi.errors import BadInputError
    from evalsi.runs.gates import compile_gate

    fine = "(" * 40 + "item.score > 0.5" + ")" * 40
    kind, problems = check_expression(parse_expression(fine), DECLARATIONS, fine)
    assert (kind, problems) == (BOOL, [])
    deep = "(" * 400 + "item.score > 0.5" + ")" * 400
    kind, problems = check_expression(parse_expression(deep), DECLARATIONS, deep)
    assert [p.message.split(" (")[0] for p in problems] == ["nests too deeply to check"]
    assert f"at most {MAX_TREE_DEPTH}" in problems[0].message
    with pytest.raises(BadInputError, match="nests too deeply to check"):
        compile_gate("(" * 400 + "metric('exact-match').mean >= 0.5" + ")" * 400)
