"""OTLP/gRPC: the collector's ``TraceService/Export`` on grpc.aio, through the same ``ExportHandler``.

gRPC itself refuses a message over ``max_body_bytes`` with RESOURCE_EXHAUSTED and handles gzip. A bad
``x-evalsi-project`` metadata value is INVALID_ARGUMENT; a failing sink UNAVAILABLE, which OTLP clients retry.
"""

from __future__ import annotations

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from evalsi.errors import BadInputError, InfraError

from .handler import PROJECT_HEADER, ExportHandler
from .http_receiver import DEFAULT_MAX_BODY


class OtlpGrpcReceiver(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, handler: ExportHandler) -> None:
        self.handler = handler

    async def Export(
        self, request: ExportTraceServiceRequest, context: grpc.aio.ServicerContext
    ) -> ExportTraceServiceResponse:
        project = None
        for key, value in context.invocation_metadata() or ():
            if key == PROJECT_HEADER:
                project = value if isinstance(value, str) else value.decode()
        try:
            return await self.handler.export(request, project)
        except BadInputError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except InfraError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"could not store spans, retry: {exc}")
        raise AssertionError("unreachable: abort raises")


async def start_grpc_receiver(
    handler: ExportHandler, host: str, port: int, *, max_body_bytes: int = DEFAULT_MAX_BODY
) -> tuple[grpc.aio.Server, int]:
    """Serve TraceService on host:port (0 picks a free port); returns the started server and the port bound."""
    server = grpc.aio.server(options=[
        ("grpc.max_receive_message_length", max_body_bytes),
        ("grpc.so_reuseport", 0),
    ])
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(OtlpGrpcReceiver(handler), server)
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    bound = server.add_insecure_port(address)
    if not bound:
        raise InfraError(f"could not listen for OTLP/gRPC on {address}")
    await server.start()
    return server, bound
