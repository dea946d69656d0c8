"""AuthService's messages: stored identity rows to protobuf, and the bounds every input is checked against.

Each refusal names the field and the limit (``key.labels: 70 labels exceed the limit of 64``), as the rest of the
api does. API keys never leave here with more than their short prefix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from google.protobuf import struct_pb2
from google.protobuf.timestamp_pb2 import Timestamp

from evalsi.audit.entry import AuditEntry
from evalsi.errors import BadInputError
from evalsi.limits import (
    MAX_EXPRESSION_CHARS,
    MAX_LABEL_KEY_CHARS,
    MAX_LABEL_VALUE_CHARS,
    MAX_LABELS,
    check_count,
    check_length,
)
from evalsi.stores.identity import StoredApiKey, StoredBinding, StoredProject, StoredRole
from evalsi.v1alpha1 import auth_service_pb2 as pb

# An API key's name: unique in its project, part of its principal name (``key:<project>/<name>``).
KEY_NAME_MAX_CHARS = 63
_KEY_NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{KEY_NAME_MAX_CHARS - 1}}}")
KEY_NAME_RULE = f"letters, digits, '.', '-' and '_', starting with a letter or digit, at most {KEY_NAME_MAX_CHARS}"
MAX_DESCRIPTION_CHARS = 1024
# Permissions, inherited roles and API key roles of one role or key.
MAX_ROLE_ITEMS = 128
MAX_SUBJECT_CHARS = MAX_EXPRESSION_CHARS + 4  # "cel:" and an expression
# The first characters of a key shown in lists: "evk_" and 8 of its random part (48 bits: tells keys apart,
# useless for guessing the other 250).
KEY_PREFIX_CHARS = 12
DEFAULT_AUDIT_PAGE = 100


def check_key_name(name: str, field: str = "name") -> str:
    if not _KEY_NAME.fullmatch(name):
        raise BadInputError(f"{field}: {name!r} is not an API key name ({KEY_NAME_RULE} characters)")
    return name


def check_labels(labels: Mapping[str, str], field: str) -> dict[str, str]:
    check_count(len(labels), field, MAX_LABELS, "labels")
    for key, value in labels.items():
        if not key:
            raise BadInputError(f"{field}: a label key is empty")
        check_length(key, f"{field} key {key[:40]!r}", MAX_LABEL_KEY_CHARS)
        check_length(value, f"{field}.{key}", MAX_LABEL_VALUE_CHARS)
    return dict(labels)


def check_items(items: Any, field: str) -> tuple[str, ...]:
    values = tuple(str(item) for item in items)
    check_count(len(values), field, MAX_ROLE_ITEMS, "entries")
    for index, value in enumerate(values):
        check_length(value, f"{field}[{index}]", 128)
    return values


def timestamp(seconds: float | None) -> Timestamp | None:
    if seconds is None:
        return None
    stamp = Timestamp()
    stamp.FromNanoseconds(int(seconds * 1e9))
    return stamp


def seconds_of(stamp: Timestamp) -> float:
    return stamp.ToNanoseconds() / 1e9


def project_message(project: StoredProject, source: str) -> pb.Project:
    return pb.Project(name=project.name, description=project.description, labels=dict(project.labels),
                      source=source, create_time=timestamp(project.created_at or None),
                      created_by=project.created_by)


def role_message(role: StoredRole, source: str) -> pb.Role:
    return pb.Role(
        name=role.name, project=role.project, permissions=list(role.permissions), inherits=list(role.inherits),
        condition=role.condition, description=role.description, source=source,
        create_time=timestamp(role.created_at or None), update_time=timestamp(role.updated_at or None),
        created_by=role.created_by,
    )


def binding_message(binding: StoredBinding, source: str) -> pb.Binding:
    return pb.Binding(id=binding.id, project=binding.project, role=binding.role, subject=binding.subject,
                      source=source, create_time=timestamp(binding.created_at or None),
                      created_by=binding.created_by)


def key_message(key: StoredApiKey, source: str = "api") -> pb.ApiKey:
    """The key as lists show it: its prefix, never the key or its hash."""
    return pb.ApiKey(
        name=key.name, project=key.project, prefix=key.prefix, roles=list(key.roles), labels=dict(key.labels),
        expire_time=timestamp(key.expires_at), create_time=timestamp(key.created_at or None),
        created_by=key.created_by, revoke_time=timestamp(key.revoked_at),
        last_used_time=timestamp(key.last_used_at), source=source,
    )


def key_definition(key: StoredApiKey) -> dict[str, Any]:
    """What the audit log records of a key: never its hash."""
    return {"name": key.name, "project": key.project, "prefix": key.prefix, "roles": list(key.roles),
            "labels": dict(key.labels), "expires_at": key.expires_at, "revoked_at": key.revoked_at}


def _struct(value: Mapping[str, Any] | None) -> struct_pb2.Struct | None:
    if value is None:
        return None
    out = struct_pb2.Struct()
    out.update(dict(value))
    return out


def audit_message(entry: AuditEntry) -> pb.AuditEvent:
    return pb.AuditEvent(
        id=entry.id, time=timestamp(entry.time), principal=entry.principal, principal_kind=entry.principal_kind,
        action=entry.action, project=entry.project, resource=entry.resource, decision=entry.decision,
        deciding=entry.deciding, request_id=entry.request_id, source=entry.source, method=entry.method,
        old_value=_struct(entry.old_value), new_value=_struct(entry.new_value),
    )
