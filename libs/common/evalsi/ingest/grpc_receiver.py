"""OTLP/gRPC: the collector's ``TraceService/Export`` and ``LogsService/Export`` on grpc.aio, through the same
``ExportHandler``.

gRPC itself refuses a message over ``max_body_bytes`` with RESOURCE_EXHAUSTED and handles gzip. Requests
arrive as bytes and are decoded here, so a body that is not the service's protobuf (or nests deeper than
protobuf's limit) is INVALID_ARGUMENT naming the type, not grpc's opaque UNKNOWN; so is a bad
``x-evalsi-project`` metadata value. A failing sink is UNAVAILABLE, which OTLP clients retry.
With a gate (authentication on) each export is admitted first (``evalsi.gate.otlp``): UNAUTHENTICATED, or
PERMISSION_DENIED for a batch naming a project the caller may not write; with ``tls`` the port is TLS only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import grpc
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from evalsi.auth.principal import PermissionDenied, Unauthenticated
from evalsi.errors import BadInputError, InfraError
from evalsi.gate.credentials import grpc_credentials, grpc_metadata
from evalsi.gate.exposure import refuse_ungated_listener
from evalsi.gate.otlp import admit_export
from evalsi.projects import PROJECT_HEADER

from .handler import ExportHandler
from .http_receiver import DEFAULT_MAX_BODY

if TYPE_CHECKING:
    from evalsi.gate.access import Gate
    from evalsi.gate.tls import ServerTls

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
    message_type: type[_Request], export: Callable[[_Request, str | None, str | None], Awaitable[Message]], what: str,
    gate: Gate | None = None, default_project: str = "",
) -> Callable[[bytes, grpc.aio.ServicerContext], Awaitable[bytes]]:
    """One ``Export`` method: decode, hand to the handler, map errors to the statuses OTLP clients expect.
    A plain coroutine function, as grpc.aio tells async handlers from sync ones by that."""
    method = f"{TRACE_SERVICE if message_type is ExportTraceServiceRequest else LOGS_SERVICE}/Export"

    async def handle(data: bytes, context: grpc.aio.ServicerContext) -> bytes:
        try:
            if gate is None:
                response = await export(decode(message_type, data), _project(context), None)
            else:
                credentials = grpc_credentials(context, grpc_metadata(context), "otlp-grpc")
                principal = await gate.authenticate(credentials, method)  # before anything is decoded
                request, header = decode(message_type, data), _project(context)
                default = await admit_export(gate, method, credentials, request, principal=principal,
                                             header_project=(header or "").strip(), default_project=default_project)
                response = await export(request, header, default)
        except Unauthenticated as exc:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, str(exc))
        except PermissionDenied as exc:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
        except BadInputError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except InfraError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"could not store {what}, retry: {exc}")
        return response.SerializeToString()

    return handle


def otlp_handlers(handler: ExportHandler, gate: Gate | None = None) -> tuple[
        grpc.GenericRpcHandler, grpc.GenericRpcHandler]:
    """TraceService and LogsService, taking raw bytes (no deserializer) so decoding errors are ours to report."""
    traces = _export_method(ExportTraceServiceRequest, handler.export, "spans", gate, handler.default_project)
    logs = _export_method(ExportLogsServiceRequest, handler.export_logs, "log records", gate, handler.default_project)
    return (
        grpc.method_handlers_generic_handler(TRACE_SERVICE, {"Export": grpc.unary_unary_rpc_method_handler(traces)}),
        grpc.method_handlers_generic_handler(LOGS_SERVICE, {"Export": grpc.unary_unary_rpc_method_handler(logs)}),
    )


async def start_grpc_receiver(
    handler: ExportHandler, host: str, port: int, *, max_body_bytes: int = DEFAULT_MAX_BODY, reuse_port: bool = False,
    gate: Gate | None = None, tls: ServerTls | None = None, open_on_purpose: bool = False,
) -> tuple[grpc.aio.Server, int]:
    """Serve TraceService and LogsService on host:port (0 picks a free port); returns the server and the port.
    ``reuse_port``: share the port with other processes (SO_REUSEPORT), as ``evalsi-ingest --processes`` does.
    Without a ``gate``, beyond loopback only ``open_on_purpose`` (``--no-auth``)."""
    refuse_ungated_listener(host, gate is not None, open_on_purpose=open_on_purpose, what="OTLP/gRPC")
    server = grpc.aio.server(options=[
        ("grpc.max_receive_message_length", max_body_bytes),
        ("grpc.so_reuseport", int(reuse_port)),
    ])
    server.add_generic_rpc_handlers(otlp_handlers(handler, gate))
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    bound = server.add_secure_port(address, tls.grpc_credentials()) if tls else server.add_insecure_port(address)
    if not bound:
        raise InfraError(f"could not listen for OTLP/gRPC on {address}")
    await server.start()
    return server, bound
