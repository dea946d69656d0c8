"""Fixtures for end-to-end tests: a whole stack as separate processes (see evalsi.testing.stack)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from evalsi.testing.stack import Stack

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    running = Stack(tmp_path, datasets_dir=ROOT / "examples").start()
    try:
        yield running
    finally:
        running.stop()
