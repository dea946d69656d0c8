"""What a policy's CEL may name, typed, and the check every expression passes before a policy is applied.

Selectors see ``resource``, ``span`` and ``trace`` (evalsi.policy.selection); a cascade stage's ``when`` and the
promotion condition see ``scores`` and ``score(name)`` (evalsi.policy.cascade); alert rules read a window's
``mean``, ``std``, ``ci_low``, ``ci_high`` (doubles) and ``n`` (an int) of a metric (evalsi.policy.windows).
Values whose type only the trace knows (resource and span attributes, trace metadata) are ``dyn``.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from evalsi.cel import (
    BOOL,
    DOUBLE,
    DYN,
    INT,
    STRING,
    Declarations,
    Function,
    calls,
    check_expression,
    describe_problems,
    list_of,
    map_of,
    object_type,
    parse_expression,
    require_bool,
)
from evalsi.errors import BadInputError

_ATTRIBUTES = map_of(STRING, DYN)
_SPAN = object_type("span", {
    "id": STRING, "parent_id": STRING, "name": STRING, "type": STRING, "model": STRING, "tool": STRING,
    "error": BOOL, "duration_s": DOUBLE, "attributes": _ATTRIBUTES,
})
_TRACE = object_type("trace", {
    "id": STRING, "project": STRING, "service": STRING, "session_id": STRING, "error": BOOL, "error_count": INT,
    "span_count": INT, "latency_s": DOUBLE, "input_tokens": INT, "output_tokens": INT, "cost_usd": DOUBLE,
    "has_output": BOOL, "metadata": _ATTRIBUTES,
})
SELECTOR = Declarations(variables={"resource": _ATTRIBUTES, "span": _SPAN, "trace": _TRACE})

_SCORE = object_type("score", {"name": STRING, "stage": STRING, "value": DOUBLE, "passed": BOOL})
WHEN = Declarations(variables={"scores": list_of(_SCORE)}, functions={"score": Function((STRING,), DOUBLE)})

ALERT_FIGURES = ("mean", "std", "ci_low", "ci_high")
ALERT = Declarations(
    functions={**{figure: Function((STRING,), DOUBLE) for figure in ALERT_FIGURES}, "n": Function((STRING,), INT)}
)


def checked_expression(
    expression: str,
    declarations: Declarations,
    *,
    what: str,
    metrics: Sequence[str] | None = None,
    scope: str = "",
) -> Any:
    """The parse tree of a well-typed expression; one ``BadInputError`` lists every problem.

    ``metrics``, when given, are the metric names the expression's functions (``score('x')``, ``mean('x')``) may
    read; ``scope`` says where they come from (``earlier stages``, ``the cascade``).
    """
    tree = parse_expression(expression)
    kind, type_problems = check_expression(tree, declarations, expression)
    problems = describe_problems(expression, type_problems)
    not_bool = require_bool(kind, expression, what)
    if not_bool and not type_problems:
        problems.append(not_bool)
    if metrics is not None:
        problems += _name_problems(tree, declarations, expression, metrics, scope)
    if problems:
        raise BadInputError("; ".join(problems))
    return tree


def _name_problems(
    tree: Any, declarations: Declarations, expression: str, metrics: Sequence[str], scope: str
) -> list[str]:
    problems: list[str] = []
    for call in calls(tree, frozenset(declarations.functions)):
        if call.receiver is not None or not call.args:
            continue
        name = call.args[0]
        if not isinstance(name, str):
            problems.append(f"{call.name}() takes a metric's name as a quoted string, e.g. {call.name}('llm-judge') "
                            f"(in {expression.strip()!r} at column {call.column})")
        elif name not in metrics:
            close = difflib.get_close_matches(name, list(metrics), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}?" if close else f"{scope} score: {', '.join(metrics) or 'nothing'}"
            problems.append(f"{call.name}({name!r}): no metric {name!r} is scored by {scope}; {hint}")
    return problems
