"""Publish one protobuf message to JetStream under its deterministic key.

``Nats-Msg-Id`` is the key, so the stream drops a second publish of the same key within its duplicate window
(2 minutes): a retried or resumed publisher never enqueues a task twice. Payloads over the limit go to the
object store and travel by reference (see ``offload``).
"""

from __future__ import annotations

from collections.abc import Mapping

import nats.errors
import nats.js.errors
from google.protobuf.message import Message
from nats.js.client import JetStreamContext

from evalsi.bus.codec import PAYLOAD_REF_HEADER, encode
from evalsi.bus.offload import DEFAULT_HEADROOM, ObjectStore, offload, payload_limit
from evalsi.errors import InfraError

__all__ = ["Publisher", "publish", "publish_raw"]

_FALLBACK_MAX_PAYLOAD = 1024 * 1024  # the server's default, when the connection cannot tell


def connection_max_payload(js: JetStreamContext) -> int:
    """The max_payload the server announced on this JetStream context's connection."""
    nc = getattr(js, "_nc", None)  # nats-py keeps the connection private; its max_payload is public
    max_payload = getattr(nc, "max_payload", None)
    return int(max_payload) if max_payload else _FALLBACK_MAX_PAYLOAD


async def publish_raw(
    js: JetStreamContext, subject: str, data: bytes, headers: dict[str, str], *, timeout: float | None = None
) -> bool:
    """Publish bytes with headers and wait for the stream's ack; True when the stream dropped it as a duplicate.
    Every failure (no stream for the subject, timeout, a rejected publish) is an ``InfraError``."""
    try:
        ack = await js.publish(subject, data, headers=headers, timeout=timeout)
    except nats.js.errors.NoStreamResponseError as e:
        raise InfraError(f"publish to {subject}: no stream takes this subject (were the streams ensured?)") from e
    except nats.js.errors.APIError as e:
        raise InfraError(f"publish to {subject} rejected: {e.description or e}") from e
    except (nats.errors.Error, TimeoutError) as e:
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
    return await publish_raw(js, subject, data, hdrs, timeout=timeout)


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
