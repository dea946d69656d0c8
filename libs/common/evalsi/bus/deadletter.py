"""Dead letters: messages that failed permanently or ran out of deliveries, kept on ``deadletter.<name>``.

A dead letter is the original payload and headers, plus why and where from (``Evalsi-Dead-*``). Its message
id is derived from the source stream and sequence, so the consume loop and the max-deliveries watcher (or two
watcher replicas) cannot dead-letter one message twice.

Two paths lead here:
- the consume loop, when a handler fails permanently or fails on the last allowed delivery;
- ``watch_max_deliveries``, when a worker died (or hung) holding the last delivery: the server then
  announces ``$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>`` and leaves the message in the
  work-queue stream, where nobody would ever receive it again. The watcher copies it to the dead letters
  and deletes it from the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping

import nats.errors
import nats.js.errors
from google.protobuf.message import Message
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.client import JetStreamContext

from evalsi.bus import subjects
from evalsi.bus.codec import (
    DEAD_DELIVERIES_HEADER,
    DEAD_REASON_HEADER,
    DEAD_SEQ_HEADER,
    DEAD_STREAM_HEADER,
    DEAD_SUBJECT_HEADER,
    MSG_ID_HEADER,
    Delivery,
    decode_any,
    header_value,
)
from evalsi.bus.offload import ObjectStore, resolve_payload
from evalsi.bus.publisher import publish_raw

__all__ = [
    "DEAD_MSG_ID_HEADER",
    "MaxDeliveriesWatcher",
    "OnDeadLetter",
    "dead_letter_headers",
    "publish_dead_letter",
    "watch_max_deliveries",
]

log = logging.getLogger(__name__)

DEAD_MSG_ID_HEADER = "Evalsi-Dead-Msg-Id"
ADVISORY_PREFIX = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"

# Called after a message is dead-lettered: the decoded message (None when it could not be decoded), where it
# came from, and why. A worker reports the task as an infrastructure error here.
OnDeadLetter = Callable[[Message | None, Delivery, str], Awaitable[None]]


def dead_letter_headers(delivery: Delivery, reason: str) -> dict[str, str]:
    """The original headers, less those the server acts on (``Nats-*``), plus the ``Evalsi-Dead-*`` ones."""
    headers = {k: v for k, v in delivery.headers.items() if not k.lower().startswith("nats-")}
    if delivery.msg_id:
        headers[DEAD_MSG_ID_HEADER] = delivery.msg_id
    headers[DEAD_REASON_HEADER] = header_value(reason)
    headers[DEAD_SUBJECT_HEADER] = delivery.subject
    headers[DEAD_DELIVERIES_HEADER] = str(delivery.num_delivered)
    if delivery.stream:
        headers[DEAD_STREAM_HEADER] = delivery.stream
    if delivery.stream_seq is not None:
        headers[DEAD_SEQ_HEADER] = str(delivery.stream_seq)
    if delivery.stream and delivery.stream_seq is not None:
        headers[MSG_ID_HEADER] = f"dead:{delivery.stream}:{delivery.stream_seq}"
    elif delivery.msg_id:
        headers[MSG_ID_HEADER] = f"dead:{delivery.msg_id}"
    return headers


async def publish_dead_letter(
    js: JetStreamContext, data: bytes, delivery: Delivery, reason: str, *, subject: str | None = None
) -> str:
    """Publish the original payload to ``subject`` (default: ``deadletter_for(delivery.subject)``); returns it."""
    if subjects.is_deadletter(delivery.subject):
        # Its reader would receive it again, fail again, and publish it again: a loop with no end.
        raise ValueError(f"{delivery.subject} is a dead letter already; it is kept where it is, never re-published")
    subject = subject or subjects.deadletter_for(delivery.subject)
    await publish_raw(js, subject, data, dead_letter_headers(delivery, reason))
    return subject


async def notify(callback: OnDeadLetter | None, message: Message | None, delivery: Delivery, reason: str) -> None:
    """Run the dead-letter callback; its failure is logged, never allowed to undo the dead letter."""
    if callback is None:
        return
    try:
        await callback(message, delivery, reason)
    except Exception:
        log.exception("on_dead_letter callback failed for %s seq %s", delivery.subject, delivery.stream_seq)


class MaxDeliveriesWatcher:
    """Listens to the max-deliveries advisories of one stream's consumer and dead-letters what they name.

    The server sends the advisory when it next tries to deliver on that consumer after the last delivery's
    ack_wait ran out, i.e. while some worker of the pool is pulling. Replicas share a queue group, so each
    advisory is handled once.
    """

    def __init__(
        self,
        nc: NATS,
        js: JetStreamContext,
        stream: str,
        consumer: str = "*",
        callback: OnDeadLetter | None = None,
        *,
        store: ObjectStore | None = None,
        queue: str = "evalsi-max-deliveries",
        dead_letter_subject: str | None = None,
        attempts: int = 3,
    ) -> None:
        self._nc = nc
        self._js = js
        self.stream = subjects.check_token(stream, "stream")
        self.consumer = consumer if consumer == "*" else subjects.check_token(consumer, "consumer")
        self._callback = callback
        self._store = store
        self._queue = queue
        self._dead_letter_subject = dead_letter_subject
        self._attempts = attempts
        self._sub: Subscription | None = None
        self.dead_lettered = 0

    @property
    def subject(self) -> str:
        return f"{ADVISORY_PREFIX}.{self.stream}.{self.consumer}"

    async def start(self) -> MaxDeliveriesWatcher:
        if self._sub is None:
            self._sub = await self._nc.subscribe(self.subject, queue=self._queue, cb=self._on_advisory)
        return self

    async def stop(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None:
            with contextlib.suppress(nats.errors.Error):
                await sub.unsubscribe()

    async def _on_advisory(self, msg: Msg) -> None:
        try:
            advisory = json.loads(msg.data)
            seq = int(advisory["stream_seq"])
            deliveries = int(advisory.get("deliveries", 0))
            stream = str(advisory.get("stream") or self.stream)
            consumer = str(advisory.get("consumer") or self.consumer)
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring malformed max-deliveries advisory on %s: %r", msg.subject, msg.data[:200])
            return
        try:
            await self.dead_letter(stream, consumer, seq, deliveries)
        except Exception:
            log.exception("could not dead-letter %s seq %d after max deliveries", stream, seq)

    async def dead_letter(self, stream: str, consumer: str, seq: int, deliveries: int) -> bool:
        """Move stream message ``seq`` to the dead letters; False when it is already gone (acked or moved)."""
        try:
            raw = await self._js.get_msg(stream, seq)
        except nats.js.errors.NotFoundError:
            return False
        headers: dict[str, str] = {str(k): str(v) for k, v in (raw.headers or {}).items()}
        data = raw.data or b""
        delivery = Delivery(
            subject=raw.subject or "",
            headers=headers,
            msg_id=headers.get(MSG_ID_HEADER),
            num_delivered=deliveries,
            stream=stream,
            stream_seq=seq,
            consumer=consumer,
        )
        reason = (
            f"max deliveries ({deliveries}) reached on consumer {consumer} without an ack: "
            "the worker died or hung on its last delivery"
        )
        for attempt in range(1, self._attempts + 1):
            try:
                await publish_dead_letter(self._js, data, delivery, reason, subject=self._dead_letter_subject)
                break
            except Exception:
                if attempt == self._attempts:
                    raise
                await asyncio.sleep(0.2 * 2**attempt)
        message = await _decode_quietly(data, headers, self._store)
        await notify(self._callback, message, delivery, reason)
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await self._js.delete_msg(stream, seq)
        self.dead_lettered += 1
        return True


async def _decode_quietly(data: bytes, headers: Mapping[str, str], store: ObjectStore | None) -> Message | None:
    try:
        payload = await resolve_payload(data, headers, store)
    except Exception:
        return None
    return decode_any(payload, headers)


async def watch_max_deliveries(
    nc: NATS,
    js: JetStreamContext,
    stream: str,
    consumer: str,
    callback: OnDeadLetter | None = None,
    *,
    store: ObjectStore | None = None,
    queue: str = "evalsi-max-deliveries",
) -> MaxDeliveriesWatcher:
    """Start a ``MaxDeliveriesWatcher`` on ``stream``/``consumer`` (``*`` for every consumer of the stream)."""
    return await MaxDeliveriesWatcher(nc, js, stream, consumer, callback, store=store, queue=queue).start()
