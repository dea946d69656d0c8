"""The ``rbac:`` and ``authorization:`` sections of evalsi.yaml, parsed and checked at load.

Every error names the key path (``rbac.roles[2].inherits[0]: unknown role 'veiwer'; did you mean viewer?``) and
what would be accepted. Loading compiles every condition, rule and ``cel:`` subject once, so deciding a request
never parses CEL.

    rbac:
      owners: [group:corp/platform-admins]
      roles: [{name: prompt-engineer, inherits: [viewer], permissions: [runs.create], condition: '...'}]
      projects:
        support: {admin: [group:corp/support-leads], viewer: ['cel:jwt.repository == "acme/app"']}
    authorization:
      rules: [{deny: '...'}, {require: '...'}, {allow: '...'}]
      ext_authz: {authzen: {url: https://pdp.internal/access/v1/evaluation}, mode: require}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalsi.auth.principal import ANY_PROJECT
from evalsi.authz.bindings import Binding, BindingDefinition, build_binding
from evalsi.authz.external_config import ExternalAuthzConfig, load_external_config
from evalsi.authz.roles import OWNER, RoleDefinition, RoleSet, build_roles
from evalsi.authz.rules import RuleSet, parse_rules
from evalsi.errors import BadInputError


@dataclass(frozen=True)
class RbacConfig:
    """Checked roles (built-in plus custom) and bindings (owners included, as ``owner`` in project ``*``)."""

    roles: RoleSet = field(default_factory=lambda: build_roles(()))
    bindings: tuple[Binding, ...] = ()
    role_definitions: tuple[RoleDefinition, ...] = ()
    binding_definitions: tuple[BindingDefinition, ...] = ()


@dataclass(frozen=True)
class AuthorizationConfig:
    rules: RuleSet = field(default_factory=RuleSet)
    external: ExternalAuthzConfig | None = None  # authorization.ext_authz (evalsi.authz.external_config)


def load_rbac_config(raw: Mapping[str, Any] | None, path: str = "rbac") -> RbacConfig:
    """The ``rbac`` section (None or empty: built-in roles, no bindings)."""
    if raw is None:
        return RbacConfig()
    section = _mapping(raw, path)
    _unknown_keys(section, path, ("owners", "roles", "projects"))
    definitions = _roles(_sequence(section.get("roles", []), f"{path}.roles"), f"{path}.roles")
    roles = build_roles(definitions)
    binding_definitions = [
        BindingDefinition(ANY_PROJECT, OWNER, subject, f"{path}.owners[{index}]")
        for index, subject in enumerate(_strings(section.get("owners", []), f"{path}.owners"))
    ]
    projects = _mapping(section.get("projects", {}), f"{path}.projects")
    for project, by_role in projects.items():
        where = f"{path}.projects.{project}"
        for role, subjects in _mapping(by_role, where).items():
            for index, subject in enumerate(_strings(subjects, f"{where}.{role}")):
                binding_definitions.append(BindingDefinition(str(project), str(role), subject,
                                                             f"{where}.{role}[{index}]"))
    bindings = tuple(build_binding(definition, roles) for definition in binding_definitions)
    return RbacConfig(roles, bindings, tuple(definitions), tuple(binding_definitions))


def load_authorization_config(raw: Mapping[str, Any] | None, path: str = "authorization") -> AuthorizationConfig:
    """The ``authorization`` section: global rules and an external authorizer (None or empty: neither)."""
    if raw is None:
        return AuthorizationConfig()
    section = _mapping(raw, path)
    _unknown_keys(section, path, ("rules", "ext_authz"))
    external = section.get("ext_authz")
    return AuthorizationConfig(
        parse_rules(_sequence(section.get("rules", []), f"{path}.rules"), f"{path}.rules"),
        load_external_config(external, f"{path}.ext_authz") if external is not None else None,
    )


def _roles(raw: Sequence[Any], path: str) -> list[RoleDefinition]:
    out: list[RoleDefinition] = []
    for index, item in enumerate(raw):
        where = f"{path}[{index}]"
        if not isinstance(item, Mapping):
            raise BadInputError(f"{where}: a role is a mapping with name, permissions, inherits, condition")
        _unknown_keys(item, where, ("name", "permissions", "inherits", "condition", "description"))
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise BadInputError(f"{where}.name: a role needs a name (a string)")
        out.append(RoleDefinition(
            name=name,
            permissions=_strings(item.get("permissions", []), f"{where}.permissions"),
            inherits=_strings(item.get("inherits", []), f"{where}.inherits"),
            condition=_string(item.get("condition", ""), f"{where}.condition"),
            description=_string(item.get("description", ""), f"{where}.description"),
            origin=where,
        ))
    return out


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise BadInputError(f"{where}: expected a mapping, got {type(value).__name__}")
    return value


def _sequence(value: Any, where: str) -> Sequence[Any]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise BadInputError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    items = _sequence(value, where)
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise BadInputError(f"{where}[{index}]: expected a string, got {type(item).__name__}")
    return tuple(items)


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise BadInputError(f"{where}: expected a string, got {type(value).__name__}")
    return value


def _unknown_keys(section: Mapping[str, Any], where: str, accepted: Sequence[str]) -> None:
    unknown = sorted(str(key) for key in section if key not in accepted)
    if unknown:
        raise BadInputError(f"{where}.{unknown[0]}: unknown key; accepted: {', '.join(accepted)}")
