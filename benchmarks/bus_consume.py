"""Messages per second through one FastStream bus subscriber (BusBroker): the per-message cost of consuming.

    python benchmarks/bus_consume.py [--messages 4000] [--concurrency 16] [--handler-ms 0] [--rounds 3]

A bundled nats-server with the bus's streams; ``--messages`` small Tasks on ``work.cpu``, read by one
subscriber of ``work-cpu`` whose handler does nothing (or awaits ``--handler-ms``). Each message is decoded,
run and acked through the ack table, as in the services. Prints the median of ``--rounds`` rounds.

Work travels in batches (a Task carries many records: a million-task run is ~2,000 Tasks and as many
results on the bus), so this cost is per batch, not per record. Target: a subscriber settles >= 500
messages/s with a no-op handler on this 2-core machine, so that consuming is never what limits a run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

from evalsi.bus import BusBroker, BusConnection, StreamLimits, Subscription, connect, ensure_streams
from evalsi.bus.codec import encode
from evalsi.bus.natsserver import NatsServer
from evalsi.bus.v1alpha1 import bus_pb2

TARGET_PER_S = 500
_MIB = 1024 * 1024
LIMITS = StreamLimits(work_max_bytes=256 * _MIB, results_max_bytes=64 * _MIB, events_max_bytes=16 * _MIB,
                      control_max_bytes=8 * _MIB, deadletter_max_bytes=64 * _MIB, traces_max_bytes=16 * _MIB,
                      assembly_max_bytes=16 * _MIB)  # fmt: skip


async def fill(bus: BusConnection, messages: int) -> None:
    data, headers = encode(bus_pb2.Task(key="bench", run_id="bench", project="default"))
    for _ in range(messages):
        await bus.js.publish("work.cpu", data, headers=headers)


async def consume(bus: BusConnection, messages: int, concurrency: int, handler_s: float) -> float:
    """Seconds from start until every message is handled."""
    done = asyncio.Event()
    handled = 0

    async def handler(_task: bus_pb2.Task, _delivery: object) -> None:
        nonlocal handled
        if handler_s:
            await asyncio.sleep(handler_s)
        handled += 1
        if handled == messages:
            done.set()

    broker = BusBroker(bus)
    broker.subscribe(Subscription("WORK", "work-cpu", "work.cpu", bus_pb2.Task, "benchmark",
                                  concurrency=concurrency, fetch_timeout_s=0.5), handler)  # fmt: skip
    started = time.perf_counter()
    await broker.start()
    await done.wait()
    elapsed = time.perf_counter() - started
    await broker.stop()
    return elapsed


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as store_dir, NatsServer(store_dir=store_dir) as server:
        bus = await connect(server.url, name="bench-consume", give_up_after_s=10)
        try:
            await ensure_streams(bus.js, LIMITS)
            rates = []
            for round_ in range(args.rounds):
                await fill(bus, args.messages)
                rate = args.messages / await consume(bus, args.messages, args.concurrency, args.handler_ms / 1000)
                rates.append(rate)
                print(f"round {round_ + 1}: {rate:,.0f} messages/s", flush=True)
        finally:
            await bus.close()
    median = statistics.median(rates)
    verdict = "meets" if median >= TARGET_PER_S else "MISSES"
    print(f"{args.messages:,} messages, concurrency {args.concurrency}, handler {args.handler_ms} ms: "
          f"median {median:,.0f} messages/s   (target >= {TARGET_PER_S}/s with a no-op handler: {verdict})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--handler-ms", type=float, default=0.0)
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
