"""The public API service's engine: one handler table served over gRPC and HTTP/JSON.

Assemble with :func:`build_table` (or :class:`HandlerTable` directly) and serve with :class:`ApiServer`;
``services/api`` (the ``evalsi-api`` process) only parses flags and wires the real stores and bus.
"""

from __future__ import annotations

from evalsi.api.auth_handlers import AuthHandlers
from evalsi.api.case_handlers import CaseHandlers
from evalsi.api.catalog_handlers import CatalogHandlers
from evalsi.api.config import HandlerLimits, ServerConfig
from evalsi.api.context import REQUEST_ID_HEADER, TIMEOUT_HEADER, CallContext, build_context
from evalsi.api.dependencies import (
    Control,
    Evaluate,
    LoadRecords,
    ValidateRun,
    Watch,
)
from evalsi.api.errors import ApiError, ErrorStatus, NotFoundError, error_status
from evalsi.api.evaluation_handlers import EvaluationHandlers
from evalsi.api.grpc_server import GrpcServer
from evalsi.api.handlers_common import RESUMABLE_STATES, TERMINAL_STATES
from evalsi.api.health import GrpcHealth, Readiness
from evalsi.api.http_server import HttpServer
from evalsi.api.local_evaluation import LocalEvaluation
from evalsi.api.metrics import ApiMetrics
from evalsi.api.monitor_handlers import MonitorHandlers
from evalsi.api.run_dataset import load_run_dataset
from evalsi.api.run_handlers import RunHandlers
from evalsi.api.server import ApiServer
from evalsi.api.table import (
    AUTH_SERVICE,
    CASE_SERVICE,
    CATALOG_SERVICE,
    EVALUATION_SERVICE,
    MONITOR_SERVICE,
    PUBLIC_SERVICES,
    RUN_SERVICE,
    TRACE_SERVICE,
    HandlerTable,
    Method,
)
from evalsi.api.trace_handlers import TraceHandlers
from evalsi.api.transcoding import Route, Router, routes_for
from evalsi.datasets.run_records import DATASET_LABEL


def build_table(
    *,
    evaluation: EvaluationHandlers,
    runs: RunHandlers,
    catalog: CatalogHandlers,
    traces: TraceHandlers | None = None,
    monitor: MonitorHandlers | None = None,
    auth: AuthHandlers | None = None,
    cases: CaseHandlers | None = None,
) -> HandlerTable:
    """The table of the public services; without ``traces``, ``monitor``, ``auth`` or ``cases``, those services
    answer that no store is configured."""
    return HandlerTable(
        {
            EVALUATION_SERVICE: evaluation,
            RUN_SERVICE: runs,
            CATALOG_SERVICE: catalog,
            TRACE_SERVICE: traces or TraceHandlers(None),
            MONITOR_SERVICE: monitor or MonitorHandlers(None, None, registry=catalog.registry),
            AUTH_SERVICE: auth or AuthHandlers(None),
            CASE_SERVICE: cases or CaseHandlers(None),
        }
    )


__all__ = [  # noqa: RUF022 - grouped for readers
    # serving
    "ApiServer",
    "ServerConfig",
    "HandlerLimits",
    "Readiness",
    "ApiMetrics",
    "build_table",
    # handlers and what they depend on
    "CallContext",
    "CatalogHandlers",
    "EvaluationHandlers",
    "LocalEvaluation",
    "RunHandlers",
    "TraceHandlers",
    "MonitorHandlers",
    "AuthHandlers",
    "CaseHandlers",
    "Control",
    "Evaluate",
    "LoadRecords",
    "ValidateRun",
    "Watch",
    "load_run_dataset",
    "DATASET_LABEL",
    "TERMINAL_STATES",
    "RESUMABLE_STATES",
    # errors
    "ApiError",
    "ErrorStatus",
    "NotFoundError",
    "error_status",
    # the table and its transports
    "HandlerTable",
    "Method",
    "PUBLIC_SERVICES",
    "EVALUATION_SERVICE",
    "RUN_SERVICE",
    "CATALOG_SERVICE",
    "TRACE_SERVICE",
    "MONITOR_SERVICE",
    "AUTH_SERVICE",
    "CASE_SERVICE",
    "GrpcServer",
    "GrpcHealth",
    "HttpServer",
    "Route",
    "Router",
    "routes_for",
    "build_context",
    "REQUEST_ID_HEADER",
    "TIMEOUT_HEADER",
]
