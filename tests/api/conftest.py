"""Fixtures for the API tests; the in-memory doubles and the Api harness live in api_doubles.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from api_doubles import Api

from evalsi.api import HandlerLimits
from evalsi.evaluators import Registry


@pytest.fixture(scope="session")
def registry() -> Registry:
    return Registry.from_entry_points()


@pytest.fixture
def datasets_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "datasets"
    directory.mkdir()
    rows = [
        {"id": "q1", "input": "capital of France?", "output": "Paris", "reference": "Paris"},
        {"id": "q2", "input": "2+2?", "output": "5", "reference": "4"},
        {"id": "q3", "input": "colour of the sky?", "output": "blue", "reference": "blue"},
    ]
    (directory / "qa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return directory


@pytest.fixture
async def api(registry: Registry, datasets_dir: Path) -> AsyncIterator[Api]:
    instance = Api(registry, datasets_dir, HandlerLimits(watch_poll_s=0.2, max_sync_records=5))
    yield instance
    if instance.server is not None:
        await instance.server.stop()
