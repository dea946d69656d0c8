"""The direct evaluator agrees with cel-python on every expression and every activation here: values, errors
(missing members, absorbed or not by && and ||) and the cases it hands back (mixed types, nulls)."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from evalsi.auth.principal import Principal
from evalsi.authz.decision import AccessRequest
from evalsi.authz.expressions import Activation, Expression
from evalsi.errors import BadInputError

EXPRESSIONS = [
    'request.action == "runs.create" && resource.target.connector == "anthropic" && '
    '!("llm-spenders" in principal.groups)',
    '!resource.runs_code || "sandbox-users" in principal.groups',
    'request.action != "runs.cancel" || principal.id == resource.run.created_by || "admin" in principal.roles',
    'jwt.iss == "https://token.actions.githubusercontent.com" && jwt.repository == "acme/agent" && '
    'request.action in ["runs.create", "runs.read"] && resource.project == "agent-ci"',
    'resource.target.model in ["qwen3", "claude-opus-5-5"] && resource.labels.app == "checkout"',
    'resource.labels["app"] == "checkout"',
    'request.headers["x-team"] == "a" || false',
    "resource.trials == 3",
    "resource.trials != 3",
    "jwt.n == 3",
    'jwt.n == "3"',
    "jwt.flag == true",
    "jwt.flag",
    "!jwt.flag",
    "jwt.missing == 1 || true",
    "true || jwt.missing == 1",
    "jwt.missing == 1 && false",
    "false && jwt.missing == 1",
    "jwt.missing == 1 || false",
    "jwt.missing == 1 && true",
    "!(jwt.missing == 1)",
    '"a" in jwt.tags',
    '"a" in jwt.mixed',
    "3 in jwt.mixed",
    '"x" in jwt.obj',
    '"x" in request.headers',
    "jwt.none == 1",
    'jwt.obj.x == "y"',
    'principal.kind == "user" && principal.email_verified',
    "resource.runs_code == false",
    'jwt.n == 3 && resource.runs_code',
    'apiKey.labels.source == "gw"',
    'source.address == "10.0.0.1"',
    "jwt.n == 0x3",
    "resource.trials == -3 || jwt.n != 3",
    "'it\\'s' == jwt.iss || r\"a\" == jwt.iss",
    'jwt.iss == """x"""',
    # Outside the subset: cel-python alone, through the same holds().
    'principal.groups.exists(g, g.startsWith("eng"))',
    "size(principal.groups) > 1",
    "resource.trials <= 3",
    'has(resource.target) && resource.target.model == "qwen3"',
]

CLAIMS: list[dict[str, Any]] = [
    {},
    {"iss": "https://token.actions.githubusercontent.com", "repository": "acme/agent", "n": 3, "flag": True,
     "tags": ["a", "b"], "mixed": ["a", 3], "obj": {"x": "y"}, "none": None},
    {"n": "3", "flag": "yes", "tags": [], "mixed": [True, 1], "obj": ["x"], "none": 1},
    {"n": 3.0, "flag": False, "tags": ["b"], "obj": {}},
]
RESOURCES: list[dict[str, Any]] = [
    {},
    {"target": {"connector": "anthropic", "model": "qwen3"}, "labels": {"app": "checkout"}, "trials": 3,
     "runs_code": True, "run": {"created_by": "corp/alice"}},
    {"target": {"connector": "openai", "model": "gpt"}, "labels": {"app": "payments"}, "trials": 5,
     "run": {"created_by": "corp/bob"}},
]
PRINCIPALS = [
    Principal(kind="user", provider="corp", subject="alice", groups=("eng", "llm-spenders"), email_verified=True),
    Principal(kind="apikey", provider="apikey", subject="k", key_name="k", labels={"source": "gw"}),
]
ACTIONS = ["runs.create", "runs.cancel", "runs.read"]


@pytest.mark.parametrize("text", EXPRESSIONS)
def test_direct_and_cel_python_agree(text: str) -> None:
    expression = Expression(text, "test", "a rule")
    for claims, resource, principal, action in itertools.product(CLAIMS, RESOURCES, PRINCIPALS, ACTIONS):
        request = AccessRequest(Principal(**{**principal.__dict__, "claims": claims}), action, "agent-ci",
                                resource, headers={"x-team": "a"}, source="10.0.0.1")
        activation = Activation(request, ["admin"] if principal.kind == "user" else [])
        direct, slow = expression.holds(activation), expression.holds_in_cel(activation)
        where = (text, claims, resource, principal.kind, action)
        if isinstance(slow, Exception):
            assert isinstance(direct, Exception), (where, direct, slow)
        else:
            assert direct is slow, (where, direct, slow)


def test_the_rules_of_section_17_run_directly() -> None:
    for text in EXPRESSIONS[:5]:
        assert Expression(text, "test", "a rule").direct, text
    assert not Expression(EXPRESSIONS[-1], "test", "a rule").direct


def _random_expression(rng: random.Random, depth: int) -> str:
    """A random expression of the direct evaluator's subset over dyn claims and typed fields."""
    if depth == 0 or rng.random() < 0.3:
        left = rng.choice(["jwt.a", "jwt.b", "jwt.obj.x", "jwt.list", "request.action", "resource.labels.app",
                           "principal.subject", "jwt.missing"])
        right = rng.choice(['"x"', '"runs.read"', "1", "2", "true", "false", '["x", "y"]', "[1, 2]", "jwt.a",
                            "jwt.list", "jwt.obj"])
        op = rng.choice(["==", "!=", "in"])
        return f"{left} {op} {right}"
    form = rng.choice(["and", "or", "not", "paren"])
    if form == "not":
        return f"!({_random_expression(rng, depth - 1)})"
    if form == "paren":
        return f"({_random_expression(rng, depth - 1)})"
    joiner = " && " if form == "and" else " || "
    return _random_expression(rng, depth - 1) + joiner + _random_expression(rng, depth - 1)


RANDOM_CLAIMS: list[dict[str, Any]] = [
    {},
    {"a": "x", "b": 1, "obj": {"x": "x"}, "list": ["x", "y"]},
    {"a": 1, "b": True, "obj": {"y": 1}, "list": [1, "x"]},
    {"a": None, "b": "y", "obj": "x", "list": []},
    {"a": True, "b": 2.0, "obj": {"x": 2}, "list": [True]},
]


def test_direct_and_cel_python_agree_on_random_expressions() -> None:
    rng = random.Random(20261202)
    checked = decided = 0
    while checked < 150:
        text = _random_expression(rng, 3)
        try:
            expression = Expression(text, "test", "a rule")
        except BadInputError:
            continue  # a type the checker refuses: never evaluated
        checked += 1
        for claims in RANDOM_CLAIMS:
            principal = Principal(kind="user", provider="corp", subject="x", claims=claims)
            activation = Activation(AccessRequest(principal, "runs.read", "p", {"labels": {"app": "x"}}), [])
            direct, slow = expression.holds(activation), expression.holds_in_cel(activation)
            if isinstance(slow, Exception):
                assert isinstance(direct, Exception), (text, claims, direct, slow)
            else:
                assert direct is slow, (text, claims, direct, slow)
                decided += 1
    assert decided > 200  # most evaluations give a value, not only errors
