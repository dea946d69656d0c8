"""The gRPC transport: a grpc.aio server whose generic handlers call the handler table.

Handlers are registered from the service descriptors with raw-bytes (de)serialization, so a malformed
message is INVALID_ARGUMENT naming the type rather than grpc's opaque INTERNAL, and oversize messages
are refused by grpc itself (RESOURCE_EXHAUSTED) at the configured limit. grpc.health.v1 follows the
readiness; server reflection lists every service.

With a gate (authentication on), every call of the table's services is admitted by it before its handler runs
(``api/access.py``: UNAUTHENTICATED or PERMISSION_DENIED otherwise), reflection too (``catalog.read``); health
stays open. With ``tls`` the port speaks TLS only, its certificate reloaded when the files change.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, NoReturn

import grpc
import structlog
from google.protobuf.message import DecodeError, Message
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2_grpc
from grpc_reflection.v1alpha._async import ReflectionServicer

from evalsi.api.access import admit_call
from evalsi.api.context import REQUEST_ID_HEADER, CallContext, build_context, request_id_from
from evalsi.api.errors import error_status
from evalsi.api.health import GrpcHealth, Readiness
from evalsi.api.metrics import ApiMetrics
from evalsi.api.table import HandlerTable, Method
from evalsi.auth.principal import PermissionDenied, Unauthenticated
from evalsi.authz.actions import REFLECTION
from evalsi.edge_checks import MAX_MESSAGE_DEPTH, check_message
from evalsi.errors import BadInputError
from evalsi.gate.access import Gate
from evalsi.gate.credentials import grpc_credentials, grpc_metadata
from evalsi.gate.tls import ServerTls
from evalsi.projects import PROJECT_HEADER

TRANSPORT = "grpc"
REFLECTION_METHOD = REFLECTION


def decode(message_type: type[Message], data: bytes) -> Message:
    """The request, refused (INVALID_ARGUMENT) when it does not decode or holds what no store can keep."""
    try:
        message = message_type.FromString(data)
    except DecodeError as exc:
        raise BadInputError(
            f"request: malformed protobuf, not a {message_type.DESCRIPTOR.full_name} ({exc}); messages nest "
            f"at most {MAX_MESSAGE_DEPTH} levels"
        ) from None
    check_message(message)
    return message


class GrpcServer:
    """Serves the table's services plus health and reflection on one address."""

    def __init__(
        self,
        table: HandlerTable,
        *,
        readiness: Readiness,
        metrics: ApiMetrics,
        host: str = "127.0.0.1",
        port: int = 0,
        max_request_bytes: int = 16 * 1024 * 1024,
        logger: Any = None,
        gate: Gate | None = None,
        tls: ServerTls | None = None,
    ) -> None:
        self._table = table
        self._gate = gate
        self._tls = tls
        self._readiness = readiness
        self._metrics = metrics
        # "unix:/path" (sandboxd's default) is a Unix socket, served as given.
        if host.startswith("unix:"):
            self._address = host
        else:
            self._address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self._max_request_bytes = max_request_bytes
        self._log = logger or structlog.get_logger("evalsi.api")
        self._server: grpc.aio.Server | None = None
        self._health: GrpcHealth | None = None
        self.port = 0

    async def start(self) -> int:
        """Bind and serve; returns the bound port."""
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", self._max_request_bytes),
                ("grpc.max_send_message_length", -1),
                ("grpc.so_reuseport", 0),
            ]
        )
        for service in self._table.services:
            handlers = {method.name: self._method_handler(method) for method in self._table.methods(service.full_name)}
            server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
        names = [service.full_name for service in self._table.services]
        self._health = GrpcHealth(self._readiness, names)
        health_pb2_grpc.add_HealthServicer_to_server(self._health.servicer, server)
        reflected = [*names, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME]
        if self._gate is None:
            reflection.enable_server_reflection(reflected, server)
        else:
            reflection_pb2_grpc.add_ServerReflectionServicer_to_server(_GatedReflection(self._gate, reflected), server)
        try:
            if self._tls is not None:
                self.port = server.add_secure_port(self._address, self._tls.grpc_credentials())
            else:
                self.port = server.add_insecure_port(self._address)
        except RuntimeError as exc:
            raise OSError(f"cannot listen for gRPC on {self._address}: {exc}") from None
        await self._health.start()
        await server.start()
        self._server = server
        return self.port

    async def stop(self, grace: float | None = None) -> None:
        """Refuse new calls, give running ones ``grace`` seconds, then cancel them."""
        if self._health is not None:
            await self._health.shutdown()
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None

    # --- calls ---

    def _method_handler(self, method: Method) -> grpc.RpcMethodHandler:
        if method.client_streaming and method.server_streaming:
            return grpc.stream_stream_rpc_method_handler(self._bidi(method))
        if method.server_streaming:
            return grpc.unary_stream_rpc_method_handler(self._server_stream(method))
        if method.client_streaming:
            return grpc.stream_unary_rpc_method_handler(self._client_stream(method))
        return grpc.unary_unary_rpc_method_handler(self._unary(method))

    def _unary(self, method: Method) -> Callable[[bytes, grpc.aio.ServicerContext], Any]:
        async def handle(data: bytes, context: grpc.aio.ServicerContext) -> bytes:
            call = _Call(self, method, context)
            try:
                request = decode(method.request_type, data)
                ctx = call.context(request)
                if self._gate is not None:
                    ctx = await call.admitted(self._gate, ctx, request)
                response = await method.handler(request, ctx)
                call.reply_metadata()
                return response.SerializeToString()
            except asyncio.CancelledError:
                call.cancelled()
                raise
            except Exception as exc:
                await call.fail(exc)
            finally:
                call.done()

        return handle

    def _server_stream(self, method: Method) -> Callable[[bytes, grpc.aio.ServicerContext], Any]:
        async def handle(data: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
            call = _Call(self, method, context)
            try:
                request = decode(method.request_type, data)
                ctx = call.context(request)
                if self._gate is not None:
                    ctx = await call.admitted(self._gate, ctx, request)
                await context.send_initial_metadata(((REQUEST_ID_HEADER, call.request_id),))
                async for response in method.handler(request, ctx):
                    yield response.SerializeToString()
            except asyncio.CancelledError:
                call.cancelled()
                raise
            except Exception as exc:
                await call.fail(exc)
            finally:
                call.done()

        return handle

    def _bidi(self, method: Method) -> Callable[[AsyncIterator[bytes], grpc.aio.ServicerContext], Any]:
        async def handle(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
            call = _Call(self, method, context)
            try:
                ctx = call.context(None)
                messages = _decoded(method, requests)
                if self._gate is not None:
                    ctx = await call.admitted(self._gate, ctx, None)
                    messages = _decided(messages, ctx, self._gate, every=True)
                await context.send_initial_metadata(((REQUEST_ID_HEADER, call.request_id),))
                async for response in method.handler(messages, ctx):
                    yield response.SerializeToString()
            except asyncio.CancelledError:
                call.cancelled()
                raise
            except Exception as exc:
                await call.fail(exc)
            finally:
                call.done()

        return handle

    def _client_stream(self, method: Method) -> Callable[[AsyncIterator[bytes], grpc.aio.ServicerContext], Any]:
        async def handle(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> bytes:
            call = _Call(self, method, context)
            try:
                ctx = call.context(None)
                messages = _decoded(method, requests)
                if self._gate is not None:
                    ctx = await call.admitted(self._gate, ctx, None)
                    messages = _decided(messages, ctx, self._gate, every=False)
                response = await method.handler(messages, ctx)
                call.reply_metadata()
                return response.SerializeToString()
            except asyncio.CancelledError:
                call.cancelled()
                raise
            except Exception as exc:
                await call.fail(exc)
            finally:
                call.done()

        return handle


async def _decoded(method: Method, requests: AsyncIterator[bytes]) -> AsyncIterator[Message]:
    async for data in requests:
        yield decode(method.request_type, data)


async def _decided(messages: AsyncIterator[Message], ctx: CallContext, gate: Gate, *, every: bool) -> (
        AsyncIterator[Message]):
    """A stream's messages, decided with their own attributes (the call was admitted before any arrived): each
    one of a bidirectional stream (EvaluateStream: every request names its evaluators), the first of a client
    stream (UploadDataset: the first chunk names the dataset). A refusal ends the stream, PERMISSION_DENIED."""
    endpoint = gate.endpoint(ctx.method)
    first = True
    async for message in messages:
        if first or every:
            await ctx.check_access(endpoint.attributes(message, gate.sources))
            first = False
        yield message


class _Call:
    """Bookkeeping of one call: request id, context, status, metrics."""

    def __init__(self, server: GrpcServer, method: Method, context: grpc.aio.ServicerContext) -> None:
        self.server = server
        self.method = method
        self.grpc = context
        self.started = time.perf_counter()
        self.code = "OK"
        self.headers = {
            item.key: item.value for item in (context.invocation_metadata() or ()) if isinstance(item.value, str)
        }
        self.request_id = request_id_from(self.headers.get(REQUEST_ID_HEADER))
        server._metrics.in_flight_of(TRANSPORT).inc()

    def context(self, request: Message | None) -> CallContext:
        remaining = self.grpc.time_remaining()
        return build_context(
            self.method.rpc,
            self.headers,
            request,
            transport=TRANSPORT,
            deadline=None if remaining is None else time.monotonic() + remaining,
            request_id=self.request_id,
        )

    async def admitted(self, gate: Gate, ctx: CallContext, request: Message | None) -> CallContext:
        return await admit_call(gate, ctx, grpc_credentials(self.grpc, self.headers), request)

    def reply_metadata(self) -> None:
        """A unary answer's request id rides in its trailing metadata, beside the status (where an error's is too):
        sending it as initial metadata is a batch of its own through grpc's completion queue before the answer's
        (+100 us of api CPU and +150 us per call at load 13 here, benchmarks.md)."""
        self.grpc.set_trailing_metadata(((REQUEST_ID_HEADER, self.request_id),))

    def cancelled(self) -> None:
        """The client went away, or (when its deadline passed) grpc cancelled the call for it."""
        remaining = self.grpc.time_remaining()
        self.code = "DEADLINE_EXCEEDED" if remaining is not None and remaining <= 0 else "CANCELLED"

    async def fail(self, exc: Exception) -> NoReturn:
        status = error_status(exc, request_id=self.request_id, method=self.method.rpc, logger=self.server._log)
        self.code = status.code.name
        await self.grpc.abort(status.code, status.message, trailing_metadata=status.grpc_trailing_metadata())
        raise AssertionError("abort returned")  # pragma: no cover - abort always raises

    def done(self) -> None:
        metrics = self.server._metrics
        metrics.in_flight_of(TRANSPORT).dec()
        metrics.observe(TRANSPORT, self.method.rpc, self.code, time.perf_counter() - self.started)


class _GatedReflection(ReflectionServicer):
    """Server reflection behind the gate: listing the services is ``catalog.read`` (any project's viewer)."""

    def __init__(self, gate: Gate, service_names: list[str]) -> None:
        super().__init__(service_names)
        self._gate = gate

    async def ServerReflectionInfo(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        headers = grpc_metadata(context)
        try:  # in the project the call names, as every other call (catalog.read is a viewer's, per project)
            await self._gate.admit(REFLECTION_METHOD, grpc_credentials(context, headers),
                                   project=headers.get(PROJECT_HEADER, "").strip())
        except Unauthenticated as exc:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, str(exc))
        except PermissionDenied as exc:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
        async for response in super().ServerReflectionInfo(request_iterator, context):
            yield response
