"""The services' bus handlers, on FastStream: JetStream pull subscribers on our durables, our protobuf codec,
the ack table (``evalsi.bus.acks``) as middleware.

A service describes what it reads as ``Subscription``s (``evalsi.bus.subscriptions`` has every service's), adds
each with its handler to a ``BusBroker`` over the connection it already holds, and starts the broker::

    broker = BusBroker(bus, store=objects)
    broker.subscribe(subscriptions.work(pool, concurrency=8), handle_task)
    await broker.start()   # ensures (or adopts) the durables, then pulls
    ...
    await broker.stop()    # stop pulling, drain in-flight handlers, nak what is left

A handler is ``async (message, delivery) -> None``; decoding (with offloaded payloads fetched from the object
store) happens before it runs, and its outcome settles the message as the ack table says.

Each subscription runs up to ``concurrency`` handlers at once and fetches only for free slots, so a fetched
message is always being handled (and kept alive by heartbeats), never queued where its ack deadline could pass
unseen.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, cast

import nats.errors
from faststream.middlewares import AckPolicy
from faststream.nats import JStream, NatsMessage, NatsRouter, PullSub
from faststream.nats.subscriber.usecases import PullStreamSubscriber
from google.protobuf.message import Message
from nats.aio.msg import Msg

from evalsi.bus.acks import AckTable, ConsumerStats, DeadLetterSink, Probe, Received, dead_letters_to, retry_delay
from evalsi.bus.codec import TYPE_HEADER, decode, decode_any, delivery_from_msg, type_name
from evalsi.bus.connection import BusConnection
from evalsi.bus.deadletter import OnDeadLetter
from evalsi.bus.errors import Permanent
from evalsi.bus.offload import ObjectStore, resolve_payload
from evalsi.bus.shared_broker import SharedConnectionBroker, faststream_log
from evalsi.bus.streams import ConsumerSettings, ensure_consumer

__all__ = ["BusBroker", "Handler", "Subscription", "protobuf_decoder"]

log = logging.getLogger(__name__)

Handler = Callable[[Any, Any], Awaitable[None]]  # (message, Delivery) -> None; the message type is the subscription's


@dataclass(frozen=True)
class Subscription:
    """One durable pull consumer a service reads from, and how.

    ``message_type`` None takes any message type this process knows (by its type header), for readers of dead
    letters. ``ensure`` False adopts a consumer that someone else configures (its delivery limit included).
    """

    stream: str
    durable: str
    subject: str
    message_type: type[Message] | None
    description: str
    concurrency: int = 16
    ack_wait_s: float = 30.0
    max_deliver: int = 5
    max_ack_pending: int = 1000
    heartbeat_s: float | None = None
    retry_base_s: float = 1.0
    retry_max_s: float = 60.0
    fetch_timeout_s: float = 2.0
    ensure: bool = True
    dead_letter_subject: str | None = None

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {self.concurrency}")
        if not 0 < self.heartbeat < self.ack_wait_s:
            raise ValueError(f"heartbeat_s must be between 0 and ack_wait ({self.ack_wait_s}s), got {self.heartbeat}")
        self.settings  # noqa: B018 - validates the delivery policy now, not at start

    @property
    def heartbeat(self) -> float:
        return self.ack_wait_s / 3 if self.heartbeat_s is None else self.heartbeat_s

    @property
    def settings(self) -> ConsumerSettings:
        return ConsumerSettings(
            ack_wait_s=self.ack_wait_s, max_deliver=self.max_deliver, max_ack_pending=self.max_ack_pending
        )

    @property
    def message_name(self) -> str:
        return type_name(self.message_type) if self.message_type is not None else "any known message type"

    @property
    def title(self) -> str:
        """The AsyncAPI channel name: stream and durable, unique on the bus."""
        return f"{self.stream}/{self.durable}"


def protobuf_decoder(
    message_type: type[Message] | None, store: ObjectStore | None
) -> Callable[[NatsMessage], Awaitable[Received]]:
    """FastStream's decoder for one subscription: the payload (fetched from ``store`` when offloaded) parsed as
    ``message_type``, or as the type its header names when that is None. ``Permanent`` when it cannot be."""

    async def decode_message(msg: NatsMessage) -> Received:
        raw = msg.raw_message
        delivery = delivery_from_msg(raw)
        payload = await resolve_payload(raw.data, delivery.headers, store)
        if message_type is not None:
            return Received(decode(payload, delivery.headers, message_type), delivery)
        message = decode_any(payload, delivery.headers)
        if message is None:
            raise Permanent(f"not a message this service knows: {TYPE_HEADER} is {delivery.headers.get(TYPE_HEADER)!r}")
        return Received(message, delivery)

    return decode_message


class BusBroker:
    """A service's subscribers on one FastStream broker, over its bus connection.

    ``bus`` None builds a broker that only describes (for the AsyncAPI document); it cannot start.
    ``drain_timeout_s`` is how long a stop lets in-flight handlers finish before cancelling (and nak'ing) them.
    """

    def __init__(
        self,
        bus: BusConnection | None,
        *,
        store: ObjectStore | None = None,
        drain_timeout_s: float = 30.0,
        description: str | None = None,
        server_url: str = "nats://127.0.0.1:4222",
    ) -> None:
        self._bus = bus
        self._store = store
        self.nats = SharedConnectionBroker(
            bus.nc if bus is not None else None,
            graceful_timeout=drain_timeout_s,
            ack_policy=AckPolicy.MANUAL,  # the ack table settles every message
            apply_types=False,  # handlers take the decoded message; no per-message dependency injection
            logger=faststream_log(),
            log_level=logging.DEBUG,  # a line per message is for debugging, not for a million tasks
            description=description,
            specification_url=server_url,
        )
        self._tables: list[tuple[Subscription, AckTable]] = []

    def subscribe(
        self,
        subscription: Subscription,
        handler: Handler | None,
        *,
        on_dead_letter: OnDeadLetter | None = None,
        probe: Probe | None = None,
        probe_every_s: float = 1.0,
        dead_letters: DeadLetterSink | None = None,
    ) -> AckTable:
        """Add a subscriber running ``handler(message, delivery)``; returns its ack table (``.stats``).

        ``handler`` None declares the subscriber for the AsyncAPI document only. ``dead_letters`` replaces the
        dead-letter stream (FastStream's in-memory test broker has none).
        """
        sink = dead_letters or (dead_letters_to(self._bus.js) if self._bus is not None else _no_dead_letters)
        table = AckTable(
            sink,
            subscription.title,
            max_deliver=subscription.max_deliver,
            heartbeat_s=subscription.heartbeat,
            retry_base_s=subscription.retry_base_s,
            retry_max_s=subscription.retry_max_s,
            dead_letter_subject=subscription.dead_letter_subject,
            on_dead_letter=on_dead_letter,
            probe=probe,
            probe_every_s=probe_every_s,
        )
        # A router per subscription: FastStream attaches middleware to brokers and routers, not to one subscriber.
        router = NatsRouter(middlewares=(table,), decoder=protobuf_decoder(subscription.message_type, self._store),
                            ack_policy=AckPolicy.MANUAL)
        subscriber = router.subscriber(
            subscription.subject,
            stream=JStream(subscription.stream, declare=False),  # ensure_streams owns the streams' limits
            durable=subscription.durable,
            pull_sub=PullSub(batch_size=subscription.concurrency, timeout=subscription.fetch_timeout_s),
            # Deliveries to the connection's own inbox, the one its bus permissions let it read (bus/permissions.py).
            inbox_prefix=f"{self._bus.inbox_prefix if self._bus is not None else '_INBOX'}.".encode(),
            title=subscription.title,
            description=f"{subscription.description} (stream {subscription.stream}, durable "
            f"{subscription.durable}; payload {subscription.message_name})",
        )
        assert type(subscriber) is PullStreamSubscriber, type(subscriber)
        subscriber.__class__ = _PullSubscriber  # same layout: only the fetch loop differs
        cast(_PullSubscriber, subscriber).ack_table = table
        if handler is not None:
            subscriber(_call_with_delivery(handler))
        self.nats.include_router(router)
        self._tables.append((subscription, table))
        return table

    @property
    def stats(self) -> dict[str, ConsumerStats]:
        return {table.name: table.stats for _, table in self._tables}

    async def start(self) -> BusBroker:
        """Ensure (or adopt) each durable consumer, then start pulling."""
        if self._bus is None:
            raise RuntimeError("this broker describes the bus (AsyncAPI) and has no connection to start on")
        js = self._bus.js
        for subscription, table in self._tables:
            if subscription.ensure:
                await ensure_consumer(
                    js, subscription.stream, subscription.durable, subscription.subject, subscription.settings
                )
            else:  # someone else owns the consumer's config: adopt its delivery limit
                info = await js.consumer_info(subscription.stream, subscription.durable)
                if info.config.max_deliver and info.config.max_deliver > 0:
                    table.max_deliver = info.config.max_deliver
        await self.nats.start()
        return self

    async def stop(self, timeout: float | None = None) -> None:
        """Stop pulling, let in-flight handlers finish within ``timeout`` (default ``drain_timeout_s``), then
        cancel the rest; the ack table naks their messages so they are redelivered promptly."""
        if timeout is not None:
            self.nats.config.broker_config.graceful_timeout = timeout
        # FastStream cancels the pull loops it stops without waiting for them; wait, so that the naks of
        # cancelled handlers are sent before this returns (and before the service closes its connection).
        loops = [task for subscriber in self.nats.subscribers for task in getattr(subscriber, "tasks", ())]
        await self.nats.stop()
        await asyncio.gather(*loops, return_exceptions=True)

    async def __aenter__(self) -> BusBroker:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def _call_with_delivery(handler: Handler) -> Callable[[Received], Awaitable[None]]:
    async def on_message(received: Received) -> None:
        await handler(received.message, received.delivery)

    on_message.__name__ = getattr(handler, "__name__", "on_message")
    return on_message


async def _no_dead_letters(_data: bytes, _delivery: Any, _reason: str, _subject: str | None) -> str:
    raise RuntimeError("a describing broker has no dead-letter stream")


class _PullSubscriber(PullStreamSubscriber):
    """FastStream's pull subscriber with our fetch loop, a sliding window of ``concurrency`` handlers:

    - a fetch asks only for as many messages as there are free handler slots, so every fetched message is
      handled (and kept alive by heartbeats) at once, never queued where its ``ack_wait`` could run out;
    - a slot freed by a finished handler is refilled without waiting for the rest of its batch, so one slow
      handler (a store call hanging through an outage) does not stop the others from pulling;
    - while the ack table holds messages through an outage, nothing more is pulled;
    - an idle fetch (nats-py raises a bare ``TimeoutError`` for some) is no error, a failing fetch backs off
      instead of spinning through FastStream's task supervisor, a closed connection ends the loop;
    - what a fetch brings back after a stop began is handed straight back (nak); when FastStream's stop runs
      out of patience it cancels this loop, which cancels the handlers (the ack table naks their messages).
    """

    __slots__ = ()
    ack_table: AckTable  # set by BusBroker.subscribe

    async def _consume_pull(self, cb: Callable[[Msg], Coroutine[Any, Any, Any]]) -> None:
        assert self.subscription is not None
        subscription, concurrency, timeout = self.subscription, self.pull_sub.batch_size, self.pull_sub.timeout
        inflight: set[asyncio.Task[Any]] = set()
        slot_free = asyncio.Event()

        def done(task: asyncio.Task[Any]) -> None:
            inflight.discard(task)
            slot_free.set()

        errors_in_a_row = 0
        try:
            while self.running:
                if len(inflight) >= concurrency:
                    slot_free.clear()
                    await slot_free.wait()
                    continue
                if (outage := self.ack_table.outage) is not None:
                    # Back-pressure: what is held waits for the dependency; pulling more would only queue it here.
                    await asyncio.wait({outage}, timeout=timeout)
                    continue
                try:
                    messages = await subscription.fetch(batch=concurrency - len(inflight), timeout=timeout)
                    errors_in_a_row = 0
                except TimeoutError:  # nats.errors.TimeoutError too: nothing to do right now
                    continue
                except nats.errors.ConnectionClosedError:
                    log.warning("subscriber %s: connection closed, pull loop ends", self.subject.broker_address)
                    break
                except Exception as e:  # a server error, a reconnect in progress: pause and pull again
                    errors_in_a_row += 1
                    pause = retry_delay(errors_in_a_row, 0.1, 5.0)
                    log.warning("subscriber %s: fetch failed (%s), again in %.1fs",
                                self.subject.broker_address, e, pause)  # fmt: skip
                    await asyncio.sleep(pause)
                    continue
                if not self.running:
                    await asyncio.gather(*(_give_back(msg) for msg in messages))
                    break
                for msg in messages:
                    task = asyncio.create_task(cb(msg))
                    inflight.add(task)
                    task.add_done_callback(done)
            while inflight:  # draining: FastStream's stop waits for these, then cancels this loop
                await asyncio.wait(set(inflight))
        except asyncio.CancelledError:
            for task in inflight:
                task.cancel()
            await asyncio.gather(*inflight, return_exceptions=True)
            raise


async def _give_back(msg: Msg) -> None:
    try:
        await msg.nak()
    except nats.errors.Error as e:  # the connection is going too: redelivery after ack_wait it is
        log.debug("nak at stop failed: %s", e)
