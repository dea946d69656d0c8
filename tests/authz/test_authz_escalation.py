"""No privilege escalation: a grant must be covered by what the granter holds there, conditions at least as strict."""

from __future__ import annotations

import pytest

from evalsi.auth.principal import PermissionDenied, Principal
from evalsi.authz.authorizer import Authorizer
from evalsi.authz.bindings import BindingDefinition
from evalsi.authz.escalation import binding_grant, check_grant, role_grant
from evalsi.authz.roles import RoleDefinition
from evalsi.errors import BadInputError

QWEN = 'resource.target.model == "qwen3"'
AUTHORIZER = Authorizer.from_config({
    "owners": ["user:corp/root"],
    "roles": [
        {"name": "qwen-runner", "permissions": ["runs.create", "runs.read"], "condition": QWEN},
        {"name": "key-manager", "permissions": ["access.manage"]},
    ],
    "projects": {
        "p": {"admin": ["user:corp/padmin"], "qwen-runner": ["user:corp/limited"],
              "key-manager": ["user:corp/limited"]},
    },
}, None)
PADMIN = Principal(kind="user", provider="corp", subject="padmin")
LIMITED = Principal(kind="user", provider="corp", subject="limited")
ROOT = Principal(kind="user", provider="corp", subject="root")


def _create_role(granter: Principal, definition: RoleDefinition) -> None:
    project = definition.project or "*"
    check_grant(AUTHORIZER.granter_view(granter, project), role_grant(AUTHORIZER, definition))


def _bind(granter: Principal, definition: BindingDefinition) -> None:
    check_grant(AUTHORIZER.granter_view(granter, definition.project), binding_grant(AUTHORIZER, definition))


def test_a_project_admin_grants_what_it_holds() -> None:
    _create_role(PADMIN, RoleDefinition("reviewer", ("runs.read", "policies.write"), ("viewer",), project="p"))
    _bind(PADMIN, BindingDefinition("p", "editor", "group:corp/ml"))


def test_a_project_admin_cannot_grant_a_permission_it_lacks() -> None:
    with pytest.raises(PermissionDenied) as caught:
        _create_role(PADMIN, RoleDefinition("collector", ("traces.write", "runs.read"), project="p"))
    assert "traces.write: you do not hold it in project p" in str(caught.value)
    assert "runs.read" not in str(caught.value).split("hold:", 1)[1]
    with pytest.raises(PermissionDenied, match=r"traces\.write: you do not hold it"):
        _bind(PADMIN, BindingDefinition("p", "ingest", "key:otel"))


def test_holding_access_manage_in_one_project_grants_nothing_in_another() -> None:
    with pytest.raises(PermissionDenied, match="you do not hold it in project q"):
        _bind(PADMIN, BindingDefinition("q", "viewer", "user:corp/x"))


def test_a_condition_cannot_be_weakened() -> None:
    with pytest.raises(PermissionDenied) as caught:
        _create_role(LIMITED, RoleDefinition("any-model", ("runs.create",), project="p"))
    message = str(caught.value)
    assert "runs.create without a condition: you hold it only when 'resource.target.model == \"qwen3\"'" in message
    other = 'resource.target.model == "gpt-5"'
    with pytest.raises(PermissionDenied, match=r"runs\.create under"):
        _create_role(LIMITED, RoleDefinition("gpt", ("runs.create",), condition=other, project="p"))
    # The same condition, or a stricter one that keeps it, is covered.
    _create_role(LIMITED, RoleDefinition("same", ("runs.create",), condition=QWEN, project="p"))
    _bind(LIMITED, BindingDefinition("p", "qwen-runner", "user:corp/friend"))
    # Inheriting the conditioned role under a further condition keeps the held one: covered.
    _create_role(LIMITED, RoleDefinition("stricter", (), ("qwen-runner",), condition="resource.trials <= 3",
                                         project="p"))


def test_inherited_permissions_are_checked_too() -> None:
    with pytest.raises(PermissionDenied, match=r"runs\.cancel: you do not hold it"):
        _create_role(LIMITED, RoleDefinition("sneaky", ("runs.read",), ("runner",), condition=QWEN, project="p"))


def test_install_wide_grants_are_the_owners() -> None:
    with pytest.raises(PermissionDenied, match="only an owner can create an install-wide role"):
        _create_role(PADMIN, RoleDefinition("global-viewer", ("runs.read",)))
    with pytest.raises(PermissionDenied, match=r"a binding in every project \(\*\)"):
        _bind(PADMIN, BindingDefinition("*", "viewer", "user:corp/x"))
    _create_role(ROOT, RoleDefinition("global-viewer", ("runs.read",)))
    _bind(ROOT, BindingDefinition("*", "admin", "user:corp/x"))
    with pytest.raises(BadInputError, match="install-wide, reserved for the owner"):
        _create_role(ROOT, RoleDefinition("metrics", ("metrics.read",), project="p"))


def test_updating_a_role_replaces_its_old_definition() -> None:
    stored = AUTHORIZER.with_stored([RoleDefinition("reviewer", ("runs.read",), project="p")])
    grants = role_grant(stored, RoleDefinition("reviewer", ("runs.read", "traces.write"), project="p")).grants
    assert {"runs.read", "traces.write"} <= set().union(*(g.permissions for g in grants))
    with pytest.raises(PermissionDenied, match=r"traces\.write"):
        check_grant(stored.granter_view(PADMIN, "p"),
                    role_grant(stored, RoleDefinition("reviewer", ("runs.read", "traces.write"), project="p")))
