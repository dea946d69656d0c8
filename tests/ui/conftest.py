"""The web UI's tests: a real Chromium (tests/browser.py) against a served stack."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import allowed_errors, browser, page

from evalsi.testing.stack import Stack

__all__ = ["allowed_errors", "browser", "page"]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def ui_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One stack per test module (starting one takes seconds on two cores), its datasets directory the shipped
    examples so runs can name them as a user's would."""
    running = Stack(tmp_path_factory.mktemp("ui-stack"), datasets_dir=EXAMPLES).start()
    try:
        yield running
    finally:
        running.stop()
