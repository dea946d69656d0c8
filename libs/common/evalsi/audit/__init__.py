"""The audit log: every mutating and every denied call, recorded without blocking the call (docs/auth.md).

``AuditEntry`` is one line; ``AuditLog.record`` queues it and a background task writes batches to the store
(``evalsi.stores.audit``); ``OtelAuditEvents`` also exports written entries as ``evalsi.audit`` OTel log events;
``purge_expired`` keeps the log within ``audit.retention``.
"""

from __future__ import annotations

from evalsi.audit.entry import DECISIONS, AuditDecision, AuditEntry
from evalsi.audit.export import EVENT_NAME, OtelAuditEvents
from evalsi.audit.log import AuditExporter, AuditLog, AuditMetrics, WriteBatch
from evalsi.audit.retention import DEFAULT_RETENTION_S, parse_retention, purge_expired, purge_periodically

__all__ = [
    "DECISIONS",
    "DEFAULT_RETENTION_S",
    "EVENT_NAME",
    "AuditDecision",
    "AuditEntry",
    "AuditExporter",
    "AuditLog",
    "AuditMetrics",
    "OtelAuditEvents",
    "WriteBatch",
    "parse_retention",
    "purge_expired",
    "purge_periodically",
]
