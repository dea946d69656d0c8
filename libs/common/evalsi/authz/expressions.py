"""CEL for authorization: what role conditions, rules and ``cel:`` subjects may name, typed, compiled once at load.

The variables follow agentgateway: ``jwt`` (the verified claims), ``apiKey`` (the key's name and labels, never the
key), ``principal``, ``request`` (method, action, protocol, headers without credentials), ``resource`` (the
action table's attributes) and ``source`` (the peer address). The declared types let the checker refuse
``resource.target.modle`` or a condition that is not a bool before a request is ever decided.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import celpy
from celpy import celtypes

from evalsi.auth.principal import Principal, visible_headers
from evalsi.authz.decision import AccessRequest
from evalsi.cel import (
    BOOL,
    DOUBLE,
    DYN,
    INT,
    STRING,
    Declarations,
    check_expression,
    describe_problems,
    list_of,
    map_of,
    object_type,
    parse_expression,
    program,
    require_bool,
)
from evalsi.cel.direct import compile_direct
from evalsi.errors import BadInputError

# Longest expression accepted in a condition, rule or subject: the same bound as gates and selectors.
MAX_EXPRESSION = 4096

_LABELS = map_of(STRING, STRING)
_STRINGS = list_of(STRING)
_RESOURCE = object_type("resource", {
    "project": STRING, "labels": _LABELS, "runs_code": BOOL,
    "evaluators": _STRINGS, "judge": STRING, "judges": _STRINGS,
    "target": object_type("target", {"kind": STRING, "connector": STRING, "model": STRING, "connection": STRING}),
    "dataset": STRING, "trials": INT,
    "budget": object_type("budget", {"usd": DOUBLE, "tokens": INT, "wall_clock_s": DOUBLE}),
    "run": object_type("run", {"id": STRING, "name": STRING, "created_by": STRING, "labels": _LABELS}),
    "runs": _STRINGS,
    "policy": object_type("policy", {"name": STRING, "selector": STRING, "evaluators": _STRINGS,
                                     "promotion": STRING}),
    "service": STRING, "services": _STRINGS,
    "trace": object_type("trace", {"id": STRING}),
    "tenant": STRING,
    "role": object_type("role", {"name": STRING, "permissions": _STRINGS, "inherits": _STRINGS,
                                 "condition": STRING, "install_wide": BOOL}),
    "binding": object_type("binding", {"id": STRING, "role": STRING, "subject": STRING}),
    "key": object_type("key", {"name": STRING, "roles": _STRINGS, "labels": _LABELS}),
    "permissions": _STRINGS,
})
_PRINCIPAL = object_type("principal", {
    "id": STRING, "kind": STRING, "provider": STRING, "subject": STRING, "name": STRING, "email": STRING,
    "email_verified": BOOL, "groups": _STRINGS, "roles": _STRINGS, "labels": _LABELS,
})
_REQUEST = object_type("request", {"method": STRING, "action": STRING, "protocol": STRING, "headers": _LABELS})
DECLARATIONS = Declarations(variables={
    "jwt": map_of(STRING, DYN),
    "apiKey": object_type("apiKey", {"name": STRING, "labels": _LABELS}),
    "principal": _PRINCIPAL,
    "request": _REQUEST,
    "resource": _RESOURCE,
    "source": object_type("source", {"address": STRING}),
})


class Expression:
    """A checked, compiled CEL expression; ``holds(activation)`` is True, False, or the evaluation error.

    Simple expressions run on the direct evaluator (``evalsi.cel.direct``); the others, and any value it does
    not compare exactly, on cel-python.
    """

    def __init__(self, text: str, where: str, what: str) -> None:
        self.text = text.strip()
        if not self.text:
            raise BadInputError(f"{where}: {what} is empty; write a CEL expression that is true or false")
        if len(self.text) > MAX_EXPRESSION:
            raise BadInputError(f"{where}: {what} is {len(self.text)} characters; at most {MAX_EXPRESSION}")
        try:
            tree = parse_expression(self.text)
        except BadInputError as exc:
            raise BadInputError(f"{where}: {exc}") from None
        kind, type_problems = check_expression(tree, DECLARATIONS, self.text)
        problems = describe_problems(self.text, type_problems)
        not_bool = require_bool(kind, self.text, what)
        if not_bool and not type_problems:
            problems.append(not_bool)
        if problems:
            raise BadInputError(f"{where}: " + "; ".join(problems))
        self._program = program(tree)
        self._direct = compile_direct(tree)

    @property
    def direct(self) -> bool:
        """Whether the expression is in the direct evaluator's subset."""
        return self._direct is not None

    def holds(self, activation: Activation) -> bool | Exception:
        """True or False, or the error it failed with (a rule that fails to evaluate does not match)."""
        if self._direct is not None:
            try:
                return self._direct(activation.plain)
            except Exception:  # Undecided, or a value of a shape it does not expect: cel-python's answer stands
                pass
        return self.holds_in_cel(activation)

    def holds_in_cel(self, activation: Activation) -> bool | Exception:
        """The same answer from cel-python alone."""
        try:
            value = self._program.evaluate(dict(activation.cel))
        except Exception as exc:  # CELEvalError, or a type mismatch inside cel-python
            return exc
        if isinstance(value, Exception):
            return value
        if isinstance(value, celtypes.BoolType | bool):
            return bool(value)
        return TypeError(f"evaluated to {type(value).__name__}, not a bool")


def principal_variables(principal: Principal, roles: list[str]) -> dict[str, Any]:
    return {
        "id": principal.id, "kind": principal.kind, "provider": principal.provider, "subject": principal.subject,
        "name": principal.name, "email": principal.email, "email_verified": principal.email_verified,
        "groups": list(principal.groups), "roles": roles, "labels": dict(principal.labels),
    }



class Activation:
    """The CEL variables of one decision, built on first use (most decisions need none): ``plain`` Python values
    for the direct evaluator, ``cel`` values for cel-python. ``roles`` are the principal's roles in the project."""

    def __init__(self, request: AccessRequest, roles: list[str]) -> None:
        self._request, self._roles = request, roles
        self._plain: dict[str, Any] | None = None
        self._cel: dict[str, Any] | None = None

    @property
    def plain(self) -> dict[str, Any]:
        if self._plain is None:
            self._plain = _variables(self._request, self._roles)
        return self._plain

    @property
    def cel(self) -> dict[str, Any]:
        if self._cel is None:
            self._cel = {name: celpy.json_to_cel(value) for name, value in self.plain.items()}
        return self._cel


def _variables(request: AccessRequest, roles: list[str]) -> dict[str, Any]:
    principal = request.principal
    api_key = {"name": principal.key_name, "labels": dict(principal.labels) if principal.kind == "apikey" else {}}
    # The resource always has project, labels and runs_code, whatever the caller filled in.
    resource = {"labels": {}, "runs_code": False, **request.resource, "project": request.project}
    return {
        "jwt": _json(principal.claims),
        "apiKey": api_key,
        "principal": principal_variables(principal, roles),
        "request": {"method": request.method, "action": request.action, "protocol": request.protocol,
                    "headers": visible_headers(request.headers)},
        "resource": resource,
        "source": {"address": request.source},
    }


def _json(value: Any) -> Any:
    """Claims as JSON values cel-python accepts (tuples from a mapper become lists)."""
    if isinstance(value, Mapping):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    return value
