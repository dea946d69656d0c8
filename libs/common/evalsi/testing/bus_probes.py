"""What a service's NATS user may and may not do, tried on a real nats-server: the probes the bus-identity tests
share (``evalsi serve``'s bundled server, compose's ``bus-credentials``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import nats
import nats.errors

from evalsi.bus import subjects
from evalsi.bus.credentials import inbox_prefix, read_credentials

__all__ = ["WorkerProbe", "anonymous_refusal", "probe_worker"]


@dataclass
class WorkerProbe:
    """What a worker's user met: the errors its connection reported (permission violations), the JetStream calls
    on the other pool's durable that were refused, and whether its own pool's durable answered."""

    errors: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    own_durable: bool = False


async def probe_worker(url: str, credentials_file: Path, other_pool: str) -> WorkerProbe:
    """Connect as the worker user whose file is ``credentials_file`` and try what it may not do: publish run
    control and ``other_pool``'s tasks, subscribe to ``other_pool``'s work and bind its durable; then read its own
    pool's durable (which its service created), which it may."""
    probe = WorkerProbe()

    async def on_error(exc: Exception) -> None:
        probe.errors.append(str(exc))

    credentials = read_credentials(credentials_file)
    own_pool = credentials.user.removeprefix("worker-")
    nc = await nats.connect(url, error_cb=on_error, inbox_prefix=inbox_prefix(credentials.user),
                            allow_reconnect=False, **credentials.connect_options())
    try:
        await nc.publish(subjects.run_control("r1"), b"cancel")
        await nc.publish(subjects.work(other_pool), b"task")
        await nc.subscribe(subjects.work(other_pool))
        await nc.flush()
        js = nc.jetstream(timeout=1.0)
        try:
            await js.pull_subscribe(subjects.work(other_pool), durable=subjects.work_consumer(other_pool),
                                    stream=subjects.WORK_STREAM)
        except (nats.errors.TimeoutError, nats.errors.Error) as exc:
            probe.refused.append(type(exc).__name__)
        try:
            info = await js.consumer_info(subjects.WORK_STREAM, subjects.work_consumer(own_pool))
            probe.own_durable = info.config.filter_subject == subjects.work(own_pool)
        except (nats.errors.TimeoutError, nats.errors.Error):
            probe.own_durable = False
        await asyncio.sleep(0.3)  # the server's asynchronous -ERR for the subscription arrives after the flush
    finally:
        await nc.close()
    return probe


async def anonymous_refusal(url: str) -> str:
    """The error a connection without credentials gets ('' when the server admitted it)."""
    try:
        nc = await nats.connect(url, allow_reconnect=False, connect_timeout=2, max_reconnect_attempts=0)
    except (nats.errors.Error, OSError) as exc:
        return str(exc) or type(exc).__name__
    await nc.close()
    return ""
