"""Dead letters: messages that failed permanently or ran out of deliveries, kept on ``deadletter.<name>``.

A dead letter is the original payload and headers, plus why and where from (``Evalsi-Dead-*``). Its message
id is derived from the source stream and sequence, so the consume loop and the max-deliveries watcher (or two
watcher replicas) cannot dead-letter one message twice.

Two paths lead here:
- the consume loop, when a handler fails permanently or fails on the last allowed delivery;
- ``evalsi.bus.max_deliveries``, when a worker died (or hung) holding the last delivery: the server then
  announces ``$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>`` and leaves the message in the
  work-queue stream, where nobody would ever receive it again. Its watcher copies it to the dead letters
  and deletes it from the stream.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from google.protobuf.message import Message
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
    header_value,
)
from evalsi.bus.publisher import publish_raw

__all__ = ["DEAD_MSG_ID_HEADER", "OnDeadLetter", "dead_letter_headers", "notify", "publish_dead_letter"]

log = logging.getLogger(__name__)

DEAD_MSG_ID_HEADER = "Evalsi-Dead-Msg-Id"

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
