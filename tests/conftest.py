"""Shared fixtures: a fake provider on its own thread, for tests that drive the synchronous CLI or SDK; one SeaweedFS
S3 server per session and an object store (a local directory, then a fresh prefix on that server) per test."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from internet_server import serving

from evalsi.stores import LocalObjectStore, ObjectStore, open_object_store
from evalsi.testing import FakeOpenAI
from evalsi.testing.services import SeaweedS3
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


@pytest.fixture(scope="session")
def s3_server() -> Iterator[SeaweedS3]:
    with SeaweedS3() as server:
        yield server


@pytest.fixture(params=["local", "s3"])
async def object_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ObjectStore]:
    if request.param == "local":
        store: ObjectStore = LocalObjectStore(tmp_path / "objects")
    else:
        s3: SeaweedS3 = request.getfixturevalue("s3_server")
        store = await open_object_store(
            s3.url(prefix=f"t-{uuid.uuid4().hex[:12]}"), access_key=s3.access_key, secret_key=s3.secret_key
        )
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
def internet() -> Iterator[int]:
    """A local HTTP server standing for the internet (tests/internet_server.py); yields its port."""
    with serving() as port:
        yield port
