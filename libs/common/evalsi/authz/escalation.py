"""No privilege escalation: a principal with ``access.manage`` in a project can create, change or bind only roles
whose every permission it holds there itself, under conditions at least as strict.

"At least as strict" is decided on the conditions' text: a held grant covers a new one when the held grant's
conditions are a subset of the new grant's (the same condition, or the granter's unconditioned). Install-wide
roles and bindings in every project (``*``) are the owner's alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evalsi.auth.principal import ANY_PROJECT, PermissionDenied
from evalsi.authz.authorizer import Authorizer, GranterView
from evalsi.authz.bindings import BindingDefinition
from evalsi.authz.roles import INSTALL, Grant, RoleDefinition


@dataclass(frozen=True)
class GrantRequest:
    """A role or binding about to be granted: ``what`` names it in messages; ``install_wide`` for a role usable in
    every project."""

    what: str
    project: str
    grants: tuple[Grant, ...]
    install_wide: bool = False


def uncovered(granter: GranterView, grants: Sequence[Grant]) -> list[str]:
    """Each permission of ``grants`` the granter's own grants do not cover, with why."""
    if granter.owner:
        return []
    problems: list[str] = []
    for grant in grants:
        needed = grant.condition_texts
        for permission in sorted(grant.permissions):
            held = [g for g in granter.grants if permission in g.permissions]
            if any(g.condition_texts <= needed for g in held):
                continue
            if not held:
                problems.append(f"{permission}: you do not hold it in {_scope(granter.project)}")
                continue
            extras: list[frozenset[str]] = [g.condition_texts - needed for g in held]
            fewest: frozenset[str] = min(extras, key=len)
            missing = sorted(fewest)
            shown = " and ".join(repr(text) for text in missing)
            problems.append(f"{permission}"
                            + (f" under {' and '.join(repr(t) for t in sorted(needed))}" if needed else
                               " without a condition")
                            + f": you hold it only when {shown}, so the grant must keep that condition")
    return problems


def check_grant(granter: GranterView, grant: GrantRequest) -> None:
    """Raise PermissionDenied naming every permission the granter cannot pass on."""
    if (grant.install_wide or grant.project == ANY_PROJECT) and not granter.owner:
        where = "an install-wide role" if grant.install_wide else "a binding in every project (*)"
        raise PermissionDenied(f"cannot grant {grant.what}: only an owner can create {where}")
    problems = list(dict.fromkeys(uncovered(granter, grant.grants)))  # a permission inherited twice: once
    if problems:
        raise PermissionDenied(f"cannot grant {grant.what} in {_scope(grant.project)}: it would grant what "
                               f"{granter.principal or 'you'} does not hold: " + "; ".join(problems))


def _scope(project: str) -> str:
    return "every project" if project == ANY_PROJECT else f"project {project}"


def role_grant(authorizer: Authorizer, definition: RoleDefinition) -> GrantRequest:
    """The grant a role being created or updated makes (its guardrails checked: BadInputError)."""
    install_wide = definition.project == INSTALL
    return GrantRequest(f"role {definition.name!r}", definition.project or ANY_PROJECT,
                        authorizer.role_grants(definition), install_wide)


def binding_grant(authorizer: Authorizer, definition: BindingDefinition) -> GrantRequest:
    """The grant a binding being created makes (unknown role or bad subject: BadInputError)."""
    return GrantRequest(f"role {definition.role!r} to {definition.subject}", definition.project,
                        authorizer.binding_grants(definition))
