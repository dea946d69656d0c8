"""What every RPC handler of the public services shares: run states, field checks, page sizes, bus calls.

The handlers are ``async def name(request, ctx) -> response`` (an async generator for server streams), the same
for gRPC and HTTP/JSON. They validate before anything is written, name the field at fault, and reach the rest of
the system only through the dependencies given to them (:mod:`evalsi.api.dependencies`).
"""

from __future__ import annotations

from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from evalsi.api.errors import NotFoundError
from evalsi.errors import BadInputError, DeadlineExceeded, InfraError
from evalsi.v1alpha1.run_pb2 import (
    RUN_STATE_BUDGET_EXCEEDED,
    RUN_STATE_CANCELLED,
    RUN_STATE_FAILED,
    RUN_STATE_SUCCEEDED,
    RunState,
)

TERMINAL_STATES = frozenset({RUN_STATE_SUCCEEDED, RUN_STATE_FAILED, RUN_STATE_CANCELLED, RUN_STATE_BUDGET_EXCEEDED})
RESUMABLE_STATES = frozenset({RUN_STATE_FAILED, RUN_STATE_CANCELLED, RUN_STATE_BUDGET_EXCEEDED})
RESERVED_LABEL_PREFIX = "evals.si/"


def state_name(state: int) -> str:
    try:
        return RunState.Name(state).removeprefix("RUN_STATE_").lower().replace("_", "-")
    except ValueError:
        return f"state {state}"


def now_timestamp() -> Timestamp:
    stamp = Timestamp()
    stamp.GetCurrentTime()
    return stamp


def required(value: str, field: str, what: str) -> str:
    if not value.strip():
        raise BadInputError(f"{field}: {what} is required")
    return value


def page_size(value: int, default: int, limit: int) -> int:
    if value < 0:
        raise BadInputError(f"page_size: {value} must be zero (the default, {default}) or positive")
    return min(value or default, limit)


async def bus_call(what: str, call: Any) -> Any:
    """An outbound call on the bus; its failures are infrastructure failures, not bugs of ours."""
    try:
        return await call
    except (BadInputError, InfraError, NotFoundError, DeadlineExceeded):  # DeadlineExceeded: the deadline passed (504)
        raise
    except Exception as exc:
        raise InfraError(f"{what}: {type(exc).__name__}: {exc}") from exc
