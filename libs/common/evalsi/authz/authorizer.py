"""The authorizer: one decision per request, in agentgateway's order.

1. Any ``deny`` rule that matches denies.
2. Any ``require`` rule that does not hold denies (an error does not hold).
3. A role bound to the principal in the project (a binding, or a role the credential carries: an API key's
   roles, a token's ``role_claims``) whose permissions include the action and whose conditions hold allows.
   ``self.read`` is held by every authenticated principal.
4. Any ``allow`` rule that matches allows.
5. Otherwise the request is denied.

Deciding is pure and synchronous: every CEL expression was compiled at load, and the CEL variables are built
only when a rule, a condition or a ``cel:`` subject needs them. Roles and bindings from the database (AuthService)
come in as data through ``with_stored``, which returns a new authorizer: a change takes effect on the next
request that uses it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from evalsi.auth.principal import ANY_PROJECT, Principal
from evalsi.authz.bindings import Binding, BindingDefinition, BindingIndex, build_binding
from evalsi.authz.config import AuthorizationConfig, RbacConfig, load_authorization_config, load_rbac_config
from evalsi.authz.decision import AccessRequest, Decision
from evalsi.authz.expressions import Activation
from evalsi.authz.permissions import PERMISSIONS, SELF_READ
from evalsi.authz.roles import INSTALL, OWNER, Grant, RoleDefinition, RoleSet, build_roles
from evalsi.authz.rules import Rule


class _AllProjects:
    """Every project (``projects_readable`` of an owner or of a binding in ``*``)."""

    def __repr__(self) -> str:
        return "ALL"


ALL: Final = _AllProjects()


@dataclass(frozen=True)
class BoundRole:
    """A role a principal holds in a project, and where it comes from (a binding, or the credential)."""

    role: str
    project: str
    source: str


@dataclass(frozen=True)
class GranterView:
    """What a principal holds in one project, for the escalation check (``evalsi.authz.escalation``)."""

    principal: str
    project: str
    owner: bool
    grants: tuple[Grant, ...]


class Authorizer:
    def __init__(self, rbac: RbacConfig | None = None, authorization: AuthorizationConfig | None = None,
                 *, extra_bindings: Iterable[Binding] = ()) -> None:
        self.rbac = rbac or RbacConfig()
        self.rules = (authorization or AuthorizationConfig()).rules
        self.roles: RoleSet = self.rbac.roles
        self._authorization = authorization or AuthorizationConfig()
        self.bindings: tuple[Binding, ...] = (*self.rbac.bindings, *extra_bindings)
        self._index = BindingIndex.of(self.bindings)

    @classmethod
    def from_config(cls, rbac: Mapping[str, Any] | None, authorization: Mapping[str, Any] | None) -> Authorizer:
        """From evalsi.yaml's ``rbac`` and ``authorization`` sections (BadInputError naming the key at fault)."""
        return cls(load_rbac_config(rbac), load_authorization_config(authorization))

    def with_stored(self, roles: Iterable[RoleDefinition] = (),
                    bindings: Iterable[BindingDefinition] = ()) -> Authorizer:
        """This configuration plus roles and bindings stored in the database (checked like config ones)."""
        role_set = build_roles(roles, base=self.rbac.roles)
        rbac = RbacConfig(role_set, self.rbac.bindings, self.rbac.role_definitions, self.rbac.binding_definitions)
        stored = [build_binding(definition, role_set) for definition in bindings]
        return Authorizer(rbac, self._authorization, extra_bindings=stored)

    # --- deciding ------------------------------------------------------------------------------------------

    def decide(self, request: AccessRequest) -> Decision:
        """The decision, with what decided it and the trace of every rule and role considered.

        ``request.partial`` (the gate's first decision on an action whose resource the handler completes from the
        store): an expression that fails to evaluate is undecided instead of not matching, so only what the
        known attributes already decide denies; the handler's decision on the stored resource is the final one.
        """
        trace: list[str] = []
        action, project, principal, partial = request.action, request.project, request.principal, request.partial
        if action not in PERMISSIONS:
            return Decision(False, f"unknown action {action!r}", (f"{action!r} is not in the action table",),
                            final=True)
        bound = self.bound_roles(principal, project, request, trace)
        variables = Activation(request, [b.role for b in bound])
        pending: list[str] = []  # what only the stored resource can decide (partial decisions)

        for rule in self.rules.deny:
            result = rule.evaluate(variables)
            trace.append(_rule_line(rule, result))
            if result is True:
                return Decision(False, rule.describe(), tuple(trace), final=True)
        for rule in self.rules.require:
            result = rule.evaluate(variables)
            trace.append(_rule_line(rule, result))
            if partial and isinstance(result, Exception):
                pending.append(rule.describe())
            elif result is not True:
                return Decision(False, f"{rule.describe()} does not hold", tuple(trace), final=True)

        possible: list[str] = []
        for held in bound:
            for grant in self.roles.grants(held.role, project if project != ANY_PROJECT else INSTALL):
                if action not in grant.permissions:
                    continue
                outcome, failed = _conditions(grant, variables, partial)
                deciding = f"role {held.role} ({held.source})"
                if outcome == "holds":
                    trace.append(f"allow: {deciding} grants {action}" + _via(grant))
                    return _allowed(deciding, pending, trace)
                if outcome == "pending":
                    possible.append(deciding)
                trace.append(f"{deciding} grants {action}{_via(grant)} only when {failed}")
        if action == SELF_READ and principal.authenticated:
            deciding = "self.read: every authenticated principal holds it"
            trace.append(f"allow: {deciding}")
            return _allowed(deciding, pending, trace)

        for rule in self.rules.allow:
            result = rule.evaluate(variables)
            trace.append(_rule_line(rule, result))
            if result is True:
                return _allowed(rule.describe(), pending, trace)
            if partial and isinstance(result, Exception):
                possible.append(rule.describe())
        if possible:
            return _allowed(possible[0], [*pending, "the condition above"], trace)
        where = "any project" if not project else f"project {project}"
        deciding = f"default deny: no role or allow rule grants {action} in {where}"
        trace.append(deciding)
        return Decision(False, deciding, tuple(trace))

    def bound_roles(self, principal: Principal, project: str, request: AccessRequest | None = None,
                    trace: list[str] | None = None) -> list[BoundRole]:
        """The roles ``principal`` holds in ``project``: owner first, then bindings, then the credential's own.

        ``cel:`` subjects are evaluated with ``request``'s variables (a request for ``self.read`` without one).
        """
        notes = trace if trace is not None else []
        found: list[BoundRole] = []
        for binding in self._index.exact(principal):
            if binding.project in (project, ANY_PROJECT):
                found.append(BoundRole(binding.role, binding.project, _binding_source(binding)))
        found.extend(self._credential_roles(principal, project, notes))
        if self._index.has_cel:
            direct = [b.role for b in found]
            probe = request or AccessRequest(principal, SELF_READ, project)
            for binding, result in self._index.cel(Activation(probe, direct)):
                if binding.project not in (project, ANY_PROJECT):
                    continue
                if result is True:
                    found.append(BoundRole(binding.role, binding.project, _binding_source(binding)))
                elif isinstance(result, Exception):
                    notes.append(f"{binding.subject.text} ({binding.origin}) failed to evaluate ({_short(result)}):"
                                 f" not matched")
        found.sort(key=lambda b: b.role != OWNER)  # the owner decides first, so explanations name it
        if found:
            notes.append("roles in " + (f"project {project}" if project else "the install") + ": "
                         + ", ".join(f"{b.role} ({b.source})" for b in found))
        else:
            notes.append(f"no role bound to {principal.id or principal.kind} in project {project or '-'}")
        return found

    def _credential_roles(self, principal: Principal, project: str, notes: list[str]) -> list[BoundRole]:
        what = f"API key {principal.key_name}" if principal.kind == "apikey" else f"{principal.provider} token"
        out: list[BoundRole] = []
        scopes = (project, ANY_PROJECT) if project and project != ANY_PROJECT else (ANY_PROJECT,)
        for scope in scopes:
            for role in principal.roles.get(scope, ()):
                if role == OWNER and scope != ANY_PROJECT:
                    notes.append(f"owner from the credential in project {scope} ignored: owner is install-wide")
                    continue
                if self.roles.find(role, project if project != ANY_PROJECT else INSTALL) is None:
                    notes.append(f"role {role!r} from the credential is not defined here: ignored")
                    continue
                where = "every project" if scope == ANY_PROJECT else f"project {scope}"
                out.append(BoundRole(role, scope, f"from the {what} in {where}"))
        return out

    # --- lists and grants ------------------------------------------------------------------------------------

    def projects_readable(self, principal: Principal, action: str,
                          known_projects: Iterable[str] = ()) -> frozenset[str] | _AllProjects:
        """Where ``principal`` may hold ``action``, for filtering lists: ALL (an owner, or a role in ``*``), or a
        set of projects. An upper bound: role conditions and deny/require rules still apply to each item, so the
        caller checks items too. ``known_projects`` adds those an allow rule opens (evaluated with the project
        alone as the resource)."""
        projects: set[str] = set()
        candidates = {b.project for b in self.bindings} | set(principal.roles) | set(known_projects)
        for project in sorted(candidates):
            scope = INSTALL if project == ANY_PROJECT else project
            for held in self.bound_roles(principal, scope):
                if any(action in grant.permissions for grant in self.roles.grants(held.role, scope)):
                    if held.project == ANY_PROJECT:
                        return ALL
                    projects.add(held.project)
        if self.rules.allow:
            for project in set(known_projects) - projects:
                request = AccessRequest(principal, action, project, {"project": project})
                variables = Activation(request, [b.role for b in self.bound_roles(principal, project)])
                if any(rule.evaluate(variables) is True for rule in self.rules.allow):
                    projects.add(project)
        return frozenset(projects)

    def granter_view(self, principal: Principal, project: str) -> GranterView:
        """What ``principal`` holds in ``project`` (``*``: only what it holds in every project)."""
        bound = self.bound_roles(principal, "" if project == ANY_PROJECT else project)
        if project == ANY_PROJECT:
            bound = [b for b in bound if b.project == ANY_PROJECT]
        owner = any(b.role == OWNER for b in bound)
        scope = INSTALL if project == ANY_PROJECT else project
        grants = tuple(g for b in bound for g in self.roles.grants(b.role, scope))
        return GranterView(principal.id, project, owner, grants)

    def role_grants(self, definition: RoleDefinition) -> tuple[Grant, ...]:
        """What a role being created or updated would grant, every guardrail checked (BadInputError)."""
        base = self.roles.without(definition.project, definition.name)
        return build_roles([definition], base=base).grants(definition.name, definition.project)

    def binding_grants(self, definition: BindingDefinition) -> tuple[Grant, ...]:
        """What a binding being created would grant (BadInputError for an unknown role or a bad subject)."""
        binding = build_binding(definition, self.roles)
        scope = INSTALL if binding.project == ANY_PROJECT else binding.project
        return self.roles.grants(binding.role, scope)


def _conditions(grant: Grant, variables: Activation, partial: bool) -> tuple[str, str]:
    """``holds``, ``fails`` or (partial decisions, when only errors stand in the way) ``pending``, with the
    first condition that did not hold, described."""
    undecided = ""
    for condition in grant.conditions:
        result = condition.holds(variables)
        if result is True:
            continue
        if result is False:
            return "fails", f"{condition.text!r} holds (it is false)"
        described = f"{condition.text!r} holds (it failed to evaluate: {_short(result)})"
        if not partial:
            return "fails", described
        undecided = undecided or described
    return ("pending", undecided) if undecided else ("holds", "")


def _allowed(deciding: str, pending: list[str], trace: list[str]) -> Decision:
    """An allow; with ``pending`` (a partial decision), one the stored resource must confirm."""
    if pending:
        deciding = f"{deciding}, pending the stored resource for: {'; '.join(pending)}"
        trace.append(f"allowed until the stored resource decides {'; '.join(pending)}")
    return Decision(True, deciding, tuple(trace))


def _via(grant: Grant) -> str:
    return f" (inherited through {' -> '.join(grant.via)})" if len(grant.via) > 1 else ""


def _rule_line(rule: Rule, result: bool | Exception) -> str:
    if isinstance(result, Exception):
        outcome = "does not hold" if rule.kind == "require" else "not matched"
        return f"{rule.describe()}: failed to evaluate ({_short(result)}), {outcome}"
    if rule.kind == "require":
        return f"{rule.describe()}: {'holds' if result else 'does not hold'}"
    return f"{rule.describe()}: {'matched' if result else 'not matched'}"


def _binding_source(binding: Binding) -> str:
    scope = "every project" if binding.project == ANY_PROJECT else f"project {binding.project}"
    return f"binding {binding.subject.text} in {scope}, {binding.origin}"


def _short(error: Exception) -> str:
    text = " ".join(str(error.args[0] if error.args else error).split())
    return text[:160]
