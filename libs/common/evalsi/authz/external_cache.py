"""A bounded, briefly-held cache of external decisions, with one call in flight per question.

An answer is kept ``ttl_s`` seconds and the cache holds at most ``max_entries`` (the least recently used goes
first). Concurrent requests asking the same question share one call to the authorizer instead of sending it
once each. Failures are never cached: the next request asks again.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

Answer = TypeVar("Answer")


class DecisionCache(Generic[Answer]):
    def __init__(self, ttl_s: float, max_entries: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[str, tuple[float, Answer]] = OrderedDict()
        self._inflight: dict[str, asyncio.Future[Answer]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> Answer | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, answer = entry
        if self._clock() >= expires:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return answer

    def put(self, key: str, answer: Answer) -> None:
        if self.ttl_s <= 0:
            return
        self._entries[key] = (self._clock() + self.ttl_s, answer)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    async def answer(self, key: str, ask: Callable[[], Awaitable[Answer]]) -> tuple[Answer, bool]:
        """The cached answer (and True), else ``ask()``'s, shared with every caller waiting on the same key;
        ``ask``'s exception propagates to each of them."""
        cached = self.get(key)
        if cached is not None:
            return cached, True
        pending = self._inflight.get(key)
        if pending is not None:
            return await asyncio.shield(pending), False
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            answer = await ask()
        except BaseException as exc:
            # The asker's own cancellation is not the waiters': they see a failure (and fail closed) instead.
            shared = RuntimeError("the shared call was cancelled") if isinstance(exc, asyncio.CancelledError) else exc
            future.set_exception(shared)
            future.exception()  # retrieved here, so an unshared failure is not reported as never retrieved
            raise
        else:
            future.set_result(answer)
            self.put(key, answer)
            return answer, False
        finally:
            del self._inflight[key]
