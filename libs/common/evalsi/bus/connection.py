"""Connect to NATS, waiting for it with capped exponential backoff, and report readiness.

A service starts before (or without) its NATS server being up: ``connect`` keeps trying and says why it is
not ready yet through a ``Readiness`` that the service's health endpoint shows. Once connected, nats-py's own
reconnect logic takes over, and its disconnect/reconnect callbacks flip the same ``Readiness``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import nats
import nats.errors
from nats.aio.client import Client as NATS
from nats.js.client import JetStreamContext

from evalsi.bus.credentials import NatsCredentials, inbox_prefix
from evalsi.errors import InfraError
from evalsi.masking import mask_url

__all__ = ["BusConnection", "Readiness", "connect"]

log = logging.getLogger(__name__)


@dataclass
class Readiness:
    """Whether the bus is usable now, and why not; a health endpoint serves ``ready`` and ``reason``."""

    ready: bool = False
    reason: str = "not connected yet"
    changed_at: float = field(default_factory=time.monotonic)

    def set(self, ready: bool, reason: str) -> bool:
        """Record a state; True when it changed."""
        changed = ready != self.ready or reason != self.reason
        self.ready, self.reason = ready, reason
        if changed:
            self.changed_at = time.monotonic()
        return changed

    def as_dict(self) -> dict[str, object]:
        return {"ready": self.ready, "reason": self.reason}


OnState = Callable[[Readiness], None]


@dataclass
class BusConnection:
    """A connected client, its JetStream context and its readiness."""

    nc: NATS
    js: JetStreamContext
    readiness: Readiness
    # Where this connection's replies arrive (pull deliveries included): its identity's own inbox when it has one.
    inbox_prefix: str = "_INBOX"

    async def close(self) -> None:
        """Drain (flush subscriptions and pending publishes), then close."""
        if self.nc.is_closed:
            return
        try:
            await self.nc.drain()
        except (nats.errors.Error, TimeoutError):
            with contextlib.suppress(nats.errors.Error):
                await self.nc.close()


async def _probe(servers: Sequence[str], timeout: float) -> None:
    """Open a TCP connection to any server and read its INFO line: cheap proof that a NATS server is there."""
    errors: list[str] = []
    for server in servers:
        parts = urlsplit(server if "://" in server else f"nats://{server}")
        host, port = parts.hostname or "127.0.0.1", parts.port or 4222
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
            try:
                line = await asyncio.wait_for(reader.readline(), timeout)
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
            if line.startswith(b"INFO"):
                return
            errors.append(f"{host}:{port} did not greet as a NATS server")
        except (OSError, TimeoutError) as e:
            errors.append(f"{host}:{port}: {e or type(e).__name__}")
    raise ConnectionError("; ".join(errors))


async def connect(
    url: str | Sequence[str],
    *,
    name: str,
    on_state: OnState | None = None,
    readiness: Readiness | None = None,
    initial_backoff_s: float = 0.05,
    max_backoff_s: float = 5.0,
    give_up_after_s: float | None = None,
    connect_timeout_s: float = 2.0,
    reconnect_wait_s: float = 0.5,
    ping_interval_s: int = 20,
    credentials: NatsCredentials | None = None,
) -> BusConnection:
    """Connect to ``url`` (one or several servers), retrying with capped exponential backoff until it works,
    or raising ``InfraError`` after ``give_up_after_s``. Afterwards reconnects are unlimited.

    ``credentials`` authenticate the connection (``evalsi.bus.credentials``); with a user, its replies come back
    on ``_INBOX.<user>`` (``evalsi.bus.credentials.inbox_prefix``), the only inbox its permissions let it read."""
    servers = [url] if isinstance(url, str) else list(url)
    inbox = inbox_prefix(credentials.user) if credentials is not None and credentials.user else "_INBOX"
    authentication = credentials.connect_options() if credentials is not None else {}
    state = readiness or Readiness()

    def report(ready: bool, reason: str) -> None:
        if state.set(ready, reason) and on_state is not None:
            try:
                on_state(state)
            except Exception:
                log.exception("on_state callback failed")

    async def disconnected() -> None:
        report(False, "disconnected from NATS; reconnecting")

    async def reconnected() -> None:
        report(True, "connected (reconnected)")

    async def closed() -> None:
        report(False, "NATS connection closed")

    # What the server said last (an authorization violation, say): nats-py reports it here, while the attempt
    # itself ends in a bare timeout, or in a connection reset when the server's close overtook its -ERR line. It is
    # kept across attempts, and a socket error never replaces a line the server sent, so that the reason given up
    # with names it even when later tries lost it.
    server_said: list[str] = []
    heard_server = False

    async def error(e: Exception) -> None:
        nonlocal heard_server
        # nats-py raises a server's -ERR line as a plain ``Error`` (its subclasses are the client's own conditions).
        from_server = type(e) is nats.errors.Error or isinstance(e, nats.errors.AuthorizationError)
        if from_server or not heard_server:
            server_said[:] = [str(e)]
            heard_server = heard_server or from_server
        log.debug("nats client error: %s", e)

    started = time.monotonic()
    delay = initial_backoff_s
    attempt = 0
    while True:
        attempt += 1
        try:
            await _probe(servers, connect_timeout_s)
            nc = NATS()
            try:
                await asyncio.wait_for(
                    nc.connect(
                        servers,
                        name=name,
                        connect_timeout=connect_timeout_s,  # type: ignore[arg-type]
                        reconnect_time_wait=reconnect_wait_s,  # type: ignore[arg-type]
                        max_reconnect_attempts=-1,
                        allow_reconnect=True,
                        ping_interval=ping_interval_s,
                        disconnected_cb=disconnected,
                        reconnected_cb=reconnected,
                        closed_cb=closed,
                        error_cb=error,
                        inbox_prefix=inbox,
                        **authentication,
                    ),
                    timeout=connect_timeout_s * 2,
                )
            except BaseException:
                with contextlib.suppress(Exception):
                    await nc.close()
                raise
            report(True, "connected")
            return BusConnection(nc=nc, js=nc.jetstream(), readiness=state, inbox_prefix=inbox)
        except (OSError, TimeoutError, nats.errors.Error) as e:
            # The reason is served by /readyz and logged: the servers' credentials are masked.
            where = ", ".join(mask_url(server) for server in servers)
            why = str(e) or type(e).__name__
            if server_said and server_said[0] not in why:
                why = f"{why} (the server said: {server_said[0]})"
            reason = f"connecting to {where}: attempt {attempt} failed: {why}"
            report(False, reason)
            elapsed = time.monotonic() - started
            if give_up_after_s is not None and elapsed + delay > give_up_after_s:
                raise InfraError(f"could not reach NATS within {give_up_after_s:g}s: {reason}") from e
            log.info("%s; again in %.2fs", reason, delay)
            await asyncio.sleep(delay)
            delay = min(max_backoff_s, delay * 2)
