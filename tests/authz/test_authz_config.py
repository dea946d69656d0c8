"""Guardrails at load: every mistake in ``rbac`` or ``authorization`` is refused naming the key at fault."""

from __future__ import annotations

from typing import Any

import pytest

from evalsi.authz.authorizer import Authorizer
from evalsi.authz.config import load_authorization_config, load_rbac_config
from evalsi.authz.roles import BUILTIN_ROLES, RoleDefinition, build_roles
from evalsi.errors import BadInputError


def _refused(rbac: Any = None, authorization: Any = None) -> str:
    with pytest.raises(BadInputError) as caught:
        Authorizer.from_config(rbac, authorization)
    return str(caught.value)


def test_unknown_permission_is_named_with_a_suggestion() -> None:
    message = _refused({"roles": [{"name": "a", "permissions": ["runs.read"]},
                                  {"name": "b", "permissions": ["runs.read", "runs.creat"]}]})
    assert message.startswith("rbac.roles[1].permissions[1]: unknown permission 'runs.creat'; did you mean "
                              "runs.create?")
    assert "runs.*" in message
    assert _refused({"roles": [{"name": "a", "permissions": ["widgets.*"]}]}).startswith(
        "rbac.roles[0].permissions[0]: unknown permission 'widgets.*'")


def test_inheritance_cycle_and_unknown_parent() -> None:
    cycle = _refused({"roles": [
        {"name": "a", "permissions": ["runs.read"], "inherits": ["b"]},
        {"name": "b", "permissions": ["runs.read"], "inherits": ["c"]},
        {"name": "c", "permissions": ["runs.read"], "inherits": ["a"]},
    ]})
    assert "inheritance cycle a -> b -> c -> a" in cycle and cycle.startswith("rbac.roles[")
    assert "inheritance cycle a -> a" in _refused({"roles": [{"name": "a", "inherits": ["a"]}]})
    unknown = _refused({"roles": [{"name": "a", "inherits": ["veiwer"]}]})
    assert unknown.startswith("rbac.roles[0].inherits[0]: unknown role 'veiwer'; did you mean viewer?")


def test_conditions_must_compile_and_type_check_to_bool() -> None:
    syntax = _refused({"roles": [{"name": "a", "permissions": ["runs.read"], "condition": "resource.labels.app =="}]})
    assert syntax.startswith("rbac.roles[0].condition: invalid CEL")
    typo = _refused({"roles": [{"name": "a", "permissions": ["runs.read"],
                                "condition": 'resource.target.modle == "x"'}]})
    assert typo.startswith("rbac.roles[0].condition:") and "no field 'modle'" in typo and "model" in typo
    not_bool = _refused({"roles": [{"name": "a", "permissions": ["runs.read"], "condition": "resource.trials"}]})
    assert "must be true or false" in not_bool
    wrong_type = _refused({"roles": [{"name": "a", "permissions": ["runs.read"],
                                      "condition": 'resource.trials == "3"'}]})
    assert "never equal" in wrong_type
    unknown_variable = _refused({"roles": [{"name": "a", "permissions": ["runs.read"], "condition": "user.x"}]})
    assert unknown_variable.startswith("rbac.roles[0].condition:")


def test_install_wide_permissions_are_reserved_for_owner() -> None:
    message = _refused({"roles": [{"name": "ops", "permissions": ["runs.read", "metrics.read"]}]})
    assert message.startswith("rbac.roles[0].permissions[1]: metrics.read is install-wide, reserved for the owner")
    # A wildcard means the project permissions it covers, never the install-wide ones.
    roles = build_roles([RoleDefinition("all", ("*",))])
    granted = set().union(*(g.permissions for g in roles.grants("all")))
    assert "runs.create" in granted and not granted & {"metrics.read", "projects.manage", "install.manage"}


def test_builtin_roles_cannot_be_redefined_and_names_are_unique() -> None:
    assert "built-in role" in _refused({"roles": [{"name": "owner", "permissions": ["runs.read"]}]})
    assert "built-in role" in _refused({"roles": [{"name": "viewer", "permissions": ["runs.read"]}]})
    duplicate = _refused({"roles": [{"name": "a", "permissions": ["runs.read"]},
                                    {"name": "a", "permissions": ["runs.read"]}]})
    assert duplicate.startswith("rbac.roles[1].name: a role 'a' is already defined (rbac.roles[0])")
    assert "grants nothing" in _refused({"roles": [{"name": "a"}]})
    assert "cannot inherit owner" in _refused({"roles": [{"name": "a", "inherits": ["owner"]}]})


def test_bindings_name_their_key() -> None:
    assert _refused({"projects": {"p": {"ghost": ["user:corp/a"]}}}).startswith(
        "rbac.projects.p.ghost[0]: unknown role 'ghost'")
    assert _refused({"projects": {"p": {"viewer": ["alice"]}}}).startswith(
        "rbac.projects.p.viewer[0]: 'alice' is not a subject")
    assert "names no provider" in _refused({"projects": {"p": {"viewer": ["group:admins"]}}})
    assert _refused({"projects": {"p": {"viewer": ["cel:jwt.repo =="]}}}).startswith(
        "rbac.projects.p.viewer[0]: invalid CEL")
    assert "owner is install-wide" in _refused({"projects": {"p": {"owner": ["user:corp/a"]}}})
    assert "not a project" in _refused({"projects": {"a.b": {"viewer": ["user:corp/a"]}}})
    assert _refused({"owners": ["bob"]}).startswith("rbac.owners[0]: 'bob' is not a subject")


def test_unknown_keys_and_wrong_types() -> None:
    assert _refused({"role": []}).startswith("rbac.role: unknown key; accepted: owners, roles, projects")
    assert _refused({"roles": [{"name": "a", "permission": ["x"]}]}).startswith("rbac.roles[0].permission: unknown")
    assert _refused({"roles": {"a": 1}}).startswith("rbac.roles: expected a list")
    assert _refused({"projects": {"p": {"viewer": "user:corp/a"}}}).startswith("rbac.projects.p.viewer: expected a")


def test_rules_are_checked_at_load() -> None:
    assert _refused(None, {"rules": [{"allow": "true"}, {"permit": "true"}]}).startswith(
        "authorization.rules[1]: unknown key 'permit'")
    assert "exactly one of" in _refused(None, {"rules": [{"allow": "true", "deny": "false"}]})
    assert _refused(None, {"rules": [{"deny": "principal.grups"}]}).startswith("authorization.rules[0].deny:")
    assert "must be true or false" in _refused(None, {"rules": [{"require": "principal.name"}]})
    assert _refused(None, {"ext_authz": {"authzen": {}}}).startswith("authorization.ext_authz.authzen.url:")
    rules = load_authorization_config({"rules": [{"deny": "false"}, {"allow": "true"}, {"require": "true"}]}).rules
    assert [r.origin for r in (*rules.deny, *rules.require, *rules.allow)] == [
        "authorization.rules[0]", "authorization.rules[2]", "authorization.rules[1]"]


def test_empty_sections_mean_builtin_roles_and_no_rules() -> None:
    rbac = load_rbac_config(None)
    assert rbac.roles.names() == sorted(role.name for role in BUILTIN_ROLES)
    assert rbac.bindings == ()
    assert load_authorization_config({}).rules.empty


def test_stored_roles_and_bindings_pass_the_same_guardrails() -> None:
    base = Authorizer.from_config({"roles": [{"name": "auditor", "permissions": ["audit.read"]}]}, None)
    with pytest.raises(BadInputError, match=r"unknown permission 'runs\.nuke'"):
        base.with_stored([RoleDefinition("x", ("runs.nuke",), project="p")])
    with pytest.raises(BadInputError, match="already defined"):
        base.with_stored([RoleDefinition("auditor", ("runs.read",), project="p")])
    stored = base.with_stored([RoleDefinition("triager", ("traces.read",), ("auditor",), project="p")])
    assert stored.roles.find("triager", "p") is not None
    assert stored.roles.find("triager", "q") is None  # a project role belongs to its project
