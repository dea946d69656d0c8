"""Synchronous calls over core NATS request/reply (Evaluate): one protobuf message each way.

Responders of a subject share a queue group, so each request is answered by exactly one of them. A failed
call replies with an empty payload and ``Evalsi-Error`` (the message) plus ``Evalsi-Error-Kind``:

| kind        | raised by the handler                      | raised at the caller   |
|-------------|--------------------------------------------|------------------------|
| bad_input   | ``BadInputError``, ``Permanent``, undecodable request | ``BadInputError`` |
| infra       | ``InfraError``, ``Retryable``              | ``InfraError``         |
| internal    | anything else (a bug)                      | ``RemoteError`` (an ``InfraError``) |
| deadline    | the request's deadline passed in the handler | ``DeadlineExceeded``  |

Every request carries its deadline (``Evalsi-Deadline``: seconds left when it was sent). The responder runs
the handler under it and cancels the handler when it passes, so an abandoned call never holds a responder's
slot; the caller waits a little longer than the deadline for that answer. No responder, or no answer at all
(a responder too busy to even answer), is an ``InfraError``.

A request or reply over the bus's payload limit travels through the object store like a task payload (see
``offload``): the message carries ``Evalsi-Payload-Ref`` and the other side fetches it. Without a store on the
sending side that is a ``PayloadTooLargeError``; without one on the receiving side an ``InfraError``.

The responder stays a nats-py subscription, the one bus handler not on FastStream: it is Evaluate's hot loop, and
FastStream's dispatch (its concurrent core subscriber, same reply code) measured +440 us CPU and +540 us p50 per
request here (``benchmarks/request_reply.py``), +0.8-1.1 ms of worker CPU per Evaluate through the whole stack:
more than the 10% issue 10 allows. docs/bus.md and docs/benchmarks.md have the figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Generic, Literal, TypeVar

import nats.errors
from google.protobuf.message import Message
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from evalsi.bus.codec import (
    ERROR_HEADER,
    ERROR_KIND_HEADER,
    PAYLOAD_REF_HEADER,
    Delivery,
    decode,
    delivery_from_msg,
    encode,
    header_value,
    type_name,
)
from evalsi.bus.errors import PayloadTooLargeError, Permanent, RemoteError, Retryable
from evalsi.bus.offload import ObjectStore, offload, payload_limit, resolve_payload
from evalsi.errors import BadInputError, DeadlineExceeded, InfraError

__all__ = ["DEADLINE_HEADER", "ErrorKind", "RequestServer", "error_kind", "request", "serve_requests"]

log = logging.getLogger(__name__)

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)
ErrorKind = Literal["bad_input", "infra", "internal", "deadline"]
RequestHandler = Callable[[Req, Delivery], Awaitable[Message]]
_FALLBACK_MAX_PAYLOAD = 1024 * 1024  # the server's default, before the connection has heard its INFO
DEADLINE_HEADER = "Evalsi-Deadline"
# How much longer than its deadline a caller waits, so the responder's "deadline" answer (rather than silence)
# reaches it.
REPLY_GRACE_S = 1.0


def error_kind(e: BaseException) -> ErrorKind:
    if isinstance(e, DeadlineExceeded):
        return "deadline"
    if isinstance(e, BadInputError | Permanent):
        return "bad_input"
    if isinstance(e, InfraError | Retryable | PayloadTooLargeError):
        return "infra"
    return "internal"


class RequestServer(Generic[Req]):
    """Answers requests on one subject in one queue group, at most ``concurrency`` at a time."""

    def __init__(
        self,
        nc: NATS,
        subject: str,
        queue: str,
        handler: RequestHandler[Req],
        *,
        request_type: type[Req],
        concurrency: int = 64,
        store: ObjectStore | None = None,
    ) -> None:
        self._nc = nc
        self._store = store
        self.subject = subject
        self.queue = queue
        self._handler = handler
        self._request_type = request_type
        self._slots = asyncio.Semaphore(concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self._sub: Subscription | None = None

    async def start(self) -> RequestServer[Req]:
        if self._sub is None:
            self._sub = await self._nc.subscribe(self.subject, queue=self.queue, cb=self._on_request)
            # The SUB is only queued for the socket: once the server has it (a PING answered), a request sent
            # on another connection finds this responder rather than "no responders".
            await self._nc.flush()
        return self

    async def stop(self, timeout: float = 10.0) -> None:
        """Stop taking requests, then wait (up to ``timeout``) for those being answered."""
        sub, self._sub = self._sub, None
        if sub is not None:
            with contextlib.suppress(nats.errors.Error):
                await sub.unsubscribe()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)

    async def _on_request(self, msg: Msg) -> None:
        # nats-py runs a subscription's callbacks one at a time: hand each request to its own task.
        await self._slots.acquire()
        task = asyncio.create_task(self._answer(msg))
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._slots.release()

    async def _answer(self, msg: Msg) -> None:
        if not msg.reply:
            log.warning("request on %s without a reply subject dropped", msg.subject)
            return
        delivery = delivery_from_msg(msg)
        deadline = None
        try:
            deadline_s = _deadline_of(delivery.headers)
            payload = await _fetch(msg.data, delivery.headers, self._store)
            request_message = decode(payload, delivery.headers, self._request_type)
            async with asyncio.timeout(deadline_s) as deadline:
                response = await self._handler(request_message, delivery)
            data, headers = encode(response, traceparent=delivery.traceparent, tracestate=delivery.tracestate)
            data = await _offloaded(data, headers, self._nc, self._store, f"the reply on {msg.subject}")
        except Exception as e:
            error: Exception = e
            if deadline is not None and deadline.expired():  # the handler was cancelled at the caller's deadline
                error = DeadlineExceeded(f"stopped at the request's deadline of {deadline_s:g}s")
            kind = error_kind(error)
            if kind == "internal":
                log.exception("request handler on %s crashed", msg.subject)
            message = str(error) or type(error).__name__
            data, headers = b"", {ERROR_HEADER: header_value(message), ERROR_KIND_HEADER: kind}
        try:
            await self._nc.publish(msg.reply, data, headers=headers)
        except nats.errors.Error as e:
            log.warning("reply on %s failed: %s", msg.subject, e)


def _deadline_of(headers: Mapping[str, str]) -> float | None:
    """Seconds the caller gives the handler (None: no deadline, a caller from before deadlines were sent)."""
    value = headers.get(DEADLINE_HEADER)
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        raise Permanent(f"{DEADLINE_HEADER} header: expected seconds, got {value!r}") from None
    if not seconds > 0:  # NaN included
        raise Permanent(f"{DEADLINE_HEADER} header: expected a positive number of seconds, got {value!r}")
    return seconds


async def serve_requests(
    nc: NATS,
    subject: str,
    queue: str,
    handler: RequestHandler[Req],
    *,
    request_type: type[Req],
    concurrency: int = 64,
    store: ObjectStore | None = None,
) -> RequestServer[Req]:
    """Start answering ``request_type`` messages on ``subject`` in queue group ``queue``; ``stop()`` ends it.
    ``store`` carries requests and replies over the bus's payload limit."""
    server = RequestServer(nc, subject, queue, handler, request_type=request_type, concurrency=concurrency, store=store)
    return await server.start()


async def _offloaded(data: bytes, headers: dict[str, str], nc: NATS, store: ObjectStore | None, what: str) -> bytes:
    """``data`` itself when it fits the connection's max_payload, else b"" with its object-store key in ``headers``."""
    limit = payload_limit(nc.max_payload or _FALLBACK_MAX_PAYLOAD)
    if len(data) <= limit:
        return data
    headers[PAYLOAD_REF_HEADER] = await offload(data, store, subject=what, limit=limit)
    return b""


async def _fetch(data: bytes, headers: Mapping[str, str], store: ObjectStore | None) -> bytes:
    """The payload, fetched from the store when it travelled by reference; a missing store is this side's
    configuration, not the sender's fault: an ``InfraError``."""
    if headers.get(PAYLOAD_REF_HEADER) and store is None:
        raise InfraError("the payload travelled through the object store, but no object store is configured here")
    return await resolve_payload(data, headers, store)


async def request(
    nc: NATS,
    subject: str,
    message: Message,
    response_type: type[Resp],
    timeout: float = 5.0,
    *,
    headers: Mapping[str, str] | None = None,
    traceparent: str | None = None,
    store: ObjectStore | None = None,
) -> Resp:
    """Send ``message`` and wait for the answer as ``response_type``; errors as the module's table says.
    ``store`` carries a request over the bus's payload limit, and fetches a reply that came by reference.

    ``timeout`` is the deadline the responder works under; the caller waits ``REPLY_GRACE_S`` more for its answer.
    """
    if not timeout > 0:
        raise DeadlineExceeded(f"{subject}: the deadline passed before the request was sent")
    data, hdrs = encode(message, headers={**(headers or {}), DEADLINE_HEADER: f"{timeout:.6g}"},
                        traceparent=traceparent)
    data = await _offloaded(data, hdrs, nc, store, subject)
    try:
        reply = await nc.request(subject, data, timeout=timeout + REPLY_GRACE_S, headers=hdrs)
    except nats.errors.NoRespondersError as e:
        raise InfraError(f"no responder on {subject} for {type_name(message)}") from e
    except TimeoutError as e:  # nats.errors.TimeoutError included
        raise InfraError(f"no answer on {subject} within {timeout:g}s") from e
    except nats.errors.Error as e:
        raise InfraError(f"request on {subject} failed: {type(e).__name__}: {e}") from e
    reply_headers = dict(reply.headers or {})
    kind = reply_headers.get(ERROR_KIND_HEADER)
    if kind is not None:
        text = reply_headers.get(ERROR_HEADER, "(no message)")
        if kind == "bad_input":
            raise BadInputError(text)
        if kind == "deadline":
            raise DeadlineExceeded(f"{subject}: {text}")
        if kind == "infra":
            raise InfraError(f"{subject}: {text}")
        raise RemoteError(f"{subject}: internal error in the responder: {text}")
    try:
        return decode(await _fetch(reply.data, reply_headers, store), reply_headers, response_type)
    except Permanent as e:
        raise InfraError(f"bad reply on {subject}: {e}") from e
