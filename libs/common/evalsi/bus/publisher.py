"""Publish one protobuf message to JetStream under its deterministic key.

``Nats-Msg-Id`` is the key, so the stream drops a second publish of the same key within its duplicate window
(2 minutes): a retried or resumed publisher never enqueues a task twice. Payloads over the limit go to the
object store and travel by reference (see ``offload``).

A publish is retried through NATS reconnects (a restarted server, a timed-out ack) until a generous deadline,
so a bus restart delays publishers instead of failing whatever they were doing; a publish the stream refuses
(full, too large) fails at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

import nats.errors
import nats.js.errors
from google.protobuf.message import Message
from nats.js.client import JetStreamContext

from evalsi.bus.codec import PAYLOAD_REF_HEADER, encode
from evalsi.bus.offload import DEFAULT_HEADROOM, ObjectStore, offload, payload_limit
from evalsi.errors import InfraError

__all__ = ["PUBLISH_DEADLINE_S", "Publisher", "publish", "publish_raw", "through_reconnects"]

log = logging.getLogger(__name__)
T = TypeVar("T")

# How long a publish keeps trying through reconnects: a NATS restart (seconds) fits many times over, while a
# bus that stays gone still surfaces as an error within a couple of minutes.
PUBLISH_DEADLINE_S = 120.0
_FALLBACK_MAX_PAYLOAD = 1024 * 1024  # the server's default, when the connection cannot tell


def connection_max_payload(js: JetStreamContext) -> int:
    """The max_payload the server announced on this JetStream context's connection."""
    nc = getattr(js, "_nc", None)  # nats-py keeps the connection private; its max_payload is public
    max_payload = getattr(nc, "max_payload", None)
    return int(max_payload) if max_payload else _FALLBACK_MAX_PAYLOAD


async def through_reconnects(
    call: Callable[[], Awaitable[T]], what: str, *, deadline_s: float = PUBLISH_DEADLINE_S
) -> T:
    """``call()`` again (capped backoff) while it fails on a connection problem, until ``deadline_s``: then an
    ``InfraError``. A closed connection (this client is shutting down), server refusals and "no stream takes
    this subject" (a configuration error: JetStream is up before a restarted server takes clients) are not."""
    give_up = time.monotonic() + deadline_s
    attempt = 0
    while True:
        attempt += 1
        try:
            result = await call()
        except (nats.errors.ConnectionClosedError, nats.js.errors.APIError, nats.js.errors.NoStreamResponseError):
            raise
        except (nats.errors.Error, TimeoutError) as e:
            pause = min(2.0, 0.1 * 2 ** (attempt - 1))
            if time.monotonic() + pause > give_up:
                raise InfraError(f"{what} failed for {deadline_s:g}s: {type(e).__name__}: {e}") from e
            if attempt == 1:  # once per call: a restart makes every publisher say this at the same moment
                log.warning("%s failed (%s: %s); retrying through reconnects", what, type(e).__name__, e)
            await asyncio.sleep(pause)
            continue
        if attempt > 1:
            log.info("%s succeeded on attempt %d", what, attempt)
        return result


async def publish_raw(
    js: JetStreamContext,
    subject: str,
    data: bytes,
    headers: dict[str, str],
    *,
    timeout: float | None = None,
    deadline_s: float = PUBLISH_DEADLINE_S,
) -> bool:
    """Publish bytes with headers and wait for the stream's ack; True when the stream dropped it as a duplicate.

    ``timeout`` bounds one attempt; attempts go on through reconnects until ``deadline_s`` (the message id makes
    a repeat harmless). Every failure (no stream for the subject, a rejected publish, the deadline) is an
    ``InfraError``."""
    try:
        ack = await through_reconnects(
            lambda: js.publish(subject, data, headers=headers, timeout=timeout),
            f"publish to {subject}",
            deadline_s=deadline_s,
        )
    except nats.js.errors.NoStreamResponseError as e:
        raise InfraError(f"publish to {subject}: no stream takes this subject (were the streams ensured?)") from e
    except nats.js.errors.APIError as e:
        raise InfraError(f"publish to {subject} rejected: {e.description or e}") from e
    except nats.errors.Error as e:
        raise InfraError(f"publish to {subject} failed: {type(e).__name__}: {e}") from e
    return bool(ack.duplicate)


async def publish(
    js: JetStreamContext,
    subject: str,
    message: Message,
    *,
    key: str | None,
    headers: Mapping[str, str] | None = None,
    traceparent: str | None = None,
    tracestate: str | None = None,
    store: ObjectStore | None = None,
    max_payload: int | None = None,
    timeout: float | None = None,
    deadline_s: float = PUBLISH_DEADLINE_S,
) -> bool:
    """Publish ``message`` on ``subject`` with ``Nats-Msg-Id = key``; returns True when it was a duplicate.

    A payload over ``max_payload`` (or the connection's max_payload less headroom) goes to ``store`` and the
    message carries ``Evalsi-Payload-Ref``; without a store that is a ``PayloadTooLargeError``.
    """
    data, hdrs = encode(message, key=key, headers=headers, traceparent=traceparent, tracestate=tracestate)
    limit = payload_limit(connection_max_payload(js), max_payload, DEFAULT_HEADROOM)
    if len(data) > limit:
        hdrs[PAYLOAD_REF_HEADER] = await offload(data, store, subject=subject, limit=limit)
        data = b""
    return await publish_raw(js, subject, data, hdrs, timeout=timeout, deadline_s=deadline_s)


class Publisher:
    """``publish`` with the store and size limit bound once, for a service to pass around."""

    def __init__(
        self, js: JetStreamContext, *, store: ObjectStore | None = None, max_payload: int | None = None
    ) -> None:
        self.js = js
        self.store = store
        self.max_payload = max_payload

    async def publish(
        self,
        subject: str,
        message: Message,
        *,
        key: str | None,
        headers: Mapping[str, str] | None = None,
        traceparent: str | None = None,
        tracestate: str | None = None,
    ) -> bool:
        return await publish(
            self.js,
            subject,
            message,
            key=key,
            headers=headers,
            traceparent=traceparent,
            tracestate=tracestate,
            store=self.store,
            max_payload=self.max_payload,
        )
