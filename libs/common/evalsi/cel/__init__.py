"""CEL for gates, selectors, cascades, alerts and promotions: parsing, a static type check against declared
variables and functions (so a mistake is refused before a run or a policy starts), and evaluation that agrees
with the check."""

from evalsi.cel.checker import check_expression
from evalsi.cel.runtime import parse_expression, program
from evalsi.cel.tree import calls
from evalsi.cel.types import (
    BOOL,
    DOUBLE,
    DYN,
    INT,
    STRING,
    Call,
    CelProblem,
    CelType,
    Declarations,
    Function,
    describe_problems,
    list_of,
    map_of,
    object_type,
    require_bool,
)

__all__ = [
    "BOOL",
    "DOUBLE",
    "DYN",
    "INT",
    "STRING",
    "Call",
    "CelProblem",
    "CelType",
    "Declarations",
    "Function",
    "calls",
    "check_expression",
    "describe_problems",
    "list_of",
    "map_of",
    "object_type",
    "parse_expression",
    "program",
    "require_bool",
]
