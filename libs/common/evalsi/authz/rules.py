"""Global CEL rules (``authorization.rules``): install-wide ``allow``, ``deny`` and ``require`` with agentgateway's
semantics. A rule that fails to evaluate counts as not matched: an erroring ``deny`` does not deny, an erroring
``require`` does not hold (so it denies). Restrictions therefore belong in ``require`` rules."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from evalsi.authz.expressions import Activation, Expression
from evalsi.errors import BadInputError

RuleKind = Literal["allow", "deny", "require"]
RULE_KINDS: tuple[RuleKind, ...] = ("deny", "require", "allow")


@dataclass(frozen=True)
class Rule:
    kind: RuleKind
    expression: Expression
    origin: str

    def describe(self) -> str:
        return f"{self.kind} rule {self.origin}: {self.expression.text}"

    def evaluate(self, activation: Activation) -> bool | Exception:
        return self.expression.holds(activation)


@dataclass(frozen=True)
class RuleSet:
    deny: tuple[Rule, ...] = ()
    require: tuple[Rule, ...] = ()
    allow: tuple[Rule, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.deny or self.require or self.allow)


def parse_rules(raw: Sequence[Any], path: str = "authorization.rules") -> RuleSet:
    """Each item is a mapping with exactly one of ``allow``, ``deny``, ``require`` (a CEL expression), and an
    optional ``description``."""
    by_kind: dict[RuleKind, list[Rule]] = {"deny": [], "require": [], "allow": []}
    for index, item in enumerate(raw):
        where = f"{path}[{index}]"
        if not isinstance(item, Mapping):
            raise BadInputError(f"{where}: a rule is a mapping with one of allow, deny or require, e.g. "
                                f"{{require: '!resource.runs_code'}}")
        unknown = sorted(set(item) - {"allow", "deny", "require", "description"})
        if unknown:
            raise BadInputError(f"{where}: unknown key {unknown[0]!r}; accepted: allow, deny, require, description")
        kinds = [kind for kind in RULE_KINDS if kind in item]
        if len(kinds) != 1:
            raise BadInputError(f"{where}: a rule has exactly one of allow, deny or require"
                                + (f"; this one has {', '.join(kinds)}" if kinds else ""))
        kind = kinds[0]
        text = item[kind]
        if not isinstance(text, str):
            raise BadInputError(f"{where}.{kind}: a CEL expression as a string, got {type(text).__name__}")
        by_kind[kind].append(Rule(kind, Expression(text, f"{where}.{kind}", f"a {kind} rule"), where))
    return RuleSet(tuple(by_kind["deny"]), tuple(by_kind["require"]), tuple(by_kind["allow"]))
