"""Audit entries as OTel log events named ``evalsi.audit``, through an OTel ``LoggerProvider``.

The same provider as the policy service's ``--otlp-events`` (``evalsi.service.otel_events``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from evalsi.audit.entry import AuditEntry
from evalsi.service.otel_events import OtelLogEvents

EVENT_NAME = "evalsi.audit"


def event_attributes(entry: AuditEntry) -> dict[str, Any]:
    """The entry as OTel attributes (``evalsi.audit.*``); definitions as JSON text, empty fields left out."""
    attributes: dict[str, Any] = {
        "evalsi.audit.principal": entry.principal,
        "evalsi.audit.principal_kind": entry.principal_kind,
        "evalsi.audit.action": entry.action,
        "evalsi.audit.decision": entry.decision,
        "evalsi.project": entry.project,
    }
    optional = {
        "evalsi.audit.deciding": entry.deciding,
        "evalsi.audit.resource": entry.resource,
        "evalsi.audit.request_id": entry.request_id,
        "evalsi.audit.source": entry.source,
        "evalsi.audit.method": entry.method,
    }
    attributes.update({key: value for key, value in optional.items() if value})
    if entry.old_value is not None:
        attributes["evalsi.audit.old_value"] = json.dumps(entry.old_value, sort_keys=True, default=str)
    if entry.new_value is not None:
        attributes["evalsi.audit.new_value"] = json.dumps(entry.new_value, sort_keys=True, default=str)
    return attributes


class OtelAuditEvents(OtelLogEvents):
    """Emits each written entry as one log record; the provider's processor and exporter decide where it goes."""

    SCOPE = "evalsi.audit"

    def export(self, entries: Sequence[AuditEntry]) -> None:
        from opentelemetry._logs import SeverityNumber

        for entry in entries:
            severity = SeverityNumber.WARN if entry.decision == "deny" else SeverityNumber.INFO
            self._logger.emit(event_name=EVENT_NAME, severity_number=severity, attributes=event_attributes(entry),
                              timestamp=int(entry.time * 1e9))
