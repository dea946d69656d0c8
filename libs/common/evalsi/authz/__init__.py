"""Authorization: the action table, roles, bindings and CEL rules deciding what a Principal may do.

    authorizer = Authorizer.from_config(config.get("rbac"), config.get("authorization"))
    row = endpoint("evalsi.v1alpha1.RunService/CreateRun")
    request = AccessRequest(principal, row.permission, project, row.attributes(message, sources))
    decision = authorizer.decide(request)        # Decision(allowed, deciding, trace)

docs/auth.md ("Authorization", "The action table") describes the model; the names below are the public API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalsi._lazy import lazy_exports

if TYPE_CHECKING:
    from .actions import ACTION_TABLE, Endpoint, endpoint, rows
    from .attributes import AttributeSources, Connection, runs_code_by_pool
    from .authorizer import ALL, Authorizer, BoundRole, GranterView
    from .bindings import BindingDefinition, parse_subject
    from .config import AuthorizationConfig, RbacConfig, load_authorization_config, load_rbac_config
    from .decision import AccessRequest, Decision
    from .escalation import GrantRequest, binding_grant, check_grant, role_grant
    from .external import ExternalAuthorizer
    from .external_config import ExternalAuthzConfig, load_external_config
    from .permissions import PERMISSIONS, Permission
    from .roles import BUILTIN_ROLES, OWNER, Grant, RoleDefinition

# Loaded on first use: everything but the contract (decision) compiles CEL, and cel-python's parser is heavy.
__getattr__, __dir__ = lazy_exports(
    __name__,
    globals(),
    {
        ".actions": ("ACTION_TABLE", "Endpoint", "endpoint", "rows"),
        ".attributes": ("AttributeSources", "Connection", "runs_code_by_pool"),
        ".authorizer": ("ALL", "Authorizer", "BoundRole", "GranterView"),
        ".bindings": ("BindingDefinition", "parse_subject"),
        ".config": ("AuthorizationConfig", "RbacConfig", "load_authorization_config", "load_rbac_config"),
        ".decision": ("AccessRequest", "Decision"),
        ".escalation": ("GrantRequest", "binding_grant", "check_grant", "role_grant"),
        ".external": ("ExternalAuthorizer",),
        ".external_config": ("ExternalAuthzConfig", "load_external_config"),
        ".permissions": ("PERMISSIONS", "Permission"),
        ".roles": ("BUILTIN_ROLES", "OWNER", "Grant", "RoleDefinition"),
    },
)

__all__ = [
    "ACTION_TABLE", "ALL", "BUILTIN_ROLES", "OWNER", "PERMISSIONS", "AccessRequest", "AttributeSources",
    "AuthorizationConfig", "Authorizer", "BindingDefinition", "BoundRole", "Connection", "Decision", "Endpoint",
    "ExternalAuthorizer", "ExternalAuthzConfig", "Grant", "GrantRequest", "GranterView", "Permission", "RbacConfig",
    "RoleDefinition", "binding_grant", "check_grant", "endpoint", "load_authorization_config", "load_external_config",
    "load_rbac_config", "parse_subject", "role_grant", "rows", "runs_code_by_pool",
]
