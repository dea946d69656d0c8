"""Token buckets on an injected clock: waits are computed, never slept for real."""

import asyncio

import pytest

from evalsi.judges import BucketState, InMemoryBucketStore, RateLimiter


class FakeTime:
    """Clock + sleep: sleeping records the wait and moves the clock forward by it."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def t() -> FakeTime:
    return FakeTime()


def limiter_for(t: FakeTime, recovery_s: float = 60.0, min_slowdown: float = 1 / 16) -> RateLimiter:
    return RateLimiter(clock=t.clock, sleep=t.sleep, recovery_s=recovery_s, min_slowdown=min_slowdown)


async def test_rpm_bucket_makes_the_n_plus_first_call_wait(t: FakeTime) -> None:
    m = limiter_for(t).for_model("openai", "m", rpm=3)
    for _ in range(3):
        assert await m.acquire() == 0.0
    assert t.sleeps == []
    assert await m.acquire() == pytest.approx(20.0)  # one request every 60/3 s once the burst is spent
    assert await m.acquire() == pytest.approx(20.0)
    t.now += 60  # a quiet minute refills the whole burst, no more
    for _ in range(3):
        assert await m.acquire() == 0.0
    assert await m.acquire() == pytest.approx(20.0)


async def test_tpm_bucket_waits_for_tokens(t: FakeTime) -> None:
    m = limiter_for(t).for_model("anthropic", "m", tpm=1200)
    assert await m.acquire(1000) == 0.0
    # 800 tokens short at 20 tokens/s.
    assert await m.acquire(1000) == pytest.approx(40.0)


async def test_settle_refunds_an_over_estimate(t: FakeTime) -> None:
    m = limiter_for(t).for_model("openai", "m", tpm=1000)
    await m.acquire(900)
    await m.settle(estimated=900, actual=100)
    assert await m.acquire(800) == 0.0
    assert await m.acquire(101) > 0  # 1000 - 900 + 800 - 800 = 100 left, not more


async def test_concurrent_callers_queue_in_order_without_a_lock(t: FakeTime) -> None:
    m = limiter_for(t).for_model("openai", "m", rpm=2)
    parked: list[float] = []

    async def park(seconds: float) -> None:  # do not move the clock: all four reserve at the same instant
        parked.append(seconds)

    m._limiter._sleep = park  # type: ignore[attr-defined]
    waits = await asyncio.gather(*(m.acquire() for _ in range(4)))
    assert waits == [0.0, 0.0, pytest.approx(30.0), pytest.approx(60.0)]


async def test_unrelated_models_do_not_wait_for_each_other() -> None:
    release = asyncio.Event()
    sleeping: list[float] = []

    async def blocking_sleep(seconds: float) -> None:
        sleeping.append(seconds)
        await release.wait()

    limiter = RateLimiter(clock=lambda: 0.0, sleep=blocking_sleep)
    a = limiter.for_model("openai", "a", rpm=1)
    b = limiter.for_model("openai", "b", rpm=1)
    await a.acquire()
    waiting_a = asyncio.create_task(a.acquire())
    await asyncio.sleep(0)  # let it reserve and start waiting
    assert sleeping == [pytest.approx(60.0)] and not waiting_a.done()
    assert await asyncio.wait_for(b.acquire(), timeout=1) == 0.0  # b is served while a waits
    assert not waiting_a.done()
    release.set()
    assert await waiting_a == pytest.approx(60.0)


async def test_penalize_pauses_a_model_without_configured_limits(t: FakeTime) -> None:
    limiter = limiter_for(t)
    m = limiter.for_model("openai", "m")
    assert await m.acquire() == 0.0
    await m.penalize(3.0)
    assert await m.acquire() == pytest.approx(3.0)
    assert await m.acquire() == 0.0  # the pause is over
    assert await limiter.for_model("openai", "other").acquire() == 0.0


async def test_penalize_halves_the_rate_then_it_recovers(t: FakeTime) -> None:
    m = limiter_for(t, recovery_s=60.0).for_model("openai", "m", rpm=60)
    await m.penalize(0.0)  # a 429 with nothing to wait out: only the adaptive slowdown applies
    assert await m.acquire() == pytest.approx(2.0)  # burst drained, 0.5 req/s instead of 1
    t.now += 120  # fully recovered, burst refilled
    for _ in range(60):
        await m.acquire()
    assert await m.acquire() == pytest.approx(1.0)


async def test_repeated_429s_compound_down_to_a_floor(t: FakeTime) -> None:
    m = limiter_for(t, min_slowdown=0.25).for_model("openai", "m", rpm=60)
    for _ in range(5):
        await m.penalize(0.0)
    assert await m.acquire() == pytest.approx(4.0)  # 0.25 req/s, not 1/32


async def test_limits_for_a_shared_model_take_the_stricter() -> None:
    limiter = RateLimiter()
    limiter.for_model("openai", "m", rpm=100, tpm=None)
    handle = limiter.for_model("openai", "m", rpm=10, tpm=5000)
    assert limiter.limits(handle.key).rpm == 10 and limiter.limits(handle.key).tpm == 5000


async def test_in_memory_store_compare_and_swap() -> None:
    store = InMemoryBucketStore()
    s = BucketState(requests=1, tokens=0, updated=0)
    assert await store.load("k") == (None, 0)
    assert await store.save("k", s, 0)
    assert not await store.save("k", s, 0)  # stale revision: someone else saved first
    assert await store.load("k") == (s, 1)


async def test_acquire_retries_when_another_writer_wins(t: FakeTime) -> None:
    class ContendedStore(InMemoryBucketStore):
        def __init__(self) -> None:
            super().__init__()
            self.conflicts = 1

        async def save(self, key: str, state: BucketState, revision: int) -> bool:
            if self.conflicts:
                self.conflicts -= 1
                return False
            return await super().save(key, state, revision)

    store = ContendedStore()
    m = RateLimiter(store, clock=t.clock, sleep=t.sleep).for_model("openai", "m", rpm=1)
    assert await m.acquire() == 0.0
    state, rev = await store.load(m.key)
    assert state is not None and state.requests == 0 and rev == 1
