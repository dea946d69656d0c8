"""What an external authorizer is told about one access request, in AuthZEN's shape (subject, action, resource,
context), and the key its answer is cached under.

The subject is the authenticated principal (never its token or key); the resource is the action table's
attributes for the request (the same ones CEL rules see); the context names the project, the RPC and where the
call came from. ``partial`` is true on the gate's first decision of a call whose handler decides again on the
stored resource (a run's ``created_by`` and labels are not known yet then).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from evalsi.authz.decision import AccessRequest

# The resource's own name per action group: ``runs.read`` is about ``resource.run`` (its id), and so on.
_RESOURCE_FIELDS = {"runs": "run", "policies": "policy", "traces": "trace", "datasets": "dataset", "access": "key"}


def external_query(access: AccessRequest) -> dict[str, Any]:
    """The AuthZEN access evaluation request for ``access`` (a plain JSON-able mapping)."""
    principal = access.principal
    subject_properties: dict[str, Any] = {
        "provider": principal.provider,
        "subject": principal.subject,
        "name": principal.name,
        "email": principal.email,
        "email_verified": principal.email_verified,
        "groups": list(principal.groups),
        "labels": dict(principal.labels),
        "roles": {project: list(roles) for project, roles in principal.roles.items()},
        "claims": _plain(principal.claims),
    }
    if principal.key_name:
        subject_properties["key_name"] = principal.key_name
    group = access.action.partition(".")[0]
    return {
        "subject": {"type": principal.kind, "id": principal.id or principal.kind, "properties": subject_properties},
        "action": {"name": access.action},
        "resource": {"type": group, "id": resource_id(group, access.resource, access.project),
                     "properties": _plain(access.resource)},
        "context": {"project": access.project, "method": access.method, "protocol": access.protocol,
                    "source": access.source, "partial": access.partial},
    }


def resource_id(group: str, resource: Mapping[str, Any], project: str) -> str:
    """The named resource's id or name (a run id, a policy or dataset name), else the project."""
    named = resource.get(_RESOURCE_FIELDS.get(group, ""))
    if isinstance(named, Mapping):
        named = named.get("id") or named.get("name")
    return str(named) if named else project


def cache_key(query: Mapping[str, Any]) -> str:
    """The digest of everything the external authorizer is told: equal keys, equal questions, equal answers."""
    canonical = json.dumps(query, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _plain(value: Any) -> Any:
    """A JSON-able copy: mappings and sequences recursively, scalars kept, anything else as its string."""
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(item) for item in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)
