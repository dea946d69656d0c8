"""Streams and durable consumers are created, or updated, idempotently on a real server."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from nats.js.api import AckPolicy, DiscardPolicy, RetentionPolicy, StorageType

from evalsi.bus import (
    BusConnection,
    ConsumerSettings,
    StreamLimits,
    connect,
    ensure_scheduler_consumers,
    ensure_streams,
    ensure_work_consumers,
    subjects,
)
from evalsi.bus.natsserver import NatsServer
from evalsi.errors import InfraError


async def test_streams_have_explicit_limits(bus: BusConnection, limits: StreamLimits) -> None:
    infos = await ensure_streams(bus.js, limits)
    assert set(infos) == {"WORK", "RESULTS", "EVENTS", "CONTROL", "DEADLETTER", "TRACES", "ASSEMBLY"}
    max_payload = bus.nc.max_payload
    for info in infos.values():
        c = info.config
        assert c.max_msg_size == max_payload
        assert c.duplicate_window == 120
        assert c.storage == StorageType.FILE
        assert c.max_bytes and c.max_bytes > 0
    work, results, events, control, dead = (infos[n].config for n in ("WORK", "RESULTS", "EVENTS", "CONTROL",
                                                                       "DEADLETTER"))  # fmt: skip
    assert work.subjects == ["work.>"] and work.retention == RetentionPolicy.WORK_QUEUE
    assert work.discard == DiscardPolicy.NEW
    assert results.subjects == ["results.>"] and results.retention == RetentionPolicy.WORK_QUEUE
    assert control.subjects == ["runs.control.>"] and control.retention == RetentionPolicy.WORK_QUEUE
    assert events.subjects == ["runs.events.>"] and events.retention == RetentionPolicy.LIMITS
    assert events.max_age == 24 * 3600 and events.discard == DiscardPolicy.OLD
    assert dead.subjects == ["deadletter.>"] and dead.max_age == 7 * 24 * 3600
    traces, assembly = infos["TRACES"].config, infos["ASSEMBLY"].config
    assert traces.subjects == ["traces.completed.>"] and traces.retention == RetentionPolicy.LIMITS
    assert traces.max_age == 24 * 3600 and traces.discard == DiscardPolicy.OLD
    assert assembly.subjects == ["traces.observed.>"] and assembly.retention == RetentionPolicy.WORK_QUEUE


async def test_ensure_twice_and_concurrently_from_two_services(fresh_server: NatsServer, limits: StreamLimits) -> None:
    a = await connect(fresh_server.url, name="api")
    b = await connect(fresh_server.url, name="scheduler")
    try:
        await asyncio.gather(ensure_streams(a.js, limits), ensure_streams(b.js, limits))
        await ensure_streams(a.js, limits)
        await asyncio.gather(ensure_work_consumers(a.js), ensure_work_consumers(b.js))
        names = sorted(s.config.name for s in await a.js.streams_info())
        assert names == ["ASSEMBLY", "CONTROL", "DEADLETTER", "EVENTS", "RESULTS", "TRACES", "WORK"]
    finally:
        await a.close()
        await b.close()


async def test_changed_limits_update_the_stream(bus: BusConnection, limits: StreamLimits) -> None:
    bigger = replace(limits, work_max_bytes=limits.work_max_bytes * 2)
    infos = await ensure_streams(bus.js, bigger)
    assert infos["WORK"].config.max_bytes == bigger.work_max_bytes
    assert (await bus.js.stream_info("WORK")).config.max_bytes == bigger.work_max_bytes


async def test_a_stream_that_cannot_be_updated_is_an_infra_error_naming_it(
    fresh_server: NatsServer, limits: StreamLimits
) -> None:
    conn = await connect(fresh_server.url, name="t")
    try:
        await conn.js.add_stream(name="WORK", subjects=["work.>"], retention=RetentionPolicy.LIMITS)
        with pytest.raises(InfraError, match="stream WORK exists with a configuration that cannot become"):
            await ensure_streams(conn.js, limits)
    finally:
        await conn.close()


async def test_one_durable_consumer_per_pool(bus: BusConnection) -> None:
    settings = ConsumerSettings(ack_wait_s=7, max_deliver=4, max_ack_pending=50)
    infos = await ensure_work_consumers(bus.js, settings=settings)
    assert set(infos) == set(subjects.POOLS)
    for pool, info in infos.items():
        assert info.name == f"work-{pool}"
        assert info.config.filter_subject == f"work.{pool}"
        assert info.config.ack_policy == AckPolicy.EXPLICIT
        assert info.config.ack_wait == 7 and info.config.max_deliver == 4 and info.config.max_ack_pending == 50
    # Settings change in place (create is create-or-update).
    again = await ensure_work_consumers(bus.js, ["cpu"], ConsumerSettings(ack_wait_s=9))
    assert again["cpu"].config.ack_wait == 9
    results, control = await ensure_scheduler_consumers(bus.js)
    assert (results.name, results.config.filter_subject) == ("scheduler", "results.>")
    assert (control.name, control.config.filter_subject) == ("scheduler-control", "runs.control.>")
