"""OTLP/HTTP: ``POST /v1/traces`` and ``POST /v1/logs`` with a protobuf or JSON body, optionally gzip, as the
OTLP spec defines them.

Answers (both paths alike):
- 200 with an ``ExportTraceServiceResponse``/``ExportLogsServiceResponse`` (``partial_success`` when spans or
  log records were rejected), in the request's encoding;
- 400 for a body that does not decode (bad gzip, protobuf or JSON, or an invalid ``x-evalsi-project``);
- 413 for a body over ``max_body_bytes``, compressed or after decompression: refused, never accepted and dropped;
- 415 for any content type but ``application/x-protobuf`` and ``application/json``;
- 503 when the sink fails (retryable, per the spec);
- with a gate (authentication on): 401 with ``WWW-Authenticate`` before the body is read, and 403 for a batch
  naming a project the caller may not write (``evalsi.gate.otlp``).
Error bodies are a ``google.rpc.Status`` in the request's encoding (protobuf when it is unknown).
"""

from __future__ import annotations

import base64
import binascii
import socket
import ssl
import zlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import web
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from evalsi.auth.principal import PermissionDenied, Principal, Unauthenticated
from evalsi.authz.actions import OTLP_HTTP_LOGS, OTLP_HTTP_TRACES
from evalsi.edge_checks import load_json
from evalsi.errors import BadInputError, InfraError
from evalsi.gate.credentials import http_credentials
from evalsi.gate.exposure import refuse_ungated_listener
from evalsi.gate.otlp import admit_export
from evalsi.projects import PROJECT_HEADER

from .handler import ExportHandler

if TYPE_CHECKING:
    from evalsi.gate.access import Gate

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
TRACES_PATH = "/v1/traces"
LOGS_PATH = "/v1/logs"
DEFAULT_MAX_BODY = 16 * 1024 * 1024


class _TooLarge(Exception):
    pass


def _gunzip(body: bytes, limit: int) -> bytes:
    # Bounded, so a small gzip bomb cannot make us hold gigabytes: more than ``limit`` is refused as 413.
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, limit + 1)
        if len(out) > limit:
            raise _TooLarge
        if not inflater.eof:
            raise ValueError("truncated gzip stream")
    except zlib.error as exc:
        raise ValueError(f"bad gzip: {exc}") from exc
    return out


_ID_FIELDS = ("traceId", "spanId", "parentSpanId")
_Request = TypeVar("_Request", ExportTraceServiceRequest, ExportLogsServiceRequest)


def _convert_ids(obj: dict[str, Any], path: str) -> None:
    """OTLP JSON writes ids as hex where the protobuf JSON mapping expects base64: convert one object's."""
    for name in _ID_FIELDS:
        value = obj.get(name)
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            raise ValueError(f"{path}.{name}: a hex string is expected")
        try:
            obj[name] = base64.b64encode(bytes.fromhex(value)).decode("ascii")
        except ValueError as exc:
            raise ValueError(f"{path}.{name} {value!r}: not hex") from exc


def _objects(parent: dict[str, Any], *names: str) -> list[tuple[int, dict[str, Any]]]:
    """The objects in the list ``parent`` holds under one of ``names``, with their indexes. Anything of
    another shape is skipped here: the protobuf parser after the conversion refuses it, naming the field."""
    for name in names:
        value = parent.get(name)
        if value is not None:
            items = value if isinstance(value, list) else []
            return [(index, item) for index, item in enumerate(items) if isinstance(item, dict)]
    return []


def _hex_log_ids_to_base64(request: dict[str, Any]) -> None:
    for r, resource_logs in _objects(request, "resourceLogs", "resource_logs"):
        for s, scope_logs in _objects(resource_logs, "scopeLogs", "scope_logs"):
            for i, record in _objects(scope_logs, "logRecords", "log_records"):
                _convert_ids(record, f"resourceLogs[{r}].scopeLogs[{s}].logRecords[{i}]")


def _hex_ids_to_base64(request: dict[str, Any]) -> None:
    for r, resource_spans in _objects(request, "resourceSpans", "resource_spans"):
        for s, scope_spans in _objects(resource_spans, "scopeSpans", "scope_spans"):
            for i, span in _objects(scope_spans, "spans"):
                path = f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]"
                _convert_ids(span, path)
                for j, link in _objects(span, "links"):
                    _convert_ids(link, f"{path}.links[{j}]")


def _decode(body: bytes, content_type: str, request: _Request, convert_ids: Callable[[dict[str, Any]], None]) -> (
        _Request):
    kind = type(request).__name__
    if content_type == PROTOBUF:
        try:
            request.ParseFromString(body)
        except (DecodeError, RuntimeError) as exc:
            raise ValueError(f"malformed protobuf {kind}: {exc}") from exc
        return request
    try:
        # Bounded nesting, no NaN/Infinity literals. NUL and other text is left alone: see docs/ingest.md.
        document = load_json(body, label=kind, check_text=False)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"malformed JSON: {exc}") from exc
    except BadInputError as exc:
        raise ValueError(str(exc)) from None
    if not isinstance(document, dict):
        raise ValueError(f"malformed JSON: an {kind} object is expected")
    convert_ids(document)
    try:
        json_format.ParseDict(document, request, ignore_unknown_fields=True)
    except (json_format.ParseError, binascii.Error, TypeError, ValueError) as exc:
        raise ValueError(f"JSON is not an {kind}: {exc}") from exc
    return request


def decode_request(body: bytes, content_type: str) -> ExportTraceServiceRequest:
    """Decode a traces request body; ValueError (with the reason) when it does not decode."""
    return _decode(body, content_type, ExportTraceServiceRequest(), _hex_ids_to_base64)


def decode_logs_request(body: bytes, content_type: str) -> ExportLogsServiceRequest:
    """Decode a logs request body; ValueError (with the reason) when it does not decode."""
    return _decode(body, content_type, ExportLogsServiceRequest(), _hex_log_ids_to_base64)


def _encode(message: Message, content_type: str) -> bytes:
    if content_type == JSON:
        return json_format.MessageToJson(message, indent=None).encode()
    return message.SerializeToString()


def _known(content_type: str) -> str:
    """The answer's encoding: the request's when it is one OTLP speaks, else protobuf."""
    return content_type if content_type in (PROTOBUF, JSON) else PROTOBUF


def _status(http_status: int, code: int, message: str, content_type: str) -> web.Response:
    body = _encode(status_pb2.Status(code=code, message=message), content_type)
    return web.Response(status=http_status, body=body, content_type=content_type)


class OtlpHttpReceiver:
    """The aiohttp application serving ``POST /v1/traces`` and ``POST /v1/logs`` through an ``ExportHandler``."""

    def __init__(self, handler: ExportHandler, *, max_body_bytes: int = DEFAULT_MAX_BODY,
                 gate: Gate | None = None) -> None:
        if max_body_bytes < 1:
            raise BadInputError(f"max_body_bytes {max_body_bytes}: must be at least 1")
        self.handler = handler
        self.gate = gate
        self.max_body_bytes = max_body_bytes

    def application(self) -> web.Application:
        # client_max_size bounds what aiohttp reads; decompression is ours (see runner()), bounded the same.
        app = web.Application(client_max_size=self.max_body_bytes)
        app.router.add_post(TRACES_PATH, self.post_traces)
        app.router.add_post(LOGS_PATH, self.post_logs)
        return app

    def runner(self) -> web.AppRunner:
        return web.AppRunner(self.application(), access_log=None, auto_decompress=False)

    async def post_traces(self, request: web.Request) -> web.Response:
        return await self._post(request, decode_request, self.handler.export, "spans", OTLP_HTTP_TRACES)

    async def post_logs(self, request: web.Request) -> web.Response:
        return await self._post(request, decode_logs_request, self.handler.export_logs, "log records",
                                OTLP_HTTP_LOGS)

    async def _post(self, request: web.Request, decode: Callable[[bytes, str], _Request],
                    export: Callable[[_Request, str | None, str | None], Awaitable[Message]], what: str,
                    method: str) -> web.Response:
        content_type = request.content_type  # without parameters such as charset
        principal: Principal | None = None
        if self.gate is not None:
            try:
                principal = await self.gate.authenticate(http_credentials(request, "otlp-http"), method)
            except Unauthenticated as exc:
                refusal = _status(401, code_pb2.UNAUTHENTICATED, str(exc), _known(content_type))
                refusal.headers["WWW-Authenticate"] = self.gate.challenge(exc)
                return refusal
        if content_type not in (PROTOBUF, JSON):
            return _status(415, code_pb2.INVALID_ARGUMENT,
                           f"Content-Type {request.headers.get('Content-Type', '')!r} is not supported; "
                           f"send {PROTOBUF} or {JSON}", PROTOBUF)
        too_large = f"request body over the {self.max_body_bytes}-byte limit: split the batch"
        if request.content_length is not None and request.content_length > self.max_body_bytes:
            return _status(413, code_pb2.RESOURCE_EXHAUSTED, too_large, content_type)
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _status(413, code_pb2.RESOURCE_EXHAUSTED, too_large, content_type)
        encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
        try:
            if encoding == "gzip":
                body = _gunzip(body, self.max_body_bytes)
            elif encoding not in ("identity", ""):
                return _status(415, code_pb2.INVALID_ARGUMENT,
                               f"Content-Encoding {encoding!r} is not supported; send gzip or identity", content_type)
            decoded = decode(body, content_type)
        except _TooLarge:
            return _status(413, code_pb2.RESOURCE_EXHAUSTED, too_large + " (after gzip decompression)", content_type)
        except ValueError as exc:
            return _status(400, code_pb2.INVALID_ARGUMENT, str(exc), content_type)
        header = request.headers.get(PROJECT_HEADER)
        default = None
        try:
            if self.gate is not None:
                default = await admit_export(self.gate, method, http_credentials(request, "otlp-http"), decoded,
                                             principal=principal, header_project=(header or "").strip(),
                                             default_project=self.handler.default_project)
            response = await export(decoded, header, default)
        except PermissionDenied as exc:
            return _status(403, code_pb2.PERMISSION_DENIED, str(exc), content_type)
        except BadInputError as exc:
            return _status(400, code_pb2.INVALID_ARGUMENT, str(exc), content_type)
        except InfraError as exc:
            return _status(503, code_pb2.UNAVAILABLE, f"could not store {what}, retry: {exc}", content_type)
        return web.Response(status=200, body=_encode(response, content_type), content_type=content_type)


async def start_http_receiver(receiver: OtlpHttpReceiver, host: str, port: int, *,
                              sock: socket.socket | None = None,
                              ssl_context: ssl.SSLContext | None = None,
                              open_on_purpose: bool = False) -> tuple[web.AppRunner, int]:
    """Listen on host:port (0 picks a free port), or accept from ``sock``, a listening socket other processes
    share (``evalsi-ingest --processes``); returns the runner and the port. ``ssl_context``: HTTPS only. Without
    the receiver's gate, beyond loopback only ``open_on_purpose`` (``--no-auth``)."""
    refuse_ungated_listener(host, receiver.gate is not None, open_on_purpose=open_on_purpose, what="OTLP/HTTP")
    runner = receiver.runner()
    await runner.setup()
    site = (web.SockSite(runner, sock, ssl_context=ssl_context) if sock is not None
            else web.TCPSite(runner, host, port, ssl_context=ssl_context))
    await site.start()
    return runner, runner.addresses[0][1]
