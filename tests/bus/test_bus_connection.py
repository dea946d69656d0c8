"""connect() waits for a server that starts late, and readiness follows the connection."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from evalsi.bus import Readiness, connect
from evalsi.bus.natsserver import NatsServer
from evalsi.errors import InfraError

Eventually = Callable[..., Awaitable[None]]


async def test_connect_retries_until_a_late_server_is_up_and_readiness_follows(eventually: Eventually) -> None:
    server = NatsServer()  # its URL is known before it runs
    states: list[tuple[bool, str]] = []
    readiness = Readiness()

    connecting = asyncio.create_task(
        connect(server.url, name="late", readiness=readiness, reconnect_wait_s=0.1, max_backoff_s=0.2,
                on_state=lambda r: states.append((r.ready, r.reason)))
    )  # fmt: skip
    try:
        await eventually(lambda: len(states) >= 1, what="a first failed attempt")
        assert not readiness.ready and "attempt 1 failed" in readiness.reason
        assert not connecting.done()

        server.start()
        conn = await asyncio.wait_for(connecting, 5)
        assert conn.readiness is readiness
        assert readiness.ready and readiness.reason == "connected"
        assert conn.nc.is_connected

        server.stop()
        await eventually(lambda: not readiness.ready, what="readiness to flip on disconnect")
        assert "disconnected" in readiness.reason

        server.start()  # same ports
        await eventually(lambda: readiness.ready, timeout=10, what="readiness to come back on reconnect")
        assert readiness.reason == "connected (reconnected)"
        await conn.close()
    finally:
        connecting.cancel()
        server.stop()
    assert states[0][0] is False and (True, "connected") in states


async def test_connect_gives_up_when_told_to() -> None:
    server = NatsServer()  # never started
    with pytest.raises(InfraError, match=r"could not reach NATS within 0\.3s"):
        await connect(server.url, name="never", give_up_after_s=0.3, max_backoff_s=0.05)
