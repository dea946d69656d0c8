"""Client-side rate limits per (provider, model): requests per minute and tokens per minute.

Design:

- Reservation token buckets. ``acquire`` takes its request/token cost from the bucket at once, possibly
  driving the level negative, and then sleeps exactly as long as the refill needs to cover that debt.
  Each caller does one short read-modify-write and then waits on its own, so callers queue in arrival
  order without a lock held across the wait, and callers of other models never touch the same state.
- After a 429 (``penalize``) the model is paused until the provider's Retry-After has passed, the
  request bucket's burst is drained, and its refill rate is halved; the rate recovers linearly to the
  configured one over ``recovery_s``. This is the "adaptive" part: one caller's 429 slows everyone
  calling that model instead of each caller discovering the limit separately.
- State lives behind ``BucketStore`` (load + compare-and-swap save); ``kv_buckets.NatsKVBucketStore`` puts
  it in NATS KV and shares it between worker processes. Such a store declares
  ``shared_between_processes = True``, and the limiter then reads a clock those processes share (the wall
  clock, ``time.time``): each process's ``time.monotonic`` starts at its own arbitrary point.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Protocol

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class BucketState:
    """The shared state of one (provider, model); plain numbers so any store can serialize it."""

    requests: float  # request allowance now; negative = already reserved by waiting callers
    tokens: float  # token allowance now; negative likewise
    updated: float  # clock reading the two levels were computed at
    paused_until: float = 0.0  # no grants before this clock reading (set by a 429)
    slowdown: float = 1.0  # refill-rate multiplier right after the last 429, in (0, 1]
    penalized_at: float = 0.0  # clock reading of the last 429


class BucketStore(Protocol):
    """Where bucket states live. Compare-and-swap keeps concurrent updaters (tasks or processes) honest.

    A store whose states other processes read too sets a class attribute ``shared_between_processes = True``
    (optional; absent means False), so that ``RateLimiter`` uses the wall clock with it.
    """

    async def load(self, key: str) -> tuple[BucketState | None, int]:
        """The state under ``key`` and its revision; ``(None, 0)`` when absent."""
        ...

    async def save(self, key: str, state: BucketState, revision: int) -> bool:
        """Store ``state`` if ``key`` is still at ``revision`` (0 = absent); False if another writer won."""
        ...


class InMemoryBucketStore:
    """A ``BucketStore`` for one process. Methods never await, so a load/save pair from one task cannot
    interleave with another task's unless the caller awaits between them (which CAS then catches)."""

    shared_between_processes = False

    def __init__(self) -> None:
        self._items: dict[str, tuple[BucketState, int]] = {}

    async def load(self, key: str) -> tuple[BucketState | None, int]:
        item = self._items.get(key)
        return (None, 0) if item is None else item

    async def save(self, key: str, state: BucketState, revision: int) -> bool:
        item = self._items.get(key)
        if (0 if item is None else item[1]) != revision:
            return False
        self._items[key] = (state, revision + 1)
        return True


@dataclass(frozen=True)
class Limits:
    """Per-minute limits for one (provider, model); None = unlimited in that dimension."""

    rpm: int | None = None
    tpm: int | None = None

    def merge(self, other: Limits) -> Limits:
        """The stricter of two limits: judges sharing a model must respect the smallest quota set."""
        return Limits(rpm=_min_opt(self.rpm, other.rpm), tpm=_min_opt(self.tpm, other.tpm))


class RateLimiter:
    """All buckets of a process. Create one and pass it to every judge client (no module global).

    ``clock`` defaults to ``time.monotonic`` for a store private to this process and to ``time.time`` for
    one shared between processes; ``time.monotonic`` with a shared store is refused (ValueError).
    """

    def __init__(
        self,
        store: BucketStore | None = None,
        *,
        clock: Clock | None = None,
        sleep: Sleep = asyncio.sleep,
        recovery_s: float = 60.0,
        min_slowdown: float = 1 / 16,
    ) -> None:
        self._store: BucketStore = store if store is not None else InMemoryBucketStore()
        shared = bool(getattr(self._store, "shared_between_processes", False))
        if shared and clock is time.monotonic:
            raise ValueError(
                f"{type(self._store).__name__} is shared between processes: its rate limiter needs a clock they "
                "share, such as time.time, not time.monotonic"
            )
        self._clock: Clock = clock if clock is not None else (time.time if shared else time.monotonic)
        self._sleep = sleep
        self._recovery_s = recovery_s
        self._min_slowdown = min_slowdown
        self._limits: dict[str, Limits] = {}

    def for_model(
        self, provider: str, model: str, *, rpm: int | None = None, tpm: int | None = None
    ) -> ModelLimiter:
        """The handle a connector uses for ``(provider, model)``; handles for the same pair share state."""
        key = f"{provider}/{model}"
        new = Limits(rpm=rpm, tpm=tpm)
        self._limits[key] = self._limits[key].merge(new) if key in self._limits else new
        return ModelLimiter(self, key)

    def limits(self, key: str) -> Limits:
        return self._limits.get(key, Limits())

    # --- operations on one key; ModelLimiter is the public face -------------------------------------

    async def _acquire(self, key: str, tokens: int) -> float:
        limits = self.limits(key)
        while True:  # CAS retry: only loops when another updater saved in between
            now = self._clock()
            state, rev = await self._store.load(key)
            state = self._refilled(state, limits, now)
            state = replace(state, requests=state.requests - (1 if limits.rpm else 0),
                            tokens=state.tokens - (max(tokens, 0) if limits.tpm else 0))
            if await self._store.save(key, state, rev):
                break
        wait = max(0.0, state.paused_until - now)
        factor = self._factor(state, now)
        if limits.rpm and state.requests < 0:
            wait = max(wait, -state.requests / (limits.rpm / 60.0 * factor))
        if limits.tpm and state.tokens < 0:
            wait = max(wait, -state.tokens / (limits.tpm / 60.0))
        waited = 0.0
        while wait > 0:
            await self._sleep(wait)
            waited += wait
            # A 429 seen by someone else while we slept pauses us too, even with a reservation in hand.
            later, _ = await self._store.load(key)
            wait = 0.0 if later is None else max(0.0, later.paused_until - self._clock())
        return waited

    async def _penalize(self, key: str, retry_after: float) -> None:
        limits = self.limits(key)
        while True:
            now = self._clock()
            state, rev = await self._store.load(key)
            state = self._refilled(state, limits, now)
            state = replace(
                state,
                paused_until=max(state.paused_until, now + max(retry_after, 0.0)),
                slowdown=max(self._min_slowdown, self._factor(state, now) / 2),
                penalized_at=now,
                # Drain the burst allowance: after the pause, requests trickle in at the reduced rate
                # instead of stampeding the provider that just told us to back off.
                requests=min(state.requests, 0.0),
            )
            if await self._store.save(key, state, rev):
                return

    async def _settle(self, key: str, estimated: int, actual: int) -> None:
        if not self.limits(key).tpm or estimated == actual:
            return
        limits = self.limits(key)
        while True:
            state, rev = await self._store.load(key)
            state = self._refilled(state, limits, self._clock())
            # Refund an over-estimate (max_tokens is an upper bound) or charge an under-estimate.
            state = replace(state, tokens=min(float(limits.tpm or 0), state.tokens + estimated - actual))
            if await self._store.save(key, state, rev):
                return

    def _factor(self, state: BucketState, now: float) -> float:
        """Current refill-rate multiplier: ``slowdown`` right after a 429, back to 1 over recovery_s."""
        if state.slowdown >= 1.0:
            return 1.0
        progress = min(1.0, max(0.0, now - state.penalized_at) / self._recovery_s)
        return state.slowdown + (1.0 - state.slowdown) * progress

    def _refilled(self, state: BucketState | None, limits: Limits, now: float) -> BucketState:
        if state is None:  # first use: full buckets, so a run may start with one minute's burst
            return BucketState(requests=float(limits.rpm or 0), tokens=float(limits.tpm or 0), updated=now)
        # Never move ``updated`` back: a reader whose clock lags the last writer's (another host, or a wall
        # clock stepped back) would otherwise get the same interval refilled twice.
        elapsed = max(0.0, now - state.updated)
        # The factor at the start of the interval under-refills slightly while recovering: errs slow.
        factor = self._factor(state, state.updated)
        requests, tokens = state.requests, state.tokens
        if limits.rpm:
            requests = min(float(limits.rpm), requests + elapsed * limits.rpm / 60.0 * factor)
        if limits.tpm:
            tokens = min(float(limits.tpm), tokens + elapsed * limits.tpm / 60.0)
        return replace(state, requests=requests, tokens=tokens, updated=max(now, state.updated))


class ModelLimiter:
    """The limiter for one (provider, model), as handed to a connector."""

    def __init__(self, limiter: RateLimiter, key: str) -> None:
        self._limiter = limiter
        self.key = key

    async def acquire(self, tokens_estimate: int = 0) -> float:
        """Wait until one request of about ``tokens_estimate`` tokens fits; returns the seconds waited.

        The wait is an ``await`` on the injected sleep, so the event loop and other models keep going.
        A caller cancelled while waiting forfeits its reservation (the capacity is not returned).
        """
        return await self._limiter._acquire(self.key, tokens_estimate)

    async def penalize(self, retry_after: float) -> None:
        """Record a 429: pause this model for ``retry_after`` seconds and slow its request rate."""
        await self._limiter._penalize(self.key, retry_after)

    async def settle(self, estimated: int, actual: int) -> None:
        """Correct the token bucket once the response reports the tokens really used."""
        await self._limiter._settle(self.key, estimated, actual)


def _min_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)
