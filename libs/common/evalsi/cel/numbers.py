"""Comparisons across int, uint and double at evaluation time, as the checker accepts them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from celpy import celtypes
from celpy.evaluation import base_functions


def _promoting(name: str) -> Callable[[Any, Any], Any]:
    base = base_functions[name]

    def compare(left: Any, right: Any) -> Any:
        if _mixed_numbers(left, right):
            return base(celtypes.DoubleType(left), celtypes.DoubleType(right))
        return base(left, right)

    compare.__name__ = f"promoting{name}"
    return compare


def _mixed_numbers(left: Any, right: Any) -> bool:
    def number(value: Any) -> str | None:
        if isinstance(value, celtypes.BoolType):
            return None
        if isinstance(value, celtypes.DoubleType):
            return "double"
        if isinstance(value, celtypes.IntType | celtypes.UintType):
            return "integer"
        return None

    kinds = {number(left), number(right)}
    return kinds == {"double", "integer"}


# Comparisons across int, uint and double, as CEL defines them and the checker accepts: the integer side becomes
# a double. Given to every program as overrides of cel-python's operators.
NUMERIC_COMPARISONS: Mapping[str, Callable[[Any, Any], Any]] = {
    name: _promoting(name) for name in ("_<_", "_<=_", "_>_", "_>=_", "_==_", "_!=_")
}
