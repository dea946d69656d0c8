"""Comparisons across int, uint and double at evaluation time, as the checker accepts them."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from celpy import celtypes
from celpy.evaluation import base_functions

_EXACT = {"_<_": operator.lt, "_<=_": operator.le, "_>_": operator.gt, "_>=_": operator.ge, "_==_": operator.eq,
          "_!=_": operator.ne}


def _promoting(name: str) -> Callable[[Any, Any], Any]:
    base = base_functions[name]
    exact = _EXACT[name]

    def compare(left: Any, right: Any) -> Any:
        kinds = {_number(left), _number(right)}
        if None in kinds or len(kinds) != 2:
            return base(left, right)  # not a mixed pair of numbers: cel-python's own rules
        if "double" in kinds:
            return base(celtypes.DoubleType(left), celtypes.DoubleType(right))
        return celtypes.BoolType(exact(int(left), int(right)))  # int against uint: exactly, as Python ints

    compare.__name__ = f"promoting{name}"
    return compare


def _number(value: Any) -> str | None:
    if isinstance(value, celtypes.BoolType):
        return None
    if isinstance(value, celtypes.DoubleType):
        return "double"
    if isinstance(value, celtypes.UintType):
        return "uint"
    if isinstance(value, celtypes.IntType):
        return "int"
    return None


# Comparisons across int, uint and double, as CEL defines them and the checker accepts: against a double the
# integer becomes a double; int against uint compares exactly. Given to every program as overrides of
# cel-python's operators.
NUMERIC_COMPARISONS: Mapping[str, Callable[[Any, Any], Any]] = {
    name: _promoting(name) for name in ("_<_", "_<=_", "_>_", "_>=_", "_==_", "_!=_")
}
