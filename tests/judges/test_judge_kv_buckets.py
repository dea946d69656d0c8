"""Rate-limit buckets in NATS KV, shared by limiters on separate connections (as worker processes are).

Against a real nats-server with JetStream (the bundled binary); a server that cannot start fails the tests.
Waits run on an injected clock shared by both limiters, as the wall clock is shared by worker processes, so
a minute's quota is checked in milliseconds; one test uses the real wall clock and real sleeps for a second.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import nats
import pytest
from nats.aio.client import Client as NATS

from evalsi.bus.natsserver import NatsServer
from evalsi.errors import InfraError
from evalsi.judges import BucketState, InMemoryBucketStore, NatsKVBucketStore, RateLimiter
from evalsi.judges.kv_buckets import BUCKET, kv_key
from evalsi.judges.panel import JudgeSet

Connect = Callable[[], Awaitable[NATS]]


@pytest.fixture
def nats_server() -> Iterator[NatsServer]:
    """A fresh server per test (it starts in tens of milliseconds), so no test sees another's buckets."""
    with NatsServer() as server:
        yield server


@pytest.fixture
async def connect(nats_server: NatsServer) -> AsyncIterator[Connect]:
    """``await connect()``: a new connection of its own, as each worker process has."""
    opened: list[NATS] = []

    async def open_one() -> NATS:
        nc = await nats.connect(nats_server.url, connect_timeout=5, max_reconnect_attempts=0)
        opened.append(nc)
        return nc

    yield open_one
    for nc in opened:
        await nc.close()


class SharedClock:
    """A wall-clock-like reading both limiters share; sleeping records the wait without moving it, so
    every reservation is made at the same instant and its wait is exactly its place in the queue."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now

    async def park(self, seconds: float) -> None:
        await asyncio.sleep(0)


class CountingStore(NatsKVBucketStore):
    """The real store, counting the compare-and-swaps another writer won."""

    conflicts = 0

    async def save(self, key: str, state: BucketState, revision: int) -> bool:
        saved = await super().save(key, state, revision)
        if not saved:
            self.conflicts += 1
        return saved


def limiter(store: NatsKVBucketStore, clock: SharedClock) -> RateLimiter:
    return RateLimiter(store, clock=clock, sleep=clock.park)


async def test_two_limiters_on_two_connections_share_one_rpm_quota(connect: Connect) -> None:
    clock = SharedClock()
    stores = [CountingStore((await connect()).jetstream()), CountingStore((await connect()).jetstream())]
    models = [limiter(store, clock).for_model("openai", "gpt-4o-mini", rpm=6) for store in stores]

    # Ten callers on each "process", all at once: the first minute's burst is 6 for both together, then one
    # request every 10 s, and no two callers get the same slot.
    waits = await asyncio.gather(*(models[i % 2].acquire() for i in range(20)))
    assert sorted(waits) == [0.0] * 6 + [pytest.approx(10.0 * k) for k in range(1, 15)]
    granted_in_first_minute = sum(1 for w in waits if w < 60)
    assert granted_in_first_minute == 6 + 5  # the burst, then 10, 20, 30, 40 and 50 s
    assert sum(store.conflicts for store in stores) >= 1  # they raced, and the losers retried

    state, revision = await stores[0].load(models[0].key)
    assert state is not None and state.requests == pytest.approx(6 - 20) and revision > 0

    # A quiet minute refills 6 for everyone: the debt of 14 becomes 8, so the next caller waits 90 s.
    clock.now += 60
    assert await models[1].acquire() == pytest.approx(90.0)


async def test_a_lost_compare_and_swap_is_retried_and_both_reservations_count(connect: Connect) -> None:
    clock = SharedClock()
    other = limiter(NatsKVBucketStore((await connect()).jetstream()), clock).for_model("openai", "m", rpm=6)

    class Interleaved(CountingStore):
        """Lets the other process save between this one's load and its save, once."""

        raced = False

        async def load(self, key: str) -> tuple[BucketState | None, int]:
            loaded = await super().load(key)
            if not self.raced:
                self.raced = True
                await other.acquire()
            return loaded

    store = Interleaved((await connect()).jetstream())
    mine = limiter(store, clock).for_model("openai", "m", rpm=6)
    assert await mine.acquire() == 0.0
    assert store.conflicts == 1
    state, _ = await store.load(mine.key)
    assert state is not None and state.requests == pytest.approx(4.0)  # 6 - both calls, not 6 - 1


async def test_compare_and_swap_on_revisions(connect: Connect) -> None:
    a = NatsKVBucketStore((await connect()).jetstream())
    b = NatsKVBucketStore((await connect()).jetstream())
    first, second = BucketState(requests=5, tokens=0, updated=1.0), BucketState(requests=4, tokens=0, updated=2.0)
    assert await a.load("openai/m") == (None, 0)
    assert await b.save("openai/m", first, 0)
    assert not await a.save("openai/m", second, 0)  # it exists now: creating again loses
    state, revision = await a.load("openai/m")
    assert state == first and revision > 0
    assert await b.save("openai/m", second, revision)
    assert not await a.save("openai/m", first, revision)  # a stale revision loses
    assert await a.load("openai/m") == (second, revision + 1)


async def test_the_bucket_is_created_when_missing_and_again_after_it_is_deleted(connect: Connect) -> None:
    js = (await connect()).jetstream()
    clock = SharedClock()
    store = NatsKVBucketStore(js)  # nothing created yet: the first call does it
    model = limiter(store, clock).for_model("openai", "m", rpm=2)
    assert [await model.acquire() for _ in range(3)] == [0.0, 0.0, pytest.approx(30.0)]
    assert (await js.key_value(BUCKET)) is not None

    await js.delete_key_value(BUCKET)  # an operator removes it under a running worker
    waits = [await model.acquire() for _ in range(3)]  # no exception: the bucket is created again
    # The state went with the bucket, so this is a first use again: a full bucket of 2. (nats-server may
    # bring back a file stream's last message when the stream is re-created right after its deletion;
    # that state, one debt of 1 from before, is as valid, and the queue continues from it.)
    fresh, resurrected = [0.0, 0.0, 30.0], [60.0, 90.0, 120.0]
    assert waits in (pytest.approx(fresh), pytest.approx(resurrected))
    assert (await js.key_value(BUCKET)) is not None

    # Deleted between a load and a save: that save loses (its revision went with the bucket), and a save at
    # the revision a fresh load gives wins.
    _, revision = await store.load(model.key)
    await js.delete_key_value(BUCKET)
    assert not await store.save(model.key, BucketState(requests=1, tokens=0, updated=clock.now), revision)
    state, revision = await store.load(model.key)
    assert (state, revision) == (None, 0) or revision > 0
    assert await store.save(model.key, BucketState(requests=1, tokens=0, updated=clock.now), revision)


async def test_open_creates_the_bucket_at_once(connect: Connect) -> None:
    js = (await connect()).jetstream()
    store = await NatsKVBucketStore.open(js, bucket="evalsi-ratelimits-test")
    status = await (await js.key_value("evalsi-ratelimits-test")).status()
    assert status.history == 1 and store.bucket == "evalsi-ratelimits-test"
    again = await NatsKVBucketStore.open((await connect()).jetstream(), bucket="evalsi-ratelimits-test")
    assert await again.load("x") == (None, 0)  # a second process opens the same bucket


async def test_an_unreadable_state_is_reset_by_compare_and_swap(connect: Connect) -> None:
    js = (await connect()).jetstream()
    store = await NatsKVBucketStore.open(js)
    kv = await js.key_value(BUCKET)
    written = await kv.put(kv_key("openai/m"), b"not json")
    assert await store.load("openai/m") == (None, written)
    model = limiter(store, SharedClock()).for_model("openai", "m", rpm=3)
    assert await model.acquire() == 0.0
    state, _ = await store.load("openai/m")
    assert state is not None and state.requests == pytest.approx(2.0)


def test_keys_are_sanitized_to_the_kv_charset_without_colliding() -> None:
    assert kv_key("openai/gpt-4o-mini") == "openai/gpt-4o-mini"
    assert kv_key("openai/meta-llama/Llama-3.1-8B") == "openai/meta-llama/Llama-3.1-8B"
    odd = ["openai/llama3.1:8b", "openai/llama3.1@8b", "anthropic/claude 3", "x/..a..", "*", ">", ".lead", "a b*c"]
    keys = [kv_key(k) for k in odd]
    assert len(set(keys)) == len(odd)
    for key in keys:
        assert key and key[0] != "." and key[-1] != "." and ".." not in key
        assert all(c.isascii() and (c.isalnum() or c in "-/_=.") for c in key), key


async def test_odd_model_names_work_end_to_end(connect: Connect) -> None:
    store = NatsKVBucketStore((await connect()).jetstream())
    clock = SharedClock()
    colon = limiter(store, clock).for_model("openai-compatible", "llama3.1:8b", rpm=1)
    at = limiter(store, clock).for_model("openai-compatible", "llama3.1@8b", rpm=1)
    assert await colon.acquire() == 0.0
    assert await at.acquire() == 0.0  # its own bucket, not the other's
    assert await colon.acquire() == pytest.approx(60.0)


async def test_the_real_wall_clock_paces_two_connections(connect: Connect) -> None:
    stores = [NatsKVBucketStore((await connect()).jetstream()) for _ in range(2)]
    a, b = (RateLimiter(store).for_model("openai", "m", rpm=60) for store in stores)  # time.time by default
    start = time.time()
    for _ in range(60):
        assert await a.acquire() == 0.0  # the burst, all from one process
    waited = await b.acquire()  # the other process finds it spent: one more second at 1 request/s
    elapsed = time.time() - start
    assert 0.3 < waited <= 1.0 and elapsed >= waited


async def test_a_shared_store_needs_a_wall_clock(connect: Connect) -> None:
    store = NatsKVBucketStore((await connect()).jetstream())
    assert RateLimiter(store)._clock is time.time  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match=r"time\.time, not time\.monotonic"):
        RateLimiter(store, clock=time.monotonic)
    assert RateLimiter(InMemoryBucketStore())._clock is time.monotonic  # type: ignore[attr-defined]


async def test_an_unreachable_server_is_an_infrastructure_error(connect: Connect, nats_server: NatsServer) -> None:
    nc = await connect()
    store = NatsKVBucketStore(nc.jetstream())
    await nc.close()
    with pytest.raises(InfraError, match="evalsi-ratelimits"):
        await store.load("openai/m")


async def test_a_judge_set_draws_on_the_shared_limiter(connect: Connect) -> None:
    store = await NatsKVBucketStore.open((await connect()).jetstream())
    shared = RateLimiter(store)
    async with JudgeSet({}, limiter=shared) as judges:
        assert judges.limiter is shared


async def test_a_workers_target_calls_draw_on_the_shared_buckets_too(connect: Connect) -> None:
    from google.protobuf import json_format

    from evalsi.bus.v1alpha1.bus_pb2 import STAGE_GENERATE, TASK_STATUS_DONE, Task
    from evalsi.evaluators import Registry
    from evalsi.runs.execute import Executor
    from evalsi.testing import FakeOpenAI

    store = await NatsKVBucketStore.open((await connect()).jetstream())
    async with FakeOpenAI() as provider, JudgeSet({}, limiter=RateLimiter(store)) as judges:
        task = json_format.ParseDict(
            {
                "key": "run1/0/generate/0",
                "runId": "run1",
                "project": "default",
                "stage": "STAGE_GENERATE",
                "target": {"model": {"connector": "openai-compatible", "model": "target-model",
                                     "baseUrl": provider.base_url, "params": {"rpm": 100}}},
                "records": [{"id": f"r{i}", "input": {"text": f"question {i}"}} for i in range(3)],
            },
            Task(),
        )  # fmt: skip
        assert task.stage == STAGE_GENERATE
        result = await Executor(Registry.from_entry_points(), judges).execute(task)
    assert result.status == TASK_STATUS_DONE and len(result.records) == 3
    assert all(r.output.text.startswith("fake reply to") for r in result.records)
    state, _ = await store.load("openai/target-model")  # the connector's provider
    assert state is not None and state.requests == pytest.approx(97.0, abs=0.1)  # 100 - 3 calls (+ refill)
