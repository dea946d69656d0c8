"""Roles: the built-in ones (§17's table), custom ones from evalsi.yaml or the database, and what each grants.

A role is permissions (with ``runs.*`` and ``*`` wildcards), the roles it ``inherits``, and an optional CEL
``condition`` that must hold for the role to grant anything, including what it inherits; an inherited role's own
condition still applies to its permissions. Resolution flattens a role into ``Grant``s: a permission set and
the conditions under which it is granted.

Guardrails at load, each error naming the key at fault: an unknown permission, an unknown inherited role, an
inheritance cycle, a condition that does not compile or is not a bool, an install-wide permission in a
project role (install-wide permissions are the owner's alone), a redefined built-in role.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field

from evalsi.authz.expressions import Expression
from evalsi.authz.permissions import INSTALL_WIDE_PERMISSIONS, PERMISSIONS, PROJECT_PERMISSIONS, expand
from evalsi.errors import BadInputError

OWNER = "owner"
# The project of a role usable in every project (built-in, evalsi.yaml, or install-wide in the database).
INSTALL = ""
_NAME_LIMIT = 64


@dataclass(frozen=True)
class RoleDefinition:
    """A role as written: in evalsi.yaml (``origin`` = ``rbac.roles[2]``) or stored (A4's rows).

    ``project`` is empty for a role usable in every project, else the one project it belongs to.
    """

    name: str
    permissions: tuple[str, ...] = ()
    inherits: tuple[str, ...] = ()
    condition: str = ""
    project: str = INSTALL
    description: str = ""
    origin: str = ""

    @property
    def where(self) -> str:
        return self.origin or (f"role {self.name!r} of project {self.project!r}" if self.project
                               else f"role {self.name!r}")


@dataclass(frozen=True)
class Grant:
    """Permissions granted when every condition holds; ``via`` is the role chain, for explanations."""

    permissions: frozenset[str]
    conditions: tuple[Expression, ...] = ()
    via: tuple[str, ...] = ()

    @property
    def condition_texts(self) -> frozenset[str]:
        return frozenset(c.text for c in self.conditions)


BUILTIN_ROLES: tuple[RoleDefinition, ...] = (
    RoleDefinition("viewer", ("catalog.read", "runs.read", "policies.read", "traces.read", "datasets.read",
                              "cases.read"),
                   description="read the catalog, runs, policies, traces, datasets and agent cases"),
    RoleDefinition("runner", ("evaluations.run", "runs.create", "runs.cancel", "runs.resume", "datasets.write",
                              "cases.write"),
                   ("viewer",), description="viewer, plus evaluations, runs and case reports: spends judge and "
                                            "target budget and may execute code"),
    RoleDefinition("editor", ("policies.write",), ("runner",),
                   description="runner, plus online policies (which includes dataset promotion)"),
    RoleDefinition("admin", ("access.manage", "audit.read"), ("editor",),
                   description="editor, plus the project's API keys, custom roles and bindings, and its audit log"),
    RoleDefinition("ingest", ("traces.write",), description="OTLP export and feedback, nothing else: for collectors"),
    # sandboxd's callers are the workers (§17: the launcher is internal); users reach sandboxes through runs.
    RoleDefinition("sandbox", ("sandboxes.use",), description="evalsi-sandboxd's sandboxes, nothing else: for "
                                                               "workers and the harness"),
    RoleDefinition(OWNER, ("*",), description="everything in every project, install settings and metrics.read; "
                                              "install-wide, cannot be redefined"),
)
BUILTIN_NAMES = frozenset(role.name for role in BUILTIN_ROLES)


@dataclass(frozen=True)
class _Role:
    definition: RoleDefinition
    permissions: frozenset[str]
    condition: Expression | None


@dataclass
class RoleSet:
    """Validated roles by (project, name), with their grants resolved once."""

    _roles: dict[tuple[str, str], _Role] = field(default_factory=dict)
    _grants: dict[tuple[str, str], tuple[Grant, ...]] = field(default_factory=dict)

    def find(self, name: str, project: str = INSTALL) -> RoleDefinition | None:
        """The role a binding in ``project`` means by ``name``: the project's own, else an install-wide one."""
        role = self._lookup(name, project)
        return role.definition if role is not None else None

    def grants(self, name: str, project: str = INSTALL) -> tuple[Grant, ...]:
        """What the role grants, with conditions; empty for an unknown role."""
        role = self._lookup(name, project)
        if role is None:
            return ()
        key = (role.definition.project, role.definition.name)
        if key not in self._grants:
            self._grants[key] = self._resolve(role)
        return self._grants[key]

    def definitions(self, project: str | None = None) -> list[RoleDefinition]:
        """Every role (``project=None``), or those usable in one project (its own and the install-wide ones)."""
        return [role.definition for (owner, _), role in self._roles.items()
                if project is None or owner in (INSTALL, project)]

    def names(self, project: str = INSTALL) -> list[str]:
        return sorted({d.name for d in self.definitions(project)})

    def without(self, project: str, name: str) -> RoleSet:
        """A copy without one custom role (what an update replaces); built-in roles stay."""
        kept = {key: role for key, role in self._roles.items()
                if key != (project, name) or role.definition.name in BUILTIN_NAMES}
        return RoleSet(kept)

    def _lookup(self, name: str, project: str) -> _Role | None:
        return self._roles.get((project, name)) or self._roles.get((INSTALL, name))

    def _resolve(self, role: _Role) -> tuple[Grant, ...]:
        """Flattened grants: the role's own permissions under its condition, then each inherited role's grants
        under this role's condition as well."""
        own = (role.condition,) if role.condition is not None else ()
        name = role.definition.name
        out = [Grant(role.permissions, own, (name,))] if role.permissions else []
        for parent in role.definition.inherits:
            for grant in self.grants(parent, role.definition.project):
                out.append(Grant(grant.permissions, own + grant.conditions, (name, *grant.via)))
        return tuple(out)


def build_roles(definitions: Iterable[RoleDefinition], base: RoleSet | None = None) -> RoleSet:
    """A RoleSet of the built-in roles (or ``base``'s roles) plus ``definitions``, every guardrail checked.

    Raises BadInputError naming the definition's key (``rbac.roles[2].inherits: ...``).
    """
    roles = RoleSet()
    if base is None:
        for builtin in BUILTIN_ROLES:
            roles._roles[(INSTALL, builtin.name)] = _Role(builtin, _expand_all(builtin.permissions), None)
    else:
        roles._roles.update(base._roles)
    added = list(definitions)
    for definition in added:
        _check_name(definition, roles)
        roles._roles[(definition.project, definition.name)] = _Role(
            definition, _permissions(definition), _condition(definition))
    for definition in added:
        _check_inherits(definition, roles)
    _check_cycles(roles)
    return roles


def _expand_all(patterns: Iterable[str]) -> frozenset[str]:
    return frozenset().union(*(expand(p) for p in patterns)) if patterns else frozenset()


def _check_name(definition: RoleDefinition, roles: RoleSet) -> None:
    where, name = definition.where, definition.name
    if not name or len(name) > _NAME_LIMIT or not all(c.isalnum() or c in "-_." for c in name):
        raise BadInputError(f"{where}.name: {name!r} is not a role name; use 1 to {_NAME_LIMIT} letters, digits, "
                            f"'-', '_' or '.'")
    if name in BUILTIN_NAMES:
        raise BadInputError(f"{where}.name: {name!r} is a built-in role and cannot be redefined; give yours "
                            f"another name and inherit {name!r} to extend it")
    clash = roles._roles.get((definition.project, name)) or roles._roles.get((INSTALL, name))
    if clash is None and definition.project == INSTALL:
        clash = next((r for (_, n), r in roles._roles.items() if n == name), None)
    if clash is not None:
        raise BadInputError(f"{where}.name: a role {name!r} is already defined ({clash.definition.where})")


def _permissions(definition: RoleDefinition) -> frozenset[str]:
    granted: set[str] = set()
    for index, pattern in enumerate(definition.permissions):
        where = f"{definition.where}.permissions[{index}]"
        names = expand(pattern)
        if not names:
            close = difflib.get_close_matches(pattern, list(PERMISSIONS), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}? " if close else ""
            raise BadInputError(f"{where}: unknown permission {pattern!r}; {hint}accepted: "
                                f"{', '.join(PERMISSIONS)}, a group such as runs.* or *")
        if names <= INSTALL_WIDE_PERMISSIONS:
            raise BadInputError(f"{where}: {pattern} is install-wide, reserved for the owner role (rbac.owners); "
                                f"a custom role may hold only project permissions")
        # A wildcard in a custom role means the project permissions it covers, never the install-wide ones.
        granted |= names & PROJECT_PERMISSIONS
    if not granted and not definition.inherits:
        raise BadInputError(f"{definition.where}: the role grants nothing; list its permissions or the roles it "
                            f"inherits")
    return frozenset(granted)


def _condition(definition: RoleDefinition) -> Expression | None:
    if not definition.condition.strip():
        return None
    return Expression(definition.condition, f"{definition.where}.condition", "a role's condition")


def _check_inherits(definition: RoleDefinition, roles: RoleSet) -> None:
    for index, parent in enumerate(definition.inherits):
        where = f"{definition.where}.inherits[{index}]"
        found = roles._lookup(parent, definition.project)
        if found is None:
            known = roles.names(definition.project)
            close = difflib.get_close_matches(parent, known, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}? " if close else ""
            raise BadInputError(f"{where}: unknown role {parent!r}; {hint}roles: {', '.join(known)}")
        if found.definition.name == OWNER:
            raise BadInputError(f"{where}: a custom role cannot inherit owner (install-wide); bind owners in "
                                f"rbac.owners")


def _check_cycles(roles: RoleSet) -> None:
    """Refuse a role that inherits itself, directly or through others, naming the cycle."""
    state: dict[tuple[str, str], int] = {}

    def visit(key: tuple[str, str], path: list[str]) -> None:
        state[key] = 1
        role = roles._roles[key]
        for parent in role.definition.inherits:
            found = roles._lookup(parent, role.definition.project)
            if found is None:
                continue
            parent_key = (found.definition.project, found.definition.name)
            if state.get(parent_key) == 1:
                cycle = [*path[path.index(parent):], parent] if parent in path else [*path, parent]
                raise BadInputError(f"{roles._roles[parent_key].definition.where}.inherits: inheritance cycle "
                                    f"{' -> '.join(cycle)}")
            if parent_key not in state:
                visit(parent_key, [*path, parent])
        state[key] = 2

    for key in roles._roles:
        if key not in state:
            visit(key, [key[1]])
