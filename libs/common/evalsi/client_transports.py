"""The two transports of ``evalsi.Client``: gRPC (``grpc://host:8081``) and HTTP/JSON (``http://host:8080``),
each deriving every call from the proto descriptors, and the server's errors as our exceptions. ``grpcs://`` and
``https://`` speak TLS to a server with ``auth.tls``, verified against the system's roots or ``EVALSI_CA_FILE``."""

from __future__ import annotations

import json
import os
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, BinaryIO

from google.api import annotations_pb2
from google.protobuf import json_format
from google.protobuf.message import Message

from evalsi.errors import BadInputError, InfraError
from evalsi.projects import PROJECT_HEADER
from evalsi.v1alpha1 import (
    auth_service_pb2,
    case_service_pb2,
    catalog_service_pb2,
    evaluation_service_pb2,
    monitor_service_pb2,
    run_service_pb2,
    trace_service_pb2,
)
from evalsi.v1alpha1.run_service_pb2 import DatasetVersion, UploadDatasetRequest

if TYPE_CHECKING:
    from evalsi.client_auth.sources import CredentialSource

UPLOAD_CHUNK_BYTES = 1 << 20
AUTHORIZATION = "authorization"
CA_FILE_ENV = "EVALSI_CA_FILE"  # a PEM bundle that verifies the server's certificate (a private CA)


class NotFoundError(BadInputError):
    """The server has no such resource in the call's project (HTTP 404, gRPC NOT_FOUND): bad input, as before,
    told apart so a caller can say where else to look."""


class AuthenticationError(BadInputError):
    """The server wants a credential, or refused the one sent (HTTP 401, gRPC UNAUTHENTICATED). The message says
    where the credential came from (never the credential) and how to get one."""


def _unauthenticated(message: str, credentials: CredentialSource | None, base: str) -> AuthenticationError:
    if credentials is None:
        hint = (f"this server needs a credential: run `evalsi login --server {base}`, or pass --token/--api-key "
                "(or set EVALSI_TOKEN / EVALSI_API_KEY)")
    else:
        hint = f"the server refused the credential from {credentials.origin}"
    return AuthenticationError(f"{message}\nhint: {hint}")


SERVICES = {
    "EvaluationService": evaluation_service_pb2.DESCRIPTOR.services_by_name["EvaluationService"],
    "RunService": run_service_pb2.DESCRIPTOR.services_by_name["RunService"],
    "CatalogService": catalog_service_pb2.DESCRIPTOR.services_by_name["CatalogService"],
    "TraceService": trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"],
    "MonitorService": monitor_service_pb2.DESCRIPTOR.services_by_name["MonitorService"],
    "AuthService": auth_service_pb2.DESCRIPTOR.services_by_name["AuthService"],
    "CaseService": case_service_pb2.DESCRIPTOR.services_by_name["CaseService"],
}


class GrpcTransport:
    def __init__(self, target: str, project: str | None, timeout: float,
                 credentials: CredentialSource | None = None, *, tls: bool = False, ca_file: str = "") -> None:
        import grpc

        self._grpc = grpc
        self._target = target
        self._scheme = "grpcs" if tls else "grpc"
        if tls:
            roots = _read_ca(ca_file) if ca_file else None  # None: the system's roots
            self._channel = grpc.secure_channel(target, grpc.ssl_channel_credentials(root_certificates=roots))
        else:
            self._channel = grpc.insecure_channel(target)
        self._project_metadata = ((PROJECT_HEADER, project),) if project else ()
        self.project = project or ""  # every call's project header, or '' (the server's default)
        self._credentials = credentials
        self._timeout = timeout

    @property
    def _metadata(self) -> tuple[tuple[str, str], ...]:
        """Per call: a token file is read again and a cached login refreshed when it expired."""
        if self._credentials is None:
            return self._project_metadata
        return (*self._project_metadata, (AUTHORIZATION, self._credentials.authorization()))

    def _error(self, exc: Any) -> Exception:
        if exc.code() == self._grpc.StatusCode.UNAUTHENTICATED:
            return _unauthenticated(exc.details(), self._credentials, f"{self._scheme}://{self._target}")
        return _grpc_error(exc)

    def _method(self, service: str, method: str, response_type: type[Message], streaming: bool) -> Any:
        path = f"/{SERVICES[service].full_name}/{method}"
        make = self._channel.unary_stream if streaming else self._channel.unary_unary
        return make(
            path, request_serializer=lambda m: m.SerializeToString(), response_deserializer=response_type.FromString
        )

    def unary(self, service: str, method: str, request: Message, response_type: type[Message]) -> Any:
        try:
            return self._method(service, method, response_type, False)(
                request, metadata=self._metadata, timeout=self._timeout
            )
        except self._grpc.RpcError as exc:
            raise self._error(exc) from None

    def stream(self, service: str, method: str, request: Message, response_type: type[Message]) -> Iterator[Any]:
        try:
            yield from self._method(service, method, response_type, True)(request, metadata=self._metadata)
        except self._grpc.RpcError as exc:
            raise self._error(exc) from None

    def upload(self, first: UploadDatasetRequest, file: BinaryIO, size: int) -> DatasetVersion:
        call = self._channel.stream_unary(
            f"/{SERVICES['RunService'].full_name}/UploadDataset",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=DatasetVersion.FromString,
        )

        def chunks() -> Iterator[UploadDatasetRequest]:
            yield first
            while data := file.read(UPLOAD_CHUNK_BYTES):
                yield UploadDatasetRequest(data=data)

        try:
            return call(chunks(), metadata=self._metadata)  # no deadline: a big file takes as long as it takes
        except self._grpc.RpcError as exc:
            raise self._error(exc) from None

    def close(self) -> None:
        self._channel.close()


def _grpc_error(exc: Any) -> Exception:
    import grpc

    code, details = exc.code(), exc.details()
    # As over HTTP (400, 403, 404, 409, 413): what the caller asked, not the server, is at fault.
    if code == grpc.StatusCode.NOT_FOUND:
        return NotFoundError(details)
    if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION,
                grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.PERMISSION_DENIED):
        return BadInputError(details)
    return InfraError(f"server answered {code.name}: {details}")


class HttpTransport:
    def __init__(self, base: str, project: str | None, timeout: float,
                 credentials: CredentialSource | None = None, *, ca_file: str = "") -> None:
        self._base = base.rstrip("/")
        self._ssl = _ssl_context(ca_file) if ca_file and base.startswith("https:") else None
        self._plain_headers = {"content-type": "application/json", **({PROJECT_HEADER: project} if project else {})}
        self.project = project or ""  # every call's project header, or '' (the server's default)
        self._credentials = credentials
        self._timeout = timeout

    @property
    def _headers(self) -> dict[str, str]:
        """Per call: a token file is read again and a cached login refreshed when it expired."""
        if self._credentials is None:
            return self._plain_headers
        return {**self._plain_headers, AUTHORIZATION: self._credentials.authorization()}

    def _error(self, exc: urllib.error.HTTPError) -> Exception:
        if exc.code == 401:
            return _unauthenticated(_http_message(exc), self._credentials, self._base)
        return _http_error(exc)

    def _request(self, service: str, method: str, request: Message, timeout: float | None) -> Any:
        rule = SERVICES[service].methods_by_name[method].GetOptions().Extensions[annotations_pb2.http]
        verb = rule.WhichOneof("pattern")
        template = getattr(rule, verb)
        fields = json_format.MessageToDict(request, preserving_proto_field_name=True)
        used: set[str] = set()

        def fill(match: re.Match[str]) -> str:
            name = match.group(1)
            used.add(name.split(".")[0])
            value: Any = fields
            for part in name.split("."):  # a field of the body's message: UpdateRole's {role.name}
                value = value.get(part, "") if isinstance(value, dict) else ""
            return urllib.parse.quote(str(value), safe="")

        path = re.sub(r"\{([a-z_.]+)\}", fill, template)
        body = None
        if rule.body == "*":
            body = json_format.MessageToJson(request).encode()
        else:
            if rule.body:  # one field is the body (ApplyPolicy's policy); the others go in the query
                body = json_format.MessageToJson(getattr(request, rule.body)).encode()
                used.add(rule.body)
            query = {k: v for k, v in fields.items() if k not in used}
            if query:
                path += "?" + urllib.parse.urlencode(query, doseq=True)
        return urllib.request.urlopen(
            urllib.request.Request(self._base + path, data=body, method=verb.upper(), headers=self._headers),
            timeout=timeout, context=self._ssl,
        )

    def unary(self, service: str, method: str, request: Message, response_type: type[Message]) -> Any:
        try:
            with self._request(service, method, request, self._timeout) as response:
                return json_format.Parse(response.read(), response_type(), ignore_unknown_fields=True)
        except urllib.error.HTTPError as exc:
            raise self._error(exc) from None
        except urllib.error.URLError as exc:
            raise InfraError(f"cannot reach {self._base}: {exc.reason}") from None

    def stream(self, service: str, method: str, request: Message, response_type: type[Message]) -> Iterator[Any]:
        try:
            with self._request(service, method, request, None) as response:
                for line in response:
                    if not line.strip():
                        continue
                    document = json.loads(line)
                    if "error" in document:  # the server failed after the stream started
                        error = document["error"]
                        raise InfraError(f"server stream ended with {error.get('code')}: {error.get('message')}")
                    yield json_format.ParseDict(document, response_type(), ignore_unknown_fields=True)
        except urllib.error.HTTPError as exc:
            raise self._error(exc) from None
        except urllib.error.URLError as exc:
            raise InfraError(f"cannot reach {self._base}: {exc.reason}") from None

    def upload(self, first: UploadDatasetRequest, file: BinaryIO, size: int) -> DatasetVersion:
        """The file as the body of ``POST /v1alpha1/datasets/{name}:upload``, streamed from disk."""
        query: list[tuple[str, str]] = [
            (key, str(value)) for key, value in (("filename", first.filename), ("format", first.format),
                                                 ("project", first.project), ("limit", first.limit)) if value
        ]
        query += [("map", f"{target}={source}") for target, source in first.mapping.items()]
        url = f"{self._base}/v1alpha1/datasets/{urllib.parse.quote(first.name, safe='')}:upload"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = {**self._headers, "content-type": "application/octet-stream", "content-length": str(size)}
        try:
            request = urllib.request.Request(url, data=file, method="POST", headers=headers)
            with urllib.request.urlopen(request, context=self._ssl) as r:
                return json_format.Parse(r.read(), DatasetVersion(), ignore_unknown_fields=True)
        except urllib.error.HTTPError as exc:
            raise self._error(exc) from None
        except urllib.error.URLError as exc:
            raise InfraError(f"cannot reach {self._base}: {exc.reason}") from None

    def close(self) -> None:
        pass


def _http_message(exc: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(exc.read()).get("message", exc.reason))
    except (ValueError, AttributeError):
        return str(exc.reason)


def _http_error(exc: urllib.error.HTTPError) -> Exception:
    message = _http_message(exc)
    if exc.code == 404:
        return NotFoundError(str(message))
    if exc.code in (400, 403, 409, 413):
        return BadInputError(str(message))
    return InfraError(f"server answered HTTP {exc.code}: {message}")


def _read_ca(path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as exc:
        raise BadInputError(f"${CA_FILE_ENV} {path}: cannot read ({exc.strerror or exc})") from None


def _ssl_context(path: str) -> ssl.SSLContext:
    try:
        return ssl.create_default_context(cafile=path)
    except (OSError, ssl.SSLError) as exc:
        raise BadInputError(f"${CA_FILE_ENV} {path}: not a PEM certificate bundle ({exc})") from None


def open_transport(url: str, project: str | None, timeout: float,
                   credentials: CredentialSource | None = None, ca_file: str | None = None) -> Transport:
    """``ca_file`` (default ``$EVALSI_CA_FILE``) verifies a TLS server's certificate instead of the system's roots."""
    parsed = urllib.parse.urlparse(url)
    ca = os.environ.get(CA_FILE_ENV, "") if ca_file is None else ca_file
    if parsed.scheme in ("grpc", "grpcs"):
        return GrpcTransport(parsed.netloc, project, timeout, credentials, tls=parsed.scheme == "grpcs", ca_file=ca)
    if parsed.scheme in ("http", "https"):
        return HttpTransport(url, project, timeout, credentials, ca_file=ca)
    raise BadInputError(f"server URL {url!r}: use grpc://host:8081 or http://host:8080 (grpcs:// or https:// for "
                        "TLS)")


Transport = GrpcTransport | HttpTransport
