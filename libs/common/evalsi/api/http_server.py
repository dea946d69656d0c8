"""The HTTP/JSON transport: aiohttp, one catch-all route dispatching through the descriptor-derived router.

Unary RPCs answer protobuf JSON; server-streaming ones (WatchRun) answer newline-delimited JSON, an
error after the first line arriving as a last line ``{"error": {google.rpc.Status}}``. ``/healthz``,
``/readyz`` and ``/metrics`` sit beside the API routes, and so does UploadDataset's (a client stream has no
descriptor route; its body is a file's raw bytes, streamed: see ``api/datasets_handlers.py``).

With a gate (authentication on), every RPC route is admitted by it (``api/access.py``): the caller is
authenticated before the body is read, the call decided once the request is built (401 with ``WWW-Authenticate``,
or 403); ``/metrics`` is ``metrics.read``; ``/healthz``, ``/readyz`` and ``/.well-known/evalsi-auth`` (the
issuer and client id ``evalsi login`` uses, public) stay open, as do the web UI's static files under ``/ui/``
(``evalsi.ui.serve``: they hold no data; its pages call the API with the viewer's credential). With ``tls`` the
port speaks HTTPS only.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import grpc
import structlog
from aiohttp import web
from google.protobuf.message import Message

from evalsi.api.access import admit_call
from evalsi.api.context import REQUEST_ID_HEADER, TIMEOUT_HEADER, CallContext, build_context, request_id_from
from evalsi.api.datasets_handlers import UPLOAD_CHUNK_BYTES, UPLOAD_ROUTE, UPLOAD_RPC, upload_request
from evalsi.api.errors import ApiError, ErrorStatus, error_status, too_large
from evalsi.api.health import Readiness
from evalsi.api.metrics import ApiMetrics
from evalsi.api.table import HandlerTable, Method
from evalsi.api.transcoding import MethodNotAllowed, RouteNotFound, Router, build_request, routes_for, to_json
from evalsi.auth.principal import Credentials, Principal
from evalsi.authz.actions import METRICS as METRICS_ENDPOINT
from evalsi.errors import BadInputError
from evalsi.gate.access import Gate
from evalsi.gate.credentials import http_credentials
from evalsi.gate.tls import ServerTls
from evalsi.ui.serve import add_ui_routes
from evalsi.v1alpha1.run_service_pb2 import UploadDatasetRequest

TRANSPORT = "http"
NDJSON = "application/x-ndjson"
METRICS_PATH = "/metrics"
WELL_KNOWN_AUTH = "/.well-known/evalsi-auth"
_BINARY_PROTOBUF = frozenset({"application/x-protobuf", "application/protobuf", "application/vnd.google.protobuf"})


class HttpServer:
    """Serves every RPC with a ``google.api.http`` option, plus health, readiness and metrics."""

    def __init__(
        self,
        table: HandlerTable,
        *,
        readiness: Readiness,
        metrics: ApiMetrics,
        host: str = "127.0.0.1",
        port: int = 0,
        max_request_bytes: int = 16 * 1024 * 1024,
        grace_period_s: float = 10.0,
        logger: Any = None,
        gate: Gate | None = None,
        tls: ServerTls | None = None,
        login: Mapping[str, Any] | None = None,
    ) -> None:
        self._gate = gate
        self._tls = tls
        self._login = dict(login or {})
        self._methods = {method.rpc: method for method in table}
        self.router = Router(routes_for(method.descriptor for method in table))
        self._readiness = readiness
        self._metrics = metrics
        self._host = host
        self._port = port
        self._max_request_bytes = max_request_bytes
        self._grace = grace_period_s
        self._log = logger or structlog.get_logger("evalsi.api")
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.app = web.Application(client_max_size=max_request_bytes)
        self.app.router.add_get("/healthz", self._healthz)
        self.app.router.add_get("/readyz", self._readyz)
        self.app.router.add_get(METRICS_PATH, self._metrics_text)
        if self._login:
            self.app.router.add_get(WELL_KNOWN_AUTH, self._well_known_auth)
        if UPLOAD_RPC in self._methods:
            self.app.router.add_post(UPLOAD_ROUTE, self._upload_dataset)
        add_ui_routes(self.app)  # the web UI's static files (no data, no credential), before the catch-all
        self.app.router.add_route("*", "/{tail:.*}", self._dispatch)

    async def start(self) -> int:
        """Bind and serve; returns the bound port."""
        runner = web.AppRunner(
            self.app, access_log=None, handler_cancellation=True, shutdown_timeout=self._grace
        )
        await runner.setup()
        ssl_context = self._tls.ssl_context() if self._tls is not None else None
        site = web.TCPSite(runner, self._host, self._port, ssl_context=ssl_context)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise OSError(f"cannot listen for HTTP on {self._host}:{self._port}: {exc.strerror or exc}") from None
        self._runner = runner
        self.port = runner.addresses[0][1]
        return self.port

    async def stop(self) -> None:
        """Stop listening, let running requests finish within the grace period, then cancel them."""
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    # --- health and metrics ---

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _readyz(self, request: web.Request) -> web.Response:
        if self._readiness.ready:
            return web.json_response({"status": "ready"})
        return web.json_response({"status": "not ready", "reasons": self._readiness.reasons}, status=503)

    async def _metrics_text(self, request: web.Request) -> web.Response:
        if self._gate is not None:
            try:
                await self._gate.admit(METRICS_ENDPOINT, http_credentials(request))
            except Exception as exc:
                request_id = request_id_from(request.headers.get(REQUEST_ID_HEADER))
                status = error_status(exc, request_id=request_id, method=METRICS_PATH, logger=self._log)
                return self._refusal(status, exc)
        body, content_type = self._metrics.render()
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def _well_known_auth(self, request: web.Request) -> web.Response:
        return web.json_response(self._login)

    def _refusal(self, status: ErrorStatus, exc: BaseException) -> web.Response:
        response = _error_response(status)
        if status.http_status == 401 and self._gate is not None:
            response.headers["WWW-Authenticate"] = self._gate.challenge(exc)
        return response

    async def _caller(self, request: web.Request, method: str) -> tuple[Credentials | None, Principal | None]:
        """With a gate: the credentials and the authenticated principal, before any body is read."""
        if self._gate is None:
            return None, None
        credentials = http_credentials(request)
        return credentials, await self._gate.authenticate(credentials, method)

    # --- dataset uploads ---

    async def _upload_dataset(self, request: web.Request) -> web.StreamResponse:
        """UploadDataset over HTTP: the body is the file, streamed into the RPC's chunks (never read whole)."""
        method = self._methods[UPLOAD_RPC]
        request_id = request_id_from(request.headers.get(REQUEST_ID_HEADER))

        async def respond(outcome: _Outcome) -> web.StreamResponse:
            credentials, principal = await self._caller(request, method.rpc)
            first = upload_request(request.match_info["name"], request.query)
            ctx = build_context(method.rpc, request.headers, None, transport=TRANSPORT,
                                deadline=_deadline(request.headers), request_id=request_id)
            if self._gate is not None and credentials is not None:
                ctx = await admit_call(self._gate, ctx, credentials, first, principal)

            async def chunks() -> AsyncIterator[UploadDatasetRequest]:
                yield first
                async for data in request.content.iter_chunked(UPLOAD_CHUNK_BYTES):
                    yield UploadDatasetRequest(data=data)

            return await _answer(method, chunks(), ctx)

        return await self._served(method, request_id, respond)

    # --- RPCs ---

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        request_id = request_id_from(request.headers.get(REQUEST_ID_HEADER))
        raw_path = request.rel_url.raw_path
        try:
            route, captures = self.router.match(request.method, raw_path)
        except RouteNotFound:
            self._metrics.unrouted.labels("404").inc()
            return _error_response(
                ErrorStatus(
                    grpc.StatusCode.NOT_FOUND,
                    f"no route for {request.method} {raw_path}; docs/api.md lists the routes",
                    request_id,
                    404,
                )
            )
        except MethodNotAllowed as exc:
            self._metrics.unrouted.labels("405").inc()
            response = _error_response(
                ErrorStatus(
                    grpc.StatusCode.UNIMPLEMENTED,
                    f"{request.method} is not allowed on {raw_path}; allowed: {', '.join(exc.allowed)}",
                    request_id,
                    405,
                )
            )
            response.headers["Allow"] = ", ".join(exc.allowed)
            return response
        method = self._methods[route.rpc]

        async def respond(outcome: _Outcome) -> web.StreamResponse:
            credentials, principal = await self._caller(request, method.rpc)
            body = await self._read_body(request) if route.body else b""
            message = build_request(route, captures, request.rel_url.query.items(), body)
            ctx = build_context(
                method.rpc,
                request.headers,
                message,
                transport=TRANSPORT,
                deadline=_deadline(request.headers),
                request_id=request_id,
            )
            if self._gate is not None and credentials is not None:
                ctx = await admit_call(self._gate, ctx, credentials, message, principal)
            if method.server_streaming:
                return await self._stream(request, method, message, ctx, outcome)
            return await _answer(method, message, ctx)

        return await self._served(method, request_id, respond)

    async def _served(
        self, method: Method, request_id: str, respond: Callable[[_Outcome], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """One call of ``method``, for every route: counted in flight, an error mapped to its status response,
        and its duration observed under the status code it ended with."""
        outcome = _Outcome()
        started = time.perf_counter()
        self._metrics.in_flight_of(TRANSPORT).inc()
        try:
            return await respond(outcome)
        except asyncio.CancelledError:
            outcome.code = "CANCELLED"
            raise
        except Exception as exc:
            status = error_status(exc, request_id=request_id, method=method.rpc, logger=self._log)
            outcome.code = status.code.name
            return self._refusal(status, exc)
        finally:
            self._metrics.in_flight_of(TRANSPORT).dec()
            self._metrics.observe(TRANSPORT, method.rpc, outcome.code, time.perf_counter() - started)

    async def _read_body(self, request: web.Request) -> bytes:
        # Any JSON-ish or unlabelled body is read as JSON (curl -d sends form encoding); binary protobuf
        # is refused by name, since reading it as JSON would only give a confusing parse error.
        media = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if media in _BINARY_PROTOBUF or media.startswith("application/grpc"):
            raise ApiError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"Content-Type: {media!r} is not accepted over HTTP; send application/json (the protobuf JSON "
                "mapping), or use the gRPC port for binary protobuf",
                http_status=415,
            )
        length = request.content_length
        if length is not None and length > self._max_request_bytes:
            raise too_large("request body", length, self._max_request_bytes)
        try:
            return await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise too_large("request body", None, self._max_request_bytes) from None

    async def _stream(
        self, request: web.Request, method: Method, message: Message, ctx: CallContext, outcome: _Outcome
    ) -> web.StreamResponse:
        """NDJSON. The first message is awaited before the headers go, so an error at the start (a run
        that does not exist) is an ordinary error response with its status; a later one is the last line."""
        responses: AsyncIterator[Message] = method.handler(message, ctx)
        try:
            async with asyncio.timeout(ctx.time_remaining()):
                first = await anext(responses, None)
            stream = web.StreamResponse(headers={"Content-Type": NDJSON, REQUEST_ID_HEADER: ctx.request_id})
            await stream.prepare(request)
            try:
                if first is not None:
                    await stream.write(to_json(first).encode() + b"\n")
                async with asyncio.timeout(ctx.time_remaining()):
                    async for item in responses:
                        await stream.write(to_json(item).encode() + b"\n")
            except ConnectionResetError:
                outcome.code = "CANCELLED"
                return stream
            except Exception as exc:
                status = error_status(exc, request_id=ctx.request_id, method=method.rpc, logger=self._log)
                outcome.code = status.code.name
                await stream.write(json.dumps({"error": status.to_dict()}).encode() + b"\n")
            await stream.write_eof()
            return stream
        finally:
            close = getattr(responses, "aclose", None)
            if close is not None:
                await close()


async def _answer(method: Method, request: Any, ctx: CallContext) -> web.Response:
    """A unary call's protobuf JSON answer, the call bounded by the request's deadline."""
    async with asyncio.timeout(ctx.time_remaining()):
        result = await method.handler(request, ctx)
    return web.Response(text=to_json(result), content_type="application/json",
                        headers={REQUEST_ID_HEADER: ctx.request_id})


class _Outcome:
    """The status code of a call, filled in wherever it is decided."""

    code = "OK"


def _deadline(headers: Mapping[str, str]) -> float | None:
    value = headers.get(TIMEOUT_HEADER)
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise BadInputError(f"{TIMEOUT_HEADER} header: expected seconds (a positive number), got {value!r}")
    return time.monotonic() + seconds


def _error_response(status: ErrorStatus) -> web.Response:
    return web.Response(
        text=status.to_json(),
        status=status.http_status,
        content_type="application/json",
        headers={REQUEST_ID_HEADER: status.request_id},
    )
