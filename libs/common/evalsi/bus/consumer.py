"""The consume loop: pull batches from a durable consumer, decode at the edge, let errors decide the ack.

| the handler...                               | the message is...                                         |
|----------------------------------------------|-----------------------------------------------------------|
| returns                                      | acked                                                     |
| raises ``Retryable`` / ``InfraError`` / else | nak'ed with a backoff delay (redelivered later)           |
| raises ``Permanent`` (or decoding fails)     | dead-lettered and terminated                              |
| fails on the last allowed delivery           | dead-lettered and terminated                              |
| raises ``Unavailable``                       | held (in-progress acks), pulling paused, handled again    |
|                                              | once ``probe`` answers: no delivery is burnt              |
| runs longer than ``heartbeat_s``             | kept alive with in-progress acks until it ends            |

A message that is itself a dead letter (``deadletter.*``) is never dead-lettered again: where another one would
be, it is terminated and kept where it is (the dead-letter stream keeps messages by age), counted in
``stats.kept`` and reported once to ``on_dead_letter``. Re-publishing it would feed it back to its own reader.

Shutdown (``stop``, on SIGTERM): stop pulling, give in-flight handlers ``drain_timeout_s`` to finish, then
cancel them and nak their messages without delay so another worker takes them at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import nats.errors
from google.protobuf.message import Message
from nats.aio.msg import Msg
from nats.js.client import JetStreamContext

from evalsi.bus import subjects
from evalsi.bus.codec import TYPE_HEADER, Delivery, decode, decode_any, delivery_from_msg
from evalsi.bus.deadletter import OnDeadLetter, notify, publish_dead_letter
from evalsi.bus.errors import Permanent, Retryable, Unavailable
from evalsi.bus.offload import ObjectStore, resolve_payload
from evalsi.bus.streams import ConsumerSettings, ensure_consumer

__all__ = ["Consumer", "ConsumerStats", "Handler", "retry_delay"]

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)
Handler = Callable[[M, Delivery], Awaitable[None]]
Probe = Callable[[], Awaitable[bool]]


def retry_delay(num_delivered: int, base_s: float, max_s: float) -> float:
    """Exponential backoff for the next delivery after ``num_delivered`` failed ones, capped at ``max_s``."""
    return float(min(max_s, base_s * 2 ** max(0, num_delivered - 1)))


@dataclass
class ConsumerStats:
    """Counts of what the loop did, for metrics and tests."""

    received: int = 0
    acked: int = 0
    naked: int = 0
    dead_lettered: int = 0
    kept: int = 0  # dead letters that failed again, terminated where they are
    held: int = 0  # handler runs that met an unavailable dependency and waited for it
    in_progress_sent: int = 0


class Consumer(Generic[M]):
    """A pull loop on one durable consumer, running ``handler(message, delivery)`` with bounded concurrency.

    ``message_type`` None takes any message type this process knows (by its type header), for readers of
    dead letters. ``probe`` tells whether what the handler needs answers again after it raised ``Unavailable``.
    """

    def __init__(
        self,
        js: JetStreamContext,
        stream: str,
        durable: str,
        subject_filter: str,
        handler: Handler[M],
        *,
        message_type: type[M] | None,
        batch: int = 16,
        concurrency: int = 16,
        ack_wait: float = 30.0,
        max_deliver: int = 5,
        max_ack_pending: int = 1000,
        heartbeat_s: float | None = None,
        on_dead_letter: OnDeadLetter | None = None,
        store: ObjectStore | None = None,
        dead_letter_subject: str | None = None,
        retry_base_s: float = 1.0,
        retry_max_s: float = 60.0,
        fetch_timeout_s: float = 2.0,
        drain_timeout_s: float = 30.0,
        ensure: bool = True,
        probe: Probe | None = None,
        probe_every_s: float = 1.0,
    ) -> None:
        if batch < 1 or concurrency < 1:
            raise ValueError(f"batch and concurrency must be at least 1, got {batch} and {concurrency}")
        self.settings = ConsumerSettings(ack_wait_s=ack_wait, max_deliver=max_deliver, max_ack_pending=max_ack_pending)
        heartbeat_s = ack_wait / 3 if heartbeat_s is None else heartbeat_s
        if not 0 < heartbeat_s < ack_wait:
            raise ValueError(f"heartbeat_s must be between 0 and ack_wait ({ack_wait}s), got {heartbeat_s}")
        self._js = js
        self.stream = stream
        self.durable = durable
        self.subject_filter = subject_filter
        self._handler = handler
        self._message_type = message_type
        self._batch = batch
        self._concurrency = concurrency
        self._heartbeat_s = heartbeat_s
        self._on_dead_letter = on_dead_letter
        self._store = store
        self._dead_letter_subject = dead_letter_subject
        self._retry_base_s = retry_base_s
        self._retry_max_s = retry_max_s
        self._fetch_timeout_s = fetch_timeout_s
        self._drain_timeout_s = drain_timeout_s
        self._ensure = ensure
        self._probe = probe
        self._probe_every_s = probe_every_s
        self._outage: asyncio.Task[None] | None = None
        self._psub: JetStreamContext.PullSubscription | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._inflight: dict[asyncio.Task[None], Msg] = {}
        self._slot_free = asyncio.Event()
        self._stopping = False
        self.stats = ConsumerStats()

    @property
    def max_deliver(self) -> int:
        return self.settings.max_deliver

    @property
    def running(self) -> bool:
        return self._loop_task is not None and not self._loop_task.done()

    async def start(self) -> Consumer[M]:
        """Create or update the durable consumer (unless ``ensure=False``), bind to it and start pulling."""
        if self.running:
            return self
        if self._ensure:
            await ensure_consumer(self._js, self.stream, self.durable, self.subject_filter, self.settings)
        else:  # someone else owns the consumer's config: adopt its delivery limit
            info = await self._js.consumer_info(self.stream, self.durable)
            if info.config.max_deliver and info.config.max_deliver > 0:
                self.settings = ConsumerSettings(
                    ack_wait_s=info.config.ack_wait or self.settings.ack_wait_s,
                    max_deliver=info.config.max_deliver,
                    max_ack_pending=info.config.max_ack_pending or self.settings.max_ack_pending,
                )
        self._psub = await self._js.pull_subscribe_bind(self.durable, stream=self.stream)
        self._stopping = False
        self._loop_task = asyncio.create_task(self._pull_loop(), name=f"consumer-{self.stream}-{self.durable}")
        return self

    async def __aenter__(self) -> Consumer[M]:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- pulling ---------------------------------------------------------------------------------------------

    async def _pull_loop(self) -> None:
        assert self._psub is not None
        errors_in_a_row = 0
        while not self._stopping:
            while len(self._inflight) >= self._concurrency and not self._stopping:
                self._slot_free.clear()
                await self._slot_free.wait()
            if self._stopping:
                break
            if self._outage is not None and not self._outage.done():
                # Back-pressure: what is held waits for the dependency; pulling more would only queue it here.
                await asyncio.wait({self._outage}, timeout=self._fetch_timeout_s)
                continue
            want = min(self._batch, self._concurrency - len(self._inflight))
            try:
                msgs = await self._psub.fetch(want, timeout=self._fetch_timeout_s)
                errors_in_a_row = 0
            except TimeoutError:  # nats.errors.TimeoutError too: nothing to do right now
                continue
            except nats.errors.ConnectionClosedError:
                log.warning("consumer %s/%s: connection closed, pull loop ends", self.stream, self.durable)
                break
            except Exception as e:  # a server error, a reconnect in progress: pause and pull again
                errors_in_a_row += 1
                pause = retry_delay(errors_in_a_row, 0.1, 5.0)
                log.warning("consumer %s/%s: fetch failed (%s), again in %.1fs", self.stream, self.durable, e, pause)
                await asyncio.sleep(pause)
                continue
            for msg in msgs:
                self.stats.received += 1
                if self._stopping:  # fetched while shutting down: hand it straight back
                    await self._nak(msg, None)
                    continue
                task = asyncio.create_task(self._handle(msg))
                self._inflight[task] = msg
                task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._inflight.pop(task, None)
        self._slot_free.set()
        if not task.cancelled() and task.exception() is not None:
            log.error("consumer %s/%s: message handling crashed", self.stream, self.durable, exc_info=task.exception())

    # -- one message -----------------------------------------------------------------------------------------

    async def _handle(self, msg: Msg) -> None:
        delivery = delivery_from_msg(msg)
        message: M | None = None
        try:
            payload = await resolve_payload(msg.data, delivery.headers, self._store)
            message = self._decode(payload, delivery.headers)
            await self._handle_while_available(msg, message, delivery)
        except asyncio.CancelledError:
            # Shutdown ran out of patience: give the message back now rather than after ack_wait.
            await asyncio.shield(self._nak(msg, None))
            raise
        except Permanent as e:
            await self._dead_letter(msg, delivery, message, f"permanent: {e}")
        except Exception as e:
            reason = f"{type(e).__name__}: {e}"
            if delivery.num_delivered >= self.max_deliver:
                await self._dead_letter(
                    msg, delivery, message, f"failed on delivery {delivery.num_delivered}/{self.max_deliver}: {reason}"
                )
            else:
                delay = e.delay_s if isinstance(e, Retryable) and e.delay_s is not None else None
                if delay is None:
                    delay = retry_delay(delivery.num_delivered, self._retry_base_s, self._retry_max_s)
                log.info(
                    "consumer %s/%s: %s seq %s failed on delivery %d (%s), retry in %.2fs",
                    self.stream, self.durable, delivery.subject, delivery.stream_seq,
                    delivery.num_delivered, reason, delay,
                )  # fmt: skip
                await self._nak(msg, delay)
        else:
            await self._ack(msg)

    def _decode(self, payload: bytes, headers: dict[str, str]) -> M:
        if self._message_type is not None:
            return decode(payload, headers, self._message_type)
        message = decode_any(payload, headers)
        if message is None:
            raise Permanent(f"not a message this service knows: {TYPE_HEADER} is {headers.get(TYPE_HEADER)!r}")
        return message  # type: ignore[return-value]

    async def _handle_while_available(self, msg: Msg, message: M, delivery: Delivery) -> None:
        """Run the handler; while it meets an unavailable dependency, hold the message and run it again later."""
        while True:
            try:
                await self._run_with_heartbeat(msg, self._handler(message, delivery))
                return
            except Unavailable as e:
                self.stats.held += 1
                await self._run_with_heartbeat(msg, self._until_available(str(e)))

    async def _until_available(self, why: str) -> None:
        """One outage at a time: the first handler to meet it starts probing, the others wait on the same probe."""
        if self._outage is None or self._outage.done():
            self._outage = asyncio.create_task(self._probe_until_up(why))
        await asyncio.shield(self._outage)

    async def _probe_until_up(self, why: str) -> None:
        started = time.monotonic()
        log.warning("consumer %s/%s: paused, holding messages: %s", self.stream, self.durable, why)
        while True:
            await asyncio.sleep(self._probe_every_s)
            if self._probe is None:
                break
            try:
                if await self._probe():
                    break
            except Exception as e:  # a probe that raises says "not yet", like one that answers False
                log.debug("consumer %s/%s: probe failed: %s", self.stream, self.durable, e)
        log.warning("consumer %s/%s: resumed after %.1fs", self.stream, self.durable, time.monotonic() - started)

    async def _run_with_heartbeat(self, msg: Msg, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=self._heartbeat_s)
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

    async def _dead_letter(self, msg: Msg, delivery: Delivery, message: M | None, reason: str) -> None:
        if subjects.is_deadletter(delivery.subject):
            await self._keep(msg, delivery, message, reason)
            return
        try:
            subject = await publish_dead_letter(self._js, msg.data, delivery, reason, subject=self._dead_letter_subject)
        except Exception as e:
            # Leave it to redelivery; on the last delivery the max-deliveries watcher takes it from there.
            log.error("consumer %s/%s: dead-letter publish failed (%s); nak instead", self.stream, self.durable, e)
            await self._nak(msg, retry_delay(delivery.num_delivered, self._retry_base_s, self._retry_max_s))
            return
        log.warning(
            "consumer %s/%s: %s seq %s dead-lettered to %s: %s",
            self.stream, self.durable, delivery.subject, delivery.stream_seq, subject, reason,
        )  # fmt: skip
        await notify(self._on_dead_letter, message, delivery, reason)
        with contextlib.suppress(nats.errors.Error):
            await msg.term()
        self.stats.dead_lettered += 1

    async def _keep(self, msg: Msg, delivery: Delivery, message: M | None, reason: str) -> None:
        """Terminate a dead letter that failed again: it stays in its stream, and the server never redelivers it."""
        log.error(
            "consumer %s/%s: dead letter %s seq %s kept, not handled: %s",
            self.stream, self.durable, delivery.subject, delivery.stream_seq, reason,
        )  # fmt: skip
        await notify(self._on_dead_letter, message, delivery, reason)
        with contextlib.suppress(nats.errors.Error):
            await msg.term()
        self.stats.kept += 1

    async def _ack(self, msg: Msg) -> None:
        try:
            await msg.ack()
            self.stats.acked += 1
        except nats.errors.Error as e:  # the ack is lost: the message comes back, keys make that harmless
            log.warning("consumer %s/%s: ack failed: %s", self.stream, self.durable, e)

    async def _nak(self, msg: Msg, delay: float | None) -> None:
        try:
            await msg.nak(delay=delay)
            self.stats.naked += 1
        except nats.errors.Error as e:
            log.warning("consumer %s/%s: nak failed: %s", self.stream, self.durable, e)

    # -- shutdown --------------------------------------------------------------------------------------------

    async def stop(self, timeout: float | None = None) -> None:
        """Stop pulling, let in-flight handlers finish within ``timeout`` (default ``drain_timeout_s``), then
        cancel the rest and nak their messages so they are redelivered promptly."""
        self._stopping = True
        self._slot_free.set()
        loop_task, self._loop_task = self._loop_task, None
        if loop_task is not None:
            # The current fetch ends within fetch_timeout_s; anything it brings back is nak'ed by the loop.
            with contextlib.suppress(asyncio.CancelledError):
                await loop_task
        pending = set(self._inflight)
        if pending:
            patience = self._drain_timeout_s if timeout is None else timeout
            _, still_running = await asyncio.wait(pending, timeout=patience)
            for task in still_running:
                task.cancel()
            if still_running:
                log.warning(
                    "consumer %s/%s: %d handler(s) cancelled at shutdown and nak'ed",
                    self.stream, self.durable, len(still_running),
                )  # fmt: skip
                await asyncio.gather(*still_running, return_exceptions=True)
        outage, self._outage = self._outage, None
        if outage is not None:
            outage.cancel()
            await asyncio.gather(outage, return_exceptions=True)
        psub, self._psub = self._psub, None
        if psub is not None:
            with contextlib.suppress(nats.errors.Error, ValueError):
                await psub.unsubscribe()
