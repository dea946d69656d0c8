"""``tmp_path`` under a directory the sandbox's host user can reach: run as root, sandboxes start as an unprivileged
host user (sandbox/host_user.py), which cannot search pytest's own ``/tmp/pytest-of-root`` (mode 0700) for the
images, caches and files a test hands them. The conftest.py of tests/sandbox, tests/harness and tests/agentruns
import this fixture in place of pytest's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from evalsi.testing.reachable_tmp import reachable_tmp_dir


@pytest.fixture
def tmp_path(request: pytest.FixtureRequest) -> Iterator[Path]:
    with reachable_tmp_dir(request.node.name) as path:
        yield path
