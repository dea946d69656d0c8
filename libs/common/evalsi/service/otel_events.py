"""OTel log events a service emits (audit entries, online evaluation results), through one kind of provider.

A ``LoggerProvider`` with a batch processor and an OTLP/HTTP log exporter, so emitting never waits on the collector.
Subclasses say what they emit; the OpenTelemetry SDK is imported only when a provider is built here.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self


class OtelLogEvents:
    """Holds the provider and this kind of event's logger (its instrumentation scope)."""

    SCOPE: ClassVar[str] = "evalsi"

    def __init__(self, provider: Any) -> None:
        self._provider = provider
        self._logger = provider.get_logger(self.SCOPE)

    @classmethod
    def to_otlp_http(cls, endpoint: str, *, service_name: str) -> Self:
        """Batch-export to an OTLP/HTTP logs endpoint (``http://host:4318/v1/logs``)."""
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
        from opentelemetry.sdk.resources import Resource

        provider = LoggerProvider(resource=Resource.create({"service.name": service_name}))
        provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(endpoint=endpoint)))
        return cls(provider)

    def flush(self) -> None:
        self._provider.force_flush()

    def shutdown(self) -> None:
        self._provider.shutdown()
