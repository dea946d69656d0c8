"""The external decision cache on its own: TTL, the bound, one call per question in flight, failures not kept, and
a cancelled asker not cancelling the others waiting on its call."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from evalsi.authz.external_cache import DecisionCache


async def test_ttl_bound_and_sharing() -> None:
    now = [0.0]
    cache: DecisionCache[str] = DecisionCache(10.0, 2, clock=lambda: now[0])
    calls: list[str] = []

    def asker(key: str, delay: float = 0.0) -> Callable[[], Awaitable[str]]:
        async def ask() -> str:
            calls.append(key)
            await asyncio.sleep(delay)
            return f"answer {key}"
        return ask

    assert await cache.answer("a", asker("a")) == ("answer a", False)
    assert await cache.answer("a", asker("a")) == ("answer a", True)
    now[0] = 10.0
    assert await cache.answer("a", asker("a")) == ("answer a", False)  # expired at its TTL
    await cache.answer("b", asker("b"))
    await cache.answer("a", asker("a"))  # a is now the most recent
    await cache.answer("c", asker("c"))  # evicts b, the least recently used
    assert len(cache) == 2 and cache.get("b") is None and cache.get("a") == "answer a"

    shared = await asyncio.gather(*(cache.answer("d", asker("d", 0.02)) for _ in range(4)))
    assert [answer for answer, _ in shared] == ["answer d"] * 4
    assert calls.count("d") == 1


async def test_failures_are_not_cached_and_reach_every_waiter() -> None:
    cache: DecisionCache[str] = DecisionCache(30.0, 10)
    attempts = 0

    async def failing() -> str:
        nonlocal attempts
        attempts += 1
        await asyncio.sleep(0.02)
        raise ConnectionError("refused")

    results = await asyncio.gather(*(cache.answer("k", failing) for _ in range(3)), return_exceptions=True)
    assert all(isinstance(result, ConnectionError) for result in results) and attempts == 1
    with pytest.raises(ConnectionError):
        await cache.answer("k", failing)
    assert attempts == 2 and len(cache) == 0


async def test_a_cancelled_asker_gives_its_waiters_an_error_not_a_cancellation() -> None:
    cache: DecisionCache[str] = DecisionCache(30.0, 10)

    async def slow() -> str:
        await asyncio.sleep(10)
        return "late"

    leader = asyncio.create_task(cache.answer("k", slow))
    await asyncio.sleep(0)
    waiter = asyncio.create_task(cache.answer("k", slow))
    await asyncio.sleep(0.01)
    leader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leader
    with pytest.raises(RuntimeError, match="shared call was cancelled"):
        await waiter
    assert len(cache) == 0
