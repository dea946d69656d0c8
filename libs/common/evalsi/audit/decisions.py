"""The gate's decisions into the audit log: every denied call, and every allowed call that changes state.

``decision_recorder(audit)`` is the gate's ``on_decision`` hook. Which calls change state is the action table's
``mutating`` flag. AuthService's own changes (roles, bindings, keys, projects) are left to AuthService, which
records them with the old and new definitions, so each change is one entry.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from evalsi.audit.entry import AuditEntry, clipped
from evalsi.audit.log import AuditLog
from evalsi.authz.actions import endpoint
from evalsi.authz.decision import AccessRequest, Decision

_AUTH = "evalsi.v1alpha1.AuthService/"
# Allowed calls AuthService audits itself, with the definitions before and after.
SELF_AUDITED = frozenset(_AUTH + name for name in (
    "CreateProject", "CreateRole", "UpdateRole", "DeleteRole", "CreateBinding", "DeleteBinding", "CreateApiKey",
    "RevokeApiKey",
))


def resource_summary(resource: Mapping[str, Any]) -> str:
    """The resource attributes, less the project (an entry has its own), empty values and false flags (every
    request has ``runs_code``; only ``true`` says something), as compact JSON."""
    shown = {key: value for key, value in resource.items()
             if key != "project" and value is not False and value not in (None, "", [], {})}
    return clipped(json.dumps(shown, sort_keys=True, default=str, separators=(",", ":"))) if shown else ""


def audited(method: str, allowed: bool) -> bool:
    """Whether a decision on ``method`` goes to the audit log."""
    if not allowed:
        return True
    key = method.lstrip("/")
    if key in SELF_AUDITED:
        return False
    try:
        return endpoint(key).mutating
    except KeyError:
        return False


def decision_recorder(audit: AuditLog) -> Callable[[AccessRequest, Decision, str], None]:
    def record(request: AccessRequest, decision: Decision, request_id: str) -> None:
        if audited(request.method, decision.allowed):
            audit.record(AuditEntry.of(request, decision, request_id=request_id,
                                       resource=resource_summary(request.resource)))

    return record
