"""Parsing and evaluating CEL with cel-python: one environment, syntax errors as ``BadInputError``, and programs
that compare numbers across types as the checker (evalsi.cel.checker) accepts."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

import celpy
from lark import Tree

from evalsi.cel.numbers import NUMERIC_COMPARISONS
from evalsi.errors import BadInputError


@cache
def _environment() -> celpy.Environment:
    """Built on first use, not at import: building cel-python's parser is ~10% of what `evalsi serve` imports before
    its services can answer, and most services never parse CEL."""
    return celpy.Environment()


def parse_expression(expression: str) -> Tree:
    """The parse tree of an expression; a syntax error is a ``BadInputError`` quoting it with the column."""
    try:
        tree: Tree = _environment().compile(expression)
    except celpy.CELParseError as exc:
        column = getattr(exc, "column", None)
        where = f" at column {column}" if column else ""
        near = f" (near {expression[column - 1:column + 9]!r})" if column and column <= len(expression) else ""
        raise BadInputError(f"invalid CEL in {expression!r}: syntax error{where}{near}") from None
    return tree


def program(tree: Tree, functions: Mapping[str, Callable[..., Any]] | None = None) -> Any:
    """A runnable program: the expression's own functions over the numeric comparisons."""
    return _environment().program(tree, functions={**NUMERIC_COMPARISONS, **(functions or {})})
