"""evalsi.yaml's ``audit`` section, and the audit log a service opens from it.

    audit:
      retention: 2160h                              # default; at least 1h
      otlp_events: http://collector:4318/v1/logs    # also export entries as evalsi.audit OTel log events

Every error names the key path and what is accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evalsi.audit.log import AuditLog, AuditMetrics, WriteBatch
from evalsi.audit.retention import DEFAULT_RETENTION_S, Purge, parse_retention, purge_periodically
from evalsi.errors import BadInputError

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from evalsi.service.lifecycle import Lifecycle

_KEYS = ("retention", "otlp_events")


@dataclass(frozen=True)
class AuditConfig:
    retention_s: float = DEFAULT_RETENTION_S
    # An OTLP/HTTP logs endpoint; empty: entries go to the store only.
    otlp_events: str = ""


def load_audit_config(raw: Any, path: str = "audit") -> AuditConfig:
    """The ``audit`` section (None: the defaults)."""
    if raw is None:
        return AuditConfig()
    if not isinstance(raw, Mapping):
        raise BadInputError(f"{path}: expected a mapping such as {{retention: 2160h}}, got {type(raw).__name__}")
    unknown = sorted(str(key) for key in raw if key not in _KEYS)
    if unknown:
        raise BadInputError(f"{path}.{unknown[0]}: unknown key; accepted: {', '.join(_KEYS)}")
    endpoint = raw.get("otlp_events", "") or ""
    if not isinstance(endpoint, str) or (endpoint and not endpoint.startswith(("http://", "https://"))):
        raise BadInputError(f"{path}.otlp_events: {endpoint!r}; expected an OTLP/HTTP logs URL such as "
                            "http://collector:4318/v1/logs")
    return AuditConfig(parse_retention(raw.get("retention"), f"{path}.retention"), endpoint)


async def open_audit_log(config: AuditConfig, write: WriteBatch, purge: Purge | None, life: Lifecycle, *,
                         service_name: str = "evalsi-api", registry: CollectorRegistry | None = None) -> AuditLog:
    """The audit log writing through ``write``, exporting when configured, purged every hour through ``purge``
    (None: another service purges); stopped by ``life`` (what is buffered is written first). Its metrics go to
    ``registry`` (the service's ``/metrics``)."""
    exporter = None
    if config.otlp_events:
        from evalsi.audit.export import OtelAuditEvents

        exporter = OtelAuditEvents.to_otlp_http(config.otlp_events, service_name=service_name)
        life.on_stop("audit export", _shutdown(exporter))
    audit = AuditLog(write, exporter=exporter, metrics=AuditMetrics(registry))
    audit.start()
    life.on_stop("audit log", audit.close)
    if purge is not None:
        await life.spawn("audit retention", purge_periodically(purge, config.retention_s))
    return audit


def _shutdown(exporter: Any) -> Any:
    async def stop() -> None:
        exporter.shutdown()

    return stop
