"""A fake provider served from a background thread, for code under test that blocks (the CLI, ``evaluate()``)."""

from __future__ import annotations

import asyncio
import threading

from evalsi.testing.providers import FakeOpenAI, ReplyFn


class ThreadedProvider:
    """A fake provider served by an event loop on a background thread."""

    def __init__(self, reply: ReplyFn) -> None:
        self.server = FakeOpenAI(reply=reply)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(timeout=10)
        return self.server

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
