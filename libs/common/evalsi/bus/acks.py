"""The ack table, as FastStream middleware: the handler's outcome decides what happens to the message.

| the handler...                               | the message is...                                         |
|----------------------------------------------|-----------------------------------------------------------|
| returns                                      | acked                                                     |
| raises ``Retryable`` / ``InfraError`` / else | nak'ed with a backoff delay (redelivered later)           |
| raises ``Permanent`` (or decoding fails)     | dead-lettered and terminated                              |
| fails on the last allowed delivery           | dead-lettered and terminated                              |
| raises ``Unavailable``                       | held (in-progress acks), pulling paused, handled again    |
|                                              | once ``probe`` answers: no delivery is burnt              |
| runs longer than ``heartbeat_s``             | kept alive with in-progress acks until it ends            |
| is cancelled (a stop ran out of patience)    | nak'ed without delay, so another replica takes it at once |

A message that is itself a dead letter (``deadletter.*``) is never dead-lettered again: where another one would
be, it is terminated and kept where it is (the dead-letter stream keeps messages by age), counted in
``stats.kept`` and reported once to ``on_dead_letter``. Re-publishing it would feed it back to its own reader.

Subscribers run with FastStream's ``AckPolicy.MANUAL``: this table is the only place a message is settled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import nats.errors
from faststream import BaseMiddleware
from faststream._internal.context.repository import ContextRepo
from faststream.nats.message import NatsMessage
from google.protobuf.message import Message
from nats.js.client import JetStreamContext

from evalsi.bus import subjects
from evalsi.bus.codec import Delivery, delivery_from_msg
from evalsi.bus.deadletter import OnDeadLetter, notify, publish_dead_letter
from evalsi.bus.errors import Permanent, Retryable, Unavailable

__all__ = ["AckTable", "ConsumerStats", "DeadLetterSink", "Probe", "Received", "dead_letters_to", "retry_delay"]

log = logging.getLogger(__name__)

Probe = Callable[[], Awaitable[bool]]
# Where dead letters go: ``(payload, delivery, reason, subject or None for the default) -> the subject used``.
DeadLetterSink = Callable[[bytes, Delivery, str, str | None], Awaitable[str]]


def dead_letters_to(js: JetStreamContext) -> DeadLetterSink:
    """The sink of a real bus: the dead-letter stream, through ``publish_dead_letter``."""

    async def sink(data: bytes, delivery: Delivery, reason: str, subject: str | None) -> str:
        return await publish_dead_letter(js, data, delivery, reason, subject=subject)

    return sink


def retry_delay(num_delivered: int, base_s: float, max_s: float) -> float:
    """Exponential backoff for the next delivery after ``num_delivered`` failed ones, capped at ``max_s``."""
    return float(min(max_s, base_s * 2 ** max(0, num_delivered - 1)))


@dataclass(frozen=True)
class Received:
    """What the decoder makes of a bus message: the protobuf message and what a handler may know besides."""

    message: Message
    delivery: Delivery


@dataclass
class ConsumerStats:
    """Counts of what one subscription's ack table did, for metrics and tests."""

    received: int = 0
    acked: int = 0
    naked: int = 0
    dead_lettered: int = 0
    kept: int = 0  # dead letters that failed again, terminated where they are
    held: int = 0  # handler runs that met an unavailable dependency and waited for it
    in_progress_sent: int = 0


class AckTable:
    """One subscription's ack policy and counters; FastStream calls it once per message for a middleware.

    ``max_deliver`` may be replaced before the subscription starts (adopted from a consumer someone else owns).
    ``probe`` tells whether what the handler needs answers again after it raised ``Unavailable``.
    """

    def __init__(
        self,
        dead_letters: DeadLetterSink,
        name: str,
        *,
        max_deliver: int,
        heartbeat_s: float,
        retry_base_s: float = 1.0,
        retry_max_s: float = 60.0,
        dead_letter_subject: str | None = None,
        on_dead_letter: OnDeadLetter | None = None,
        probe: Probe | None = None,
        probe_every_s: float = 1.0,
    ) -> None:
        self._dead_letters = dead_letters
        self.name = name
        self.max_deliver = max_deliver
        self.heartbeat_s = heartbeat_s
        self.retry_base_s = retry_base_s
        self.retry_max_s = retry_max_s
        self.dead_letter_subject = dead_letter_subject
        self.on_dead_letter = on_dead_letter
        self.probe = probe
        self.probe_every_s = probe_every_s
        self.stats = ConsumerStats()
        self._outage: asyncio.Task[None] | None = None

    @property
    def outage(self) -> asyncio.Task[None] | None:
        """The probe of an outage in progress (a handler met ``Unavailable``), or None."""
        return self._outage if self._outage is not None and not self._outage.done() else None

    def __call__(self, msg: Any, /, *, context: ContextRepo) -> _AckScope:
        return _AckScope(msg, context=context, table=self)

    # -- outcomes ------------------------------------------------------------------------------------------

    async def settle(self, msg: NatsMessage, call_next: Callable[[NatsMessage], Awaitable[Any]]) -> None:
        """Decode, run the handler (held through outages, kept alive by heartbeats), then settle the message."""
        self.stats.received += 1
        delivery: Delivery | None = None
        message: Message | None = None
        try:
            received = await msg.decode()
            assert isinstance(received, Received)
            message, delivery = received.message, received.delivery
            await self._run_while_available(msg, call_next)
        except asyncio.CancelledError:
            # A stop ran out of patience: give the message back now rather than after ack_wait.
            await asyncio.shield(self.nak(msg, None))
            raise
        except Permanent as e:
            await self._dead_letter(msg, delivery or delivery_from_msg(msg.raw_message), message, f"permanent: {e}")
        except Exception as e:
            delivery = delivery or delivery_from_msg(msg.raw_message)
            reason = f"{type(e).__name__}: {e}"
            if delivery.num_delivered >= self.max_deliver:
                await self._dead_letter(
                    msg, delivery, message, f"failed on delivery {delivery.num_delivered}/{self.max_deliver}: {reason}"
                )
            else:
                delay = e.delay_s if isinstance(e, Retryable) and e.delay_s is not None else None
                if delay is None:
                    delay = retry_delay(delivery.num_delivered, self.retry_base_s, self.retry_max_s)
                log.info(
                    "consumer %s: %s seq %s failed on delivery %d (%s), retry in %.2fs",
                    self.name, delivery.subject, delivery.stream_seq, delivery.num_delivered, reason, delay,
                )  # fmt: skip
                await self.nak(msg, delay)
        else:
            await self._ack(msg)

    async def _run_while_available(self, msg: NatsMessage, call_next: Callable[[NatsMessage], Awaitable[Any]]) -> None:
        while True:
            try:
                await self._with_heartbeat(msg, call_next(msg))
                return
            except Unavailable as e:
                self.stats.held += 1
                await self._with_heartbeat(msg, self._until_available(str(e)))

    async def _until_available(self, why: str) -> None:
        """One outage at a time: the first handler to meet it starts probing, the others wait on the same probe."""
        if self._outage is None or self._outage.done():
            self._outage = asyncio.create_task(self._probe_until_up(why))
        await asyncio.shield(self._outage)

    async def _probe_until_up(self, why: str) -> None:
        started = time.monotonic()
        log.warning("consumer %s: paused, holding messages: %s", self.name, why)
        while True:
            await asyncio.sleep(self.probe_every_s)
            if self.probe is None:
                break
            try:
                if await self.probe():
                    break
            except Exception as e:  # a probe that raises says "not yet", like one that answers False
                log.debug("consumer %s: probe failed: %s", self.name, e)
        log.warning("consumer %s: resumed after %.1fs", self.name, time.monotonic() - started)

    async def _with_heartbeat(self, msg: NatsMessage, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=self.heartbeat_s)
                if done:
                    task.result()
                    return
                with contextlib.suppress(nats.errors.Error):
                    await msg.in_progress()
                    self.stats.in_progress_sent += 1
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    async def _dead_letter(self, msg: NatsMessage, delivery: Delivery, message: Message | None, reason: str) -> None:
        if subjects.is_deadletter(delivery.subject):
            await self._keep(msg, delivery, message, reason)
            return
        try:
            subject = await self._dead_letters(msg.raw_message.data, delivery, reason, self.dead_letter_subject)
        except Exception as e:
            # Leave it to redelivery; on the last delivery the max-deliveries watcher takes it from there.
            log.error("consumer %s: dead-letter publish failed (%s); nak instead", self.name, e)
            await self.nak(msg, retry_delay(delivery.num_delivered, self.retry_base_s, self.retry_max_s))
            return
        log.warning(
            "consumer %s: %s seq %s dead-lettered to %s: %s",
            self.name, delivery.subject, delivery.stream_seq, subject, reason,
        )  # fmt: skip
        await notify(self.on_dead_letter, message, delivery, reason)
        with contextlib.suppress(nats.errors.Error):
            await msg.reject()
        self.stats.dead_lettered += 1

    async def _keep(self, msg: NatsMessage, delivery: Delivery, message: Message | None, reason: str) -> None:
        """Terminate a dead letter that failed again: it stays in its stream, and the server never redelivers it."""
        log.error(
            "consumer %s: dead letter %s seq %s kept, not handled: %s",
            self.name, delivery.subject, delivery.stream_seq, reason,
        )  # fmt: skip
        await notify(self.on_dead_letter, message, delivery, reason)
        with contextlib.suppress(nats.errors.Error):
            await msg.reject()
        self.stats.kept += 1

    async def _ack(self, msg: NatsMessage) -> None:
        try:
            await msg.ack()
            self.stats.acked += 1
        except nats.errors.Error as e:  # the ack is lost: the message comes back, keys make that harmless
            log.warning("consumer %s: ack failed: %s", self.name, e)

    async def nak(self, msg: NatsMessage, delay: float | None) -> None:
        try:
            await msg.nack(delay=delay)
            self.stats.naked += 1
        except nats.errors.Error as e:
            log.warning("consumer %s: nak failed: %s", self.name, e)


class _AckScope(BaseMiddleware):
    """One message's pass through the ack table; every outcome is settled here, so nothing propagates."""

    def __init__(self, msg: Any, /, *, context: ContextRepo, table: AckTable) -> None:
        super().__init__(msg, context=context)
        self._table = table

    async def consume_scope(self, call_next: Callable[[Any], Awaitable[Any]], msg: Any) -> None:
        await self._table.settle(msg, call_next)
