"""The one export handler both OTLP receivers call: assign projects, map, hand spans to the sink, answer.

Traces and logs take the same path: a log record becomes a row keyed to its span (see ``logs``), stored by the
same sink, so the GenAI events an instrumentation sends as logs reach the trajectory of their trace.

Receivers only decode, count and delegate; everything the protocol says about spans happens here, once.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from evalsi.projects import DEFAULT_PROJECT, PROJECT_ATTRIBUTE, PROJECT_HEADER, PROJECT_RULE, check_project, is_project
from evalsi.stores.traces.protocol import SpanSink
from evalsi.traces.model import MappedSpan
from evalsi.traces.otlp import attributes_to_dict

from .logs import map_resource_logs, redact_resource_logs
from .mappers import DEFAULT_MAPPERS, Mapper, map_resource_spans

if TYPE_CHECKING:
    from .redaction import Redactor

@dataclass
class ExportStats:
    accepted: int = 0
    rejected: int = 0
    logs_accepted: int = 0
    logs_rejected: int = 0


class ExportHandler:
    """Maps an ``ExportTraceServiceRequest`` and hands its spans to the sink, one call per project."""

    def __init__(self, sink: SpanSink, *, default_project: str = DEFAULT_PROJECT,
                 mappers: Sequence[Mapper] = DEFAULT_MAPPERS, redactor: Redactor | None = None) -> None:
        self.sink = sink
        self.redactor = redactor
        self.default_project = check_project(default_project, "default project")
        self.mappers = tuple(mappers)
        self.stats = ExportStats()

    def _header(self, project_header: str | None) -> str:
        header = (project_header or "").strip()
        if header:
            check_project(header, f"{PROJECT_HEADER} header")
        return header

    def _project(self, header: str, resource: Resource, default: str) -> str:
        """The header's project, else the resource's ``evalsi.project``, else the default (maybe invalid)."""
        if header:
            return header
        attribute = attributes_to_dict(resource.attributes).get(PROJECT_ATTRIBUTE)
        return str(attribute) if attribute not in (None, "") else default

    async def export(self, request: ExportTraceServiceRequest, project_header: str | None = None,
                     default_project: str | None = None) -> ExportTraceServiceResponse:
        """Raises BadInputError for a bad project header (the whole request is refused, nothing stored).
        ``default_project``: this call's project for resources that name none (the gate's, from the credential)."""
        header = self._header(project_header)
        default = default_project or self.default_project
        by_project: dict[str, list[MappedSpan]] = {}
        rejected = 0
        reasons: list[str] = []
        for resource_spans in request.resource_spans:
            project = self._project(header, resource_spans.resource, default)
            if not is_project(project):
                count = sum(len(s.spans) for s in resource_spans.scope_spans)
                rejected += count
                reasons.append(f"resource attribute {PROJECT_ATTRIBUTE} {project!r} is not a project "
                               f"({PROJECT_RULE}): {count} spans rejected")
                continue
            # Redacted before mapping (in the mapper), so nothing mapped from a secret keeps it.
            redaction = self.redactor.span_redaction(project) if self.redactor is not None else None
            mapped = map_resource_spans(resource_spans, self.mappers, redaction)
            if self.redactor is not None:
                self.redactor.redact_spans(project, mapped.spans)
            rejected += mapped.rejected
            reasons.extend(f"{reason}" for reason in mapped.reasons if reason not in reasons)
            if mapped.spans:
                by_project.setdefault(project, []).extend(mapped.spans)
        for project, spans in by_project.items():
            await self.sink.consume(project, spans)
            self.stats.accepted += len(spans)
        self.stats.rejected += rejected
        response = ExportTraceServiceResponse()
        if rejected:
            response.partial_success.rejected_spans = rejected
            response.partial_success.error_message = f"{rejected} spans rejected: " + "; ".join(reasons)
        return response

    async def export_logs(self, request: ExportLogsServiceRequest, project_header: str | None = None,
                          default_project: str | None = None) -> ExportLogsServiceResponse:
        """Log records as rows keyed to their spans, through the same projects, redaction and sink as spans.

        Raises BadInputError for a bad project header (the whole request is refused, nothing stored).
        """
        header = self._header(project_header)
        default = default_project or self.default_project
        received_ns = time.time_ns()
        by_project: dict[str, list[MappedSpan]] = {}
        rejected = 0
        reasons: list[str] = []
        for resource_logs in request.resource_logs:
            project = self._project(header, resource_logs.resource, default)
            if not is_project(project):
                count = sum(len(s.log_records) for s in resource_logs.scope_logs)
                rejected += count
                reasons.append(f"resource attribute {PROJECT_ATTRIBUTE} {project!r} is not a project "
                               f"({PROJECT_RULE}): {count} log records rejected")
                continue
            if self.redactor is not None:
                redact_resource_logs(self.redactor, project, resource_logs)
            mapped = map_resource_logs(resource_logs, received_ns)
            if self.redactor is not None:
                self.redactor.redact_spans(project, mapped.spans)
            rejected += mapped.rejected
            reasons.extend(reason for reason in mapped.reasons if reason not in reasons)
            if mapped.spans:
                by_project.setdefault(project, []).extend(mapped.spans)
        for project, rows in by_project.items():
            await self.sink.consume(project, rows)
            self.stats.logs_accepted += len(rows)
        self.stats.logs_rejected += rejected
        response = ExportLogsServiceResponse()
        if rejected:
            response.partial_success.rejected_log_records = rejected
            response.partial_success.error_message = f"{rejected} log records rejected: " + "; ".join(reasons)
        return response
