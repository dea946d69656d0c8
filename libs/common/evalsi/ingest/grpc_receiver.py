"""OTLP/gRPC: the collector's ``TraceService/Export`` and ``LogsService/Export`` on grpc.aio, through the same
``ExportHandler``.

gRPC itself refuses a message over ``max_body_bytes`` with RESOURCE_EXHAUSTED and handles gzip. Requests
arrive as bytes and are decoded here, so a body that is not the service's protobuf (or nests deeper than
protobuf's limit) is INVALID_ARGUMENT naming the type, not grpc's opaque UNKNOWN; so is a bad
``x-evalsi-project`` metadata value. A failing sink is UNAVAILABLE, which OTLP clients retry.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from evalsi.errors import BadInputError, InfraError
from evalsi.projects import PROJECT_HEADER

from .handler import ExportHandler
from .http_receiver import DEFAULT_MAX_BODY

TRACE_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"
_Request = TypeVar("_Request", ExportTraceServiceRequest, ExportLogsServiceRequest)


def _project(context: grpc.aio.ServicerContext) -> str | None:
    project = None
    for key, value in context.invocation_metadata() or ():
        if key == PROJECT_HEADER:
            project = value if isinstance(value, str) else value.decode()
    return project


def decode(message_type: type[_Request], data: bytes) -> _Request:
    """The request message; ``BadInputError`` naming the type when the bytes are not one."""
    try:
        return message_type.FromString(data)
    except (DecodeError, RuntimeError) as exc:
        raise BadInputError(f"malformed protobuf, not an {message_type.DESCRIPTOR.full_name}: {exc}") from None


def _export_method(
    message_type: type[_Request], export: Callable[[_Request, str | None], Awaitable[Message]], what: str
) -> Callable[[bytes, grpc.aio.ServicerContext], Awaitable[bytes]]:
    """One ``Export`` method: decode, hand to the handler, map errors to the statuses OTLP clients expect.
    A plain coroutine function, as grpc.aio tells async handlers from sync ones by that."""

    async def handle(data: bytes, context: grpc.aio.ServicerContext) -> bytes:
        try:
            response = await export(decode(message_type, data), _project(context))
        except BadInputError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except InfraError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"could not store {what}, retry: {exc}")
        return response.SerializeToString()

    return handle


def otlp_handlers(handler: ExportHandler) -> tuple[grpc.GenericRpcHandler, grpc.GenericRpcHandler]:
    """TraceService and LogsService, taking raw bytes (no deserializer) so decoding errors are ours to report."""
    traces = _export_method(ExportTraceServiceRequest, handler.export, "spans")
    logs = _export_method(ExportLogsServiceRequest, handler.export_logs, "log records")
    return (
        grpc.method_handlers_generic_handler(TRACE_SERVICE, {"Export": grpc.unary_unary_rpc_method_handler(traces)}),
        grpc.method_handlers_generic_handler(LOGS_SERVICE, {"Export": grpc.unary_unary_rpc_method_handler(logs)}),
    )


async def start_grpc_receiver(
    handler: ExportHandler, host: str, port: int, *, max_body_bytes: int = DEFAULT_MAX_BODY, reuse_port: bool = False
) -> tuple[grpc.aio.Server, int]:
    """Serve TraceService and LogsService on host:port (0 picks a free port); returns the server and the port.
    ``reuse_port``: share the port with other processes (SO_REUSEPORT), as ``evalsi-ingest --processes`` does."""
    server = grpc.aio.server(options=[
        ("grpc.max_receive_message_length", max_body_bytes),
        ("grpc.so_reuseport", int(reuse_port)),
    ])
    server.add_generic_rpc_handlers(otlp_handlers(handler))
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    bound = server.add_insecure_port(address)
    if not bound:
        raise InfraError(f"could not listen for OTLP/gRPC on {address}")
    await server.start()
    return server, bound
