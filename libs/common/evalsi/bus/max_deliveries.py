"""The max-deliveries watcher: a task whose last delivery ran out (its worker died or hung holding it) is moved
to the dead letters.

The server announces ``$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>`` and leaves the message in
the work-queue stream, where nobody would ever receive it again. The watcher, a FastStream core-NATS subscriber
over the service's own connection, copies it to the dead letters (``evalsi.bus.deadletter``) and deletes it from
the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Mapping

import nats.js.errors
from google.protobuf.message import Message
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.client import JetStreamContext

from evalsi.bus import subjects
from evalsi.bus.codec import MSG_ID_HEADER, Delivery, decode_any
from evalsi.bus.deadletter import OnDeadLetter, notify, publish_dead_letter
from evalsi.bus.offload import ObjectStore, resolve_payload
from evalsi.bus.shared_broker import CoreSubscriber

__all__ = ["ADVISORY_PREFIX", "MaxDeliveriesWatcher", "watch_max_deliveries"]

log = logging.getLogger(__name__)

ADVISORY_PREFIX = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"


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
        self._js = js
        self.stream = subjects.check_token(stream, "stream")
        self.consumer = consumer if consumer == "*" else subjects.check_token(consumer, "consumer")
        self._callback = callback
        self._store = store
        self._dead_letter_subject = dead_letter_subject
        self._attempts = attempts
        # One advisory at a time, as they arrive: a FastStream core subscriber over the service's connection.
        self._subscriber = CoreSubscriber(nc, self.subject, queue, self._on_advisory, title="max-deliveries advisories")
        self.dead_lettered = 0

    @property
    def subject(self) -> str:
        return f"{ADVISORY_PREFIX}.{self.stream}.{self.consumer}"

    async def start(self) -> MaxDeliveriesWatcher:
        await self._subscriber.start()
        return self

    async def stop(self) -> None:
        """Stop listening; an advisory being handled is finished first (up to 10 s)."""
        await self._subscriber.stop()

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
