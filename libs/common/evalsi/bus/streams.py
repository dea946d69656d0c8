"""The JetStream streams and durable consumers of the bus, created or updated idempotently.

Every service calls ``ensure_streams`` on start: creating a stream that exists with the same config is a
no-op on the server, and one that exists with other limits is updated, so two services starting at once (or
one starting twice) agree. Limits are explicit on every stream so a runaway producer hits a wall it can see
(``discard new``: the publish fails) instead of silently evicting queued work.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

import nats.errors
import nats.js.errors
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    ConsumerInfo,
    DeliverPolicy,
    DiscardPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
    StreamInfo,
)
from nats.js.client import JetStreamContext

from evalsi.bus import subjects
from evalsi.bus.publisher import connection_max_payload
from evalsi.errors import InfraError

__all__ = [
    "ConsumerSettings",
    "StreamLimits",
    "ensure_consumer",
    "ensure_scheduler_consumers",
    "ensure_streams",
    "ensure_work_consumers",
    "stream_configs",
]

_MIB = 1024 * 1024
_DAY_S = 24 * 3600.0
_STREAM_NAME_IN_USE = 10058  # JetStream err_code: the stream exists with a different configuration


@dataclass(frozen=True)
class StreamLimits:
    """Byte budgets and ages of the bus's streams; ``max_msg_size`` None means the server's max payload."""

    work_max_bytes: int = 2048 * _MIB
    results_max_bytes: int = 2048 * _MIB
    events_max_bytes: int = 512 * _MIB
    control_max_bytes: int = 64 * _MIB
    deadletter_max_bytes: int = 1024 * _MIB
    events_max_age_s: float = _DAY_S
    deadletter_max_age_s: float = 7 * _DAY_S
    traces_max_bytes: int = 512 * _MIB
    traces_max_age_s: float = _DAY_S
    assembly_max_bytes: int = 256 * _MIB
    max_msg_size: int | None = None
    duplicate_window_s: float = 120.0
    replicas: int = 1


@dataclass(frozen=True)
class ConsumerSettings:
    """A durable pull consumer's delivery policy: how long a delivery may stay unacked, how often it is tried,
    and how many may be outstanding across all replicas."""

    ack_wait_s: float = 30.0
    max_deliver: int = 5
    max_ack_pending: int = 1000

    def __post_init__(self) -> None:
        if self.ack_wait_s <= 0:
            raise ValueError(f"ack_wait_s must be positive, got {self.ack_wait_s}")
        if self.max_deliver < 1:
            raise ValueError(f"max_deliver must be at least 1, got {self.max_deliver}")
        if self.max_ack_pending < 1:
            raise ValueError(f"max_ack_pending must be at least 1, got {self.max_ack_pending}")


def stream_configs(limits: StreamLimits, max_msg_size: int) -> list[StreamConfig]:
    """The streams: WORK, RESULTS, CONTROL and ASSEMBLY are work queues (a message lives until acked); EVENTS,
    DEADLETTER and TRACES keep messages by age for readers that come later."""

    def stream(
        name: str,
        subject: str,
        retention: RetentionPolicy,
        max_bytes: int,
        discard: DiscardPolicy,
        max_age_s: float = 0.0,
        description: str = "",
    ) -> StreamConfig:
        return StreamConfig(
            name=name,
            description=description,
            subjects=[subject],
            retention=retention,
            max_bytes=max_bytes,
            max_msgs=-1,
            max_age=max_age_s,
            max_msg_size=max_msg_size,
            discard=discard,
            storage=StorageType.FILE,
            num_replicas=limits.replicas,
            duplicate_window=limits.duplicate_window_s,
        )

    wq, lim = RetentionPolicy.WORK_QUEUE, RetentionPolicy.LIMITS
    new, old = DiscardPolicy.NEW, DiscardPolicy.OLD
    return [
        stream(subjects.WORK_STREAM, "work.>", wq, limits.work_max_bytes, new,
               description="tasks for worker pools, one durable consumer per pool"),
        stream(subjects.RESULTS_STREAM, "results.>", wq, limits.results_max_bytes, new,
               description="task results for the scheduler"),
        stream(subjects.EVENTS_STREAM, "runs.events.>", lim, limits.events_max_bytes, old,
               limits.events_max_age_s, "run progress events for WatchRun"),
        stream(subjects.CONTROL_STREAM, "runs.control.>", wq, limits.control_max_bytes, new,
               description="run control (created, cancel, resume) for the schedulers"),
        stream(subjects.DEADLETTER_STREAM, "deadletter.>", lim, limits.deadletter_max_bytes, old,
               limits.deadletter_max_age_s, "messages that failed permanently or ran out of deliveries"),
        stream(subjects.TRACES_STREAM, "traces.completed.>", lim, limits.traces_max_bytes, old,
               limits.traces_max_age_s, "completed traces for online policies"),
        stream(subjects.ASSEMBLY_STREAM, "traces.observed.>", wq, limits.assembly_max_bytes, new,
               description="spans an ingest replica saw of traces another replica's partition completes"),
    ]  # fmt: skip


async def _ensure_stream(js: JetStreamContext, config: StreamConfig) -> StreamInfo:
    try:
        return await js.add_stream(config)
    except nats.js.errors.APIError as e:
        if e.err_code != _STREAM_NAME_IN_USE:
            raise InfraError(f"creating stream {config.name} failed: {e.description or e}") from e
    except (nats.errors.Error, TimeoutError) as e:
        raise InfraError(f"creating stream {config.name} failed: {type(e).__name__}: {e}") from e
    try:
        return await js.update_stream(config)
    except nats.js.errors.APIError as e:
        raise InfraError(
            f"stream {config.name} exists with a configuration that cannot become {config.as_dict()}: "
            f"{e.description or e}"
        ) from e
    except (nats.errors.Error, TimeoutError) as e:
        raise InfraError(f"updating stream {config.name} failed: {type(e).__name__}: {e}") from e


async def ensure_streams(js: JetStreamContext, limits: StreamLimits | None = None) -> dict[str, StreamInfo]:
    """Create the bus's streams, or update their limits; safe to call twice and from several services at once."""
    limits = limits or StreamLimits()
    max_msg_size = limits.max_msg_size or connection_max_payload(js)
    configs = stream_configs(limits, max_msg_size)
    infos = await asyncio.gather(*(_ensure_stream(js, c) for c in configs))
    return {c.name or "": info for c, info in zip(configs, infos, strict=True)}


async def ensure_consumer(
    js: JetStreamContext,
    stream: str,
    durable: str,
    filter_subject: str,
    settings: ConsumerSettings | None = None,
) -> ConsumerInfo:
    """Create or update a durable pull consumer with explicit acks (the server's create is create-or-update)."""
    settings = settings or ConsumerSettings()
    config = ConsumerConfig(
        name=durable,
        durable_name=durable,
        filter_subject=filter_subject,
        deliver_policy=DeliverPolicy.ALL,
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait=settings.ack_wait_s,
        max_deliver=settings.max_deliver,
        max_ack_pending=settings.max_ack_pending,
    )
    try:
        return await js.add_consumer(stream, config)
    except nats.js.errors.APIError as e:
        raise InfraError(f"creating consumer {durable} on stream {stream} failed: {e.description or e}") from e
    except (nats.errors.Error, TimeoutError) as e:
        raise InfraError(f"creating consumer {durable} on stream {stream} failed: {type(e).__name__}: {e}") from e


async def ensure_work_consumers(
    js: JetStreamContext, pools: Iterable[str] = subjects.POOLS, settings: ConsumerSettings | None = None
) -> dict[str, ConsumerInfo]:
    """``work-<pool>`` filtered on ``work.<pool>`` for each pool."""
    pools = list(pools)
    infos = await asyncio.gather(
        *(
            ensure_consumer(js, subjects.WORK_STREAM, subjects.work_consumer(p), subjects.work(p), settings)
            for p in pools
        )
    )
    return dict(zip(pools, infos, strict=True))


async def ensure_scheduler_consumers(
    js: JetStreamContext, settings: ConsumerSettings | None = None
) -> tuple[ConsumerInfo, ConsumerInfo]:
    """The scheduler's ``scheduler`` (on results.>) and ``scheduler-control`` (on runs.control.>)."""
    results = await ensure_consumer(js, subjects.RESULTS_STREAM, subjects.RESULTS_CONSUMER, "results.>", settings)
    control = await ensure_consumer(
        js, subjects.CONTROL_STREAM, subjects.CONTROL_CONSUMER, "runs.control.>", settings
    )
    return results, control
