"""One line of the audit log: who did what to which project's resource, and what decided.

An entry is built from the authorizer's ``AccessRequest`` and ``Decision`` (``AuditEntry.of``) by the one
enforcement point, for every denied call and every mutating one; AuthService adds the old and new definitions of
the roles and bindings it changes. It never holds a credential: the principal is its ``provider/subject``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # only attributes are read: the audit log needs no authorizer loaded
    from evalsi.authz.decision import AccessRequest, Decision

AuditDecision = Literal["allow", "deny"]
DECISIONS: tuple[AuditDecision, ...] = ("allow", "deny")

# Bounds on what one entry stores, so a hostile request cannot grow the log by more than a few kilobytes a call.
MAX_TEXT_CHARS = 512
MAX_DECIDING_CHARS = 2048


def clipped(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """``text``, cut to ``limit`` characters with an ellipsis when longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class AuditEntry:
    """``time`` is unix seconds; ``id`` is 0 until the store assigns one (increasing, newest highest)."""

    principal: str
    principal_kind: str
    action: str
    project: str
    decision: AuditDecision
    deciding: str = ""
    # What was acted on, in a few words: "run 01J…", "role prompt-engineer", "key otel-collector".
    resource: str = ""
    request_id: str = ""
    # The caller's address.
    source: str = ""
    # The RPC or endpoint, e.g. evalsi.v1alpha1.RunService/CreateRun.
    method: str = ""
    # Role and binding changes: the definition before (None when created) and after (None when deleted).
    old_value: Mapping[str, Any] | None = None
    new_value: Mapping[str, Any] | None = None
    time: float = field(default_factory=time.time)
    id: int = 0

    def __post_init__(self) -> None:
        if self.decision not in DECISIONS:
            raise ValueError(f"decision {self.decision!r}: use allow or deny")

    @classmethod
    def of(
        cls,
        request: AccessRequest,
        decision: Decision,
        *,
        request_id: str = "",
        resource: str = "",
        old_value: Mapping[str, Any] | None = None,
        new_value: Mapping[str, Any] | None = None,
    ) -> AuditEntry:
        """The entry for one authorized (or refused) call, as the enforcement point records it."""
        principal = request.principal
        return cls(
            principal=clipped(principal.id),
            principal_kind=principal.kind,
            action=request.action,
            project=request.project,
            decision="allow" if decision.allowed else "deny",
            deciding=clipped(decision.deciding, MAX_DECIDING_CHARS),
            resource=clipped(resource),
            request_id=request_id,
            source=clipped(request.source),
            method=request.method,
            old_value=old_value,
            new_value=new_value,
        )
