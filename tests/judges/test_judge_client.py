"""JudgeClient end to end against the fake servers: cache, breaker, limiter and counters together."""

import random
from pathlib import Path
from typing import Any

import pytest

from evalsi.errors import InfraError
from evalsi.judges import CircuitBreakers, CircuitOpenError, JudgeCache, JudgeClient, JudgeConfig, RateLimiter
from evalsi.testing import FakeAnthropic, FakeOpenAI

MESSAGES = [{"role": "user", "content": "Grade: the sky is blue."}]


async def no_sleep(seconds: float) -> None:
    pass


def client(base_url: str, cache: JudgeCache, provider: str = "openai", limiter: RateLimiter | None = None,
           **kwargs: Any) -> JudgeClient:
    breakers = kwargs.pop("breakers", None)
    config = JudgeConfig(model="m", provider=provider, base_url=base_url, **kwargs)
    return JudgeClient(config, limiter=limiter or RateLimiter(), cache=cache, breakers=breakers,
                       sleep=no_sleep, rng=random.Random(0), environ={})


@pytest.mark.parametrize(("fake", "provider"), [(FakeOpenAI, "openai-compatible"), (FakeAnthropic, "anthropic")])
async def test_cache_hit_makes_no_provider_call(tmp_path: Path, fake: type, provider: str) -> None:
    async with fake() as server, client(server.base_url, JudgeCache(tmp_path), provider) as c:
        first = await c.complete(MESSAGES, template_hash="t1")
        second = await c.complete(MESSAGES, template_hash="t1")
        assert len(server.requests) == 1
        assert (first.cached, second.cached) == (False, True)
        assert second.text == first.text and second.input_tokens == first.input_tokens
        assert c.stats().calls == 1 and c.stats().cache_hits == 1
        assert c.stats().output_tokens == first.output_tokens  # cache hits cost no tokens

        await c.complete(MESSAGES, template_hash="t2")  # a different template never reuses answers
        assert len(server.requests) == 2


async def test_cache_is_shared_by_clients_on_one_directory(tmp_path: Path) -> None:
    async with FakeOpenAI() as server:
        async with client(server.base_url, JudgeCache(tmp_path)) as a:
            await a.complete(MESSAGES)
        async with client(server.base_url, JudgeCache(tmp_path)) as b:  # e.g. the next run
            hit = await b.complete(MESSAGES)
    assert hit.cached and len(server.requests) == 1 and b.stats().cache_hits == 1


async def test_no_cache_always_calls_the_provider(tmp_path: Path) -> None:
    async with FakeOpenAI() as server, client(server.base_url, JudgeCache.disabled()) as c:
        results = [await c.complete(MESSAGES) for _ in range(2)]
    assert [r.cached for r in results] == [False, False]
    assert len(server.requests) == 2 and c.stats().cache_hits == 0


async def test_failures_are_not_cached_and_counted(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path)
    async with FakeOpenAI(script=[("status", 500)]) as server, client(server.base_url, cache, max_retries=0) as c:
        with pytest.raises(InfraError):
            await c.complete(MESSAGES)
        assert list(tmp_path.rglob("*.json")) == []
        assert not (await c.complete(MESSAGES)).cached
        assert (await c.complete(MESSAGES)).cached
    assert len(server.requests) == 2
    assert (c.stats().calls, c.stats().failures, c.stats().cache_hits) == (2, 1, 1)


async def test_retries_are_counted(tmp_path: Path) -> None:
    script = [("status", 429, {"Retry-After": "0"}), ("status", 529)]
    async with FakeAnthropic(script=script) as server, client(server.base_url, JudgeCache.disabled(),
                                                              "anthropic") as c:
        await c.complete(MESSAGES)
    assert c.stats().retries == 2 and c.stats().calls == 1 and len(server.requests) == 3


async def test_open_breaker_fails_fast_without_calling_the_provider() -> None:
    breakers = CircuitBreakers(failure_threshold=2)
    script = [("status", 500)] * 2
    async with FakeOpenAI(script=script) as server:
        async with client(server.base_url, JudgeCache.disabled(), max_retries=0, breakers=breakers) as c:
            for _ in range(2):
                with pytest.raises(InfraError, match="HTTP 500"):
                    await c.complete(MESSAGES)
            # The cause first (the run's errors show the first reason), then the breaker's state.
            with pytest.raises(CircuitOpenError, match=r"^openai m: .*HTTP 500.* \(circuit open for openai/m after 2 "
                               r"consecutive infrastructure failures; failing fast, next probe in \d+ s\)$"):
                await c.complete(MESSAGES)
        # Another judge on the same model shares the breaker.
        async with client(server.base_url, JudgeCache.disabled(), breakers=breakers) as other:
            with pytest.raises(CircuitOpenError):
                await other.complete(MESSAGES)
    assert len(server.requests) == 2
    assert c.stats().failures == 3 and c.stats().calls == 2


async def test_cache_hits_are_served_while_the_breaker_is_open(tmp_path: Path) -> None:
    breakers = CircuitBreakers(failure_threshold=1)
    async with FakeOpenAI() as server, client(server.base_url, JudgeCache(tmp_path), max_retries=0,
                                              breakers=breakers) as c:
        await c.complete(MESSAGES)
        server.enqueue(("status", 500))
        with pytest.raises(InfraError):
            await c.complete([{"role": "user", "content": "another record"}])
        assert (await c.complete(MESSAGES)).cached


async def test_shared_limiter_applies_rpm_across_clients() -> None:
    now = [0.0]
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    limiter = RateLimiter(clock=lambda: now[0], sleep=sleep)
    async with FakeOpenAI() as server:
        a = client(server.base_url, JudgeCache.disabled(), limiter=limiter, rpm=2)
        b = client(server.base_url, JudgeCache.disabled(), limiter=limiter, rpm=2)
        async with a, b:
            await a.complete(MESSAGES)
            await b.complete(MESSAGES)
            assert waits == []
            await a.complete(MESSAGES)
    assert waits == [pytest.approx(30.0)]


async def test_per_request_400s_do_not_open_the_breaker_but_bad_keys_do() -> None:
    breakers = CircuitBreakers(failure_threshold=2)
    async with FakeOpenAI(script=[("status", 400)] * 3) as server:
        async with client(server.base_url, JudgeCache.disabled(), breakers=breakers) as c:
            for _ in range(3):  # e.g. three records whose prompts exceed the context window
                with pytest.raises(InfraError, match="HTTP 400"):
                    await c.complete(MESSAGES)
            assert (await c.complete(MESSAGES)).text  # the provider is fine for other records
        server.api_key = "the-right-key"
        async with client(server.base_url, JudgeCache.disabled(), breakers=breakers) as c:
            for _ in range(2):
                with pytest.raises(InfraError, match="HTTP 401"):
                    await c.complete(MESSAGES)
            with pytest.raises(CircuitOpenError):
                await c.complete(MESSAGES)
    assert len(server.requests) == 6
