"""Exceptions to what callers see: a gRPC status, an HTTP status and a google.rpc.Status body.

``BadInputError`` → INVALID_ARGUMENT / 400, ``PayloadTooLargeError`` → RESOURCE_EXHAUSTED / 413,
``NotFoundError`` → NOT_FOUND / 404, ``Unauthenticated`` → UNAUTHENTICATED / 401, ``PermissionDenied`` →
PERMISSION_DENIED / 403, ``InfraError`` → UNAVAILABLE / 503, ``TimeoutError`` →
DEADLINE_EXCEEDED / 504, ``ApiError`` → its own code; anything else is a bug: INTERNAL / 500 with the
request id, the exception logged, never a traceback sent.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import any_pb2, json_format
from google.rpc import error_details_pb2, status_pb2

from evalsi.auth.principal import PermissionDenied, Unauthenticated
from evalsi.bus.errors import PayloadTooLargeError
from evalsi.errors import BadInputError, EvalsiError, InfraError

# The HTTP status for each code, as google.api's HTTP mapping (and grpc-gateway) defines it.
_HTTP_STATUS: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.OK: 200,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DATA_LOSS: 500,
}

# "records[0].input.text: ..." -> "records[0].input.text"; messages that start otherwise name no field.
_FIELD_PREFIX = re.compile(r"([A-Za-z_][\w-]*(?:\[[^\]\s]*\]|\.[A-Za-z_][\w-]*)*)(?: \([^)]*\))?: ")

STATUS_DETAILS_KEY = "grpc-status-details-bin"


class NotFoundError(EvalsiError):
    """The named resource does not exist (in the caller's project)."""


class ApiError(EvalsiError):
    """An error with an explicit status, for the few cases the exception kinds above do not cover."""

    def __init__(self, code: grpc.StatusCode, message: str, *, http_status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.http_status = http_status


def too_large(what: str, size: int | None, limit: int) -> ApiError:
    got = f" ({size} bytes)" if size is not None else ""
    return ApiError(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        f"{what} is larger than the limit of {limit} bytes{got}; send smaller batches",
        http_status=413,
    )



def http_status_of(code: grpc.StatusCode) -> int:
    return _HTTP_STATUS.get(code, 500)


def field_of(message: str) -> str:
    """The field path a message starts with (``records: at least one...`` → ``records``), or ''."""
    match = _FIELD_PREFIX.match(message)
    return match.group(1) if match else ""


@dataclass(frozen=True)
class ErrorStatus:
    """One error as both transports report it."""

    code: grpc.StatusCode
    message: str
    request_id: str
    http_status: int
    field: str = ""
    problems: tuple[str, ...] = ()  # a spec's every problem (evalsi.documents.SpecProblems), one violation each

    def to_proto(self) -> status_pb2.Status:
        status = status_pb2.Status(code=self.code.value[0], message=self.message)
        if self.problems:
            bad = error_details_pb2.BadRequest()
            for problem in self.problems:
                bad.field_violations.add(field=field_of(problem), description=problem)
            status.details.append(_pack(bad))
        elif self.field:
            bad = error_details_pb2.BadRequest()
            bad.field_violations.add(field=self.field, description=self.message)
            status.details.append(_pack(bad))
        if self.request_id:
            status.details.append(_pack(error_details_pb2.RequestInfo(request_id=self.request_id)))
        return status

    def to_dict(self) -> dict[str, Any]:
        return json_format.MessageToDict(self.to_proto())

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def grpc_trailing_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        return ((STATUS_DETAILS_KEY, self.to_proto().SerializeToString()), ("x-request-id", self.request_id))


def _pack(message: Any) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


def error_status(exc: BaseException, *, request_id: str, method: str, logger: Any) -> ErrorStatus:
    """The status for an exception a handler raised; unexpected ones are logged with their traceback."""
    code: grpc.StatusCode
    http: int | None = None
    message = str(exc)
    if isinstance(exc, ApiError):
        code, http = exc.code, exc.http_status
    elif isinstance(exc, BadInputError):
        code = grpc.StatusCode.INVALID_ARGUMENT
    elif isinstance(exc, PayloadTooLargeError):  # no object store to carry it across the bus: the caller's to split
        code, http = grpc.StatusCode.RESOURCE_EXHAUSTED, 413
    elif isinstance(exc, NotFoundError):
        code = grpc.StatusCode.NOT_FOUND
    elif isinstance(exc, Unauthenticated):
        code = grpc.StatusCode.UNAUTHENTICATED
    elif isinstance(exc, PermissionDenied):
        code = grpc.StatusCode.PERMISSION_DENIED
    elif isinstance(exc, InfraError):
        code = grpc.StatusCode.UNAVAILABLE
        logger.warning("infrastructure error", rpc=method, request_id=request_id, error=message)
    elif isinstance(exc, TimeoutError):
        code = grpc.StatusCode.DEADLINE_EXCEEDED
        message = message or "the deadline passed before the call finished"
    else:
        code = grpc.StatusCode.INTERNAL
        message = f"internal error (request id {request_id}); the server log has the details"
        logger.error("unhandled error", rpc=method, request_id=request_id, exc_info=exc)
    field = field_of(message) if code == grpc.StatusCode.INVALID_ARGUMENT else ""
    problems = tuple(getattr(exc, "problems", ())) if code == grpc.StatusCode.INVALID_ARGUMENT else ()
    return ErrorStatus(
        code=code,
        message=message,
        request_id=request_id,
        http_status=http or http_status_of(code),
        field=field,
        problems=problems if len(problems) > 1 else (),
    )
