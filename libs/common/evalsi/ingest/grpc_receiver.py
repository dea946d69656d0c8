"""OTLP/gRPC: the collector's ``TraceService/Export`` and ``LogsService/Export`` on grpc.aio, through the same
``ExportHandler``.

gRPC itself refuses a message over ``max_body_bytes`` with RESOURCE_EXHAUSTED and handles gzip. A bad
``x-evalsi-project`` metadata value is INVALID_ARGUMENT; a failing sink UNAVAILABLE, which OTLP clients retry.
"""

from __future__ import annotations

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from evalsi.errors import BadInputError, InfraError

from .handler import PROJECT_HEADER, ExportHandler
from .http_receiver import DEFAULT_MAX_BODY


def _project(context: grpc.aio.ServicerContext) -> str | None:
    project = None
    for key, value in context.invocation_metadata() or ():
        if key == PROJECT_HEADER:
            project = value if isinstance(value, str) else value.decode()
    return project


class OtlpGrpcReceiver(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, handler: ExportHandler) -> None:
        self.handler = handler

    async def Export(
        self, request: ExportTraceServiceRequest, context: grpc.aio.ServicerContext
    ) -> ExportTraceServiceResponse:
        try:
            return await self.handler.export(request, _project(context))
        except BadInputError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except InfraError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"could not store spans, retry: {exc}")
        raise AssertionError("unreachable: abort raises")


class OtlpGrpcLogsReceiver(logs_service_pb2_grpc.LogsServiceServicer):
    def __init__(self, handler: ExportHandler) -> None:
        self.handler = handler

    async def Export(
        self, request: ExportLogsServiceRequest, context: grpc.aio.ServicerContext
    ) -> ExportLogsServiceResponse:
        try:
            return await self.handler.export_logs(request, _project(context))
        except BadInputError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except InfraError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"could not store log records, retry: {exc}")
        raise AssertionError("unreachable: abort raises")


async def start_grpc_receiver(
    handler: ExportHandler, host: str, port: int, *, max_body_bytes: int = DEFAULT_MAX_BODY, reuse_port: bool = False
) -> tuple[grpc.aio.Server, int]:
    """Serve TraceService and LogsService on host:port (0 picks a free port); returns the server and the port.
    ``reuse_port``: share the port with other processes (SO_REUSEPORT), as ``evalsi-ingest --processes`` does."""
    server = grpc.aio.server(options=[
        ("grpc.max_receive_message_length", max_body_bytes),
        ("grpc.so_reuseport", int(reuse_port)),
    ])
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(OtlpGrpcReceiver(handler), server)
    logs_service_pb2_grpc.add_LogsServiceServicer_to_server(OtlpGrpcLogsReceiver(handler), server)
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    bound = server.add_insecure_port(address)
    if not bound:
        raise InfraError(f"could not listen for OTLP/gRPC on {address}")
    await server.start()
    return server, bound
