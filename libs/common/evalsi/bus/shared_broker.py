"""FastStream over a service's own NATS connection: the broker every bus handler runs on, and a core-NATS
subscriber in a queue group that hands its handler the raw message (request/reply and advisories need its
headers and reply subject, not a decoded body).

The JetStream pull subscribers with the ack table are ``evalsi.bus.broker``'s; the Evaluate responder
(``evalsi.bus.requests``) and the max-deliveries watcher (``evalsi.bus.deadletter``) use ``CoreSubscriber``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from faststream._internal.broker import BrokerUsecase
from faststream.nats import NatsBroker, NatsMessage
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

__all__ = ["CoreSubscriber", "SharedConnectionBroker", "faststream_log"]

# (raw message) -> what FastStream publishes on its reply subject (None: nothing)
RawHandler = Callable[[Msg], Awaitable[Any]]


def faststream_log() -> logging.Logger:
    """FastStream's own lines (per message, and its task supervisor's at INFO whenever a loop ends) go here,
    from WARNING up unless an operator sets this logger's level."""
    logger = logging.getLogger("evalsi.bus.faststream")
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.WARNING)
    return logger


class SharedConnectionBroker(NatsBroker):
    """A NatsBroker over the service's own connection: FastStream neither opens nor drains it (the service's
    ``BusConnection`` owns reconnects, readiness and closing)."""

    def __init__(self, nc: NATS | None, **options: Any) -> None:
        super().__init__(**options)
        self._shared = nc

    async def _connect(self) -> NATS:
        if self._shared is None:
            raise RuntimeError("this broker describes the bus (AsyncAPI) and has no connection to start on")
        self.config.connect(self._shared)
        return self._shared

    async def stop(self, *exc: Any) -> None:
        await BrokerUsecase.stop(self, *exc)  # subscribers only: the connection stays the service's
        self._connection = None
        self.config.disconnect()


async def _raw_message(msg: NatsMessage) -> Msg:
    return msg.raw_message


class CoreSubscriber:
    """``handler(raw message)`` for each message on ``subject`` in queue group ``queue``, up to ``concurrency``
    at once; what the handler returns (a ``faststream.Response``) is published on the message's reply subject.
    A stop waits up to its ``timeout`` for the handlers in flight."""

    def __init__(
        self, nc: NATS, subject: str, queue: str, handler: RawHandler, *, concurrency: int = 1, title: str | None = None
    ) -> None:
        self.subject = subject
        self.queue = queue
        self._broker = SharedConnectionBroker(
            nc, apply_types=False, logger=faststream_log(), log_level=logging.DEBUG, graceful_timeout=10.0
        )
        self._broker.subscriber(
            subject, queue=queue, max_workers=concurrency, decoder=_raw_message, title=title
        )(handler)
        self._started = False

    async def start(self) -> None:
        if not self._started:
            await self._broker.start()
            self._started = True

    async def stop(self, timeout: float = 10.0) -> None:
        if self._started:
            self._started = False
            self._broker.config.broker_config.graceful_timeout = timeout
            await self._broker.stop()
