"""Shared fixtures: a fake provider on its own thread, for tests that drive the synchronous CLI or SDK."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from evalsi.testing import FakeOpenAI


@pytest.fixture(autouse=True)
def _private_judge_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own judge cache, so no answer leaks between tests or from earlier runs."""
    monkeypatch.setenv("EVALSI_CACHE_DIR", str(tmp_path_factory.mktemp("evalsi-cache")))


class ThreadedProvider:
    """A fake provider served by an event loop on a background thread."""

    def __init__(self, reply: Callable[[dict[str, Any]], str]) -> None:
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


@pytest.fixture
def judge_server() -> Iterator[FakeOpenAI]:
    """A fake OpenAI-compatible judge that grades 5/5 when the output equals the reference, else 1/5."""

    def reply(body: dict[str, Any]) -> str:
        prompt = " ".join(str(m.get("content", "")) for m in body["messages"])
        good = "Paris" in prompt and "Lyon" not in prompt
        score = 5 if good else 1
        return f'{{"reasoning": "checked against the reference", "score": {score}}}'

    with ThreadedProvider(reply) as server:
        yield server
