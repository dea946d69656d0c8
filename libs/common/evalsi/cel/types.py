"""CEL types as the checker (evalsi.cel.checker) sees them, and the problems it reports."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class CelType:
    """A CEL type: a primitive (``name`` alone), ``list`` / ``map`` with ``params``, or an object with ``fields``
    and ``methods`` (``metric('x')``, a span)."""

    name: str
    params: tuple[CelType, ...] = ()
    fields: Mapping[str, CelType] | None = field(default=None, compare=False)
    methods: Mapping[str, Function] | None = field(default=None, compare=False)

    def __str__(self) -> str:
        if self.name == "list":
            return f"list({self.params[0]})"
        if self.name == "map":
            return f"map({self.params[0]}, {self.params[1]})"
        return self.name


BOOL, INT, UINT, DOUBLE = CelType("bool"), CelType("int"), CelType("uint"), CelType("double")
STRING, BYTES, NULL, DYN = CelType("string"), CelType("bytes"), CelType("null"), CelType("dyn")
DURATION, TIMESTAMP, TYPE = CelType("duration"), CelType("timestamp"), CelType("type")
ERROR = CelType("error")  # a subexpression already reported: accepted everywhere, so one mistake is one message
NUMBERS = frozenset({"int", "uint", "double"})
ORDERED = frozenset({"int", "uint", "double", "string", "bytes", "bool", "duration", "timestamp"})


def list_of(element: CelType) -> CelType:
    return CelType("list", (element,))


def map_of(key: CelType, value: CelType) -> CelType:
    return CelType("map", (key, value))


def object_type(name: str, fields: Mapping[str, CelType], methods: Mapping[str, Function] | None = None) -> CelType:
    return CelType(name, (), dict(fields), dict(methods or {}))


@dataclass(frozen=True)
class Function:
    """A function (or method) signature: the types of its arguments and of its result."""

    params: tuple[CelType, ...]
    result: CelType


@dataclass(frozen=True)
class Declarations:
    """What an expression may name: its variables and its functions beyond CEL's own."""

    variables: Mapping[str, CelType] = field(default_factory=dict)
    functions: Mapping[str, Function] = field(default_factory=dict)


@dataclass(frozen=True)
class CelProblem:
    line: int
    column: int
    message: str

    def where(self, expression: str) -> str:
        """``column 18``, or ``line 2, column 5`` in an expression of several lines."""
        return f"line {self.line}, column {self.column}" if "\n" in expression.strip() else f"column {self.column}"


@dataclass(frozen=True)
class Call:
    """A call of a declared function written in an expression, with its literal arguments (None if not literal)."""

    name: str
    args: tuple[Any, ...]
    line: int
    column: int
    receiver: Call | None = None  # for a method on a call's result: metric('a').passAtK(3)


def describe_problems(expression: str, problems: Sequence[CelProblem]) -> list[str]:
    """``in "<expression>" at column 18: ...`` for each problem."""
    return [f"{problem.message} (in {expression.strip()!r} at {problem.where(expression)})" for problem in problems]


def require_bool(kind: CelType, expression: str, what: str) -> str | None:
    """The problem when an expression's type is not true/false (``dyn`` is checked when evaluated)."""
    if kind.name in ("bool", "dyn", "error"):
        return None
    return f"{what} must be true or false; {expression.strip()!r} is {article(kind)}"


def article(kind: CelType | str) -> str:
    """``an int``, ``a double``: the type with its article, as messages say it."""
    text = str(kind)
    return f"an {text}" if text[:1] in "aeiou" else f"a {text}"


def accepts(expected: CelType, actual: CelType) -> bool:
    if "dyn" in (expected.name, actual.name) or actual.name == "error":
        return True
    if expected.name != actual.name:
        return False
    if expected.params and actual.params:
        return all(accepts(e, a) for e, a in zip(expected.params, actual.params, strict=True))
    return True
