"""Shared fixtures: a fake provider on its own thread, for tests that drive the synchronous CLI or SDK."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from evalsi.testing import FakeOpenAI
from evalsi.testing.threaded import ThreadedProvider


@pytest.fixture(autouse=True)
def _private_judge_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own judge cache, so no answer leaks between tests or from earlier runs."""
    monkeypatch.setenv("EVALSI_CACHE_DIR", str(tmp_path_factory.mktemp("evalsi-cache")))


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
