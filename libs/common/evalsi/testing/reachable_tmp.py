"""Temporary directories the sandbox's unprivileged host user can reach (host_user.py).

Run as root, bwrap starts as that user and resolves its bind sources (an image directory, the cache a runtime image
or tarball is unpacked into, the workspace) with its permissions, but pytest's ``tmp_path`` lies under
``/tmp/pytest-of-root``, which pytest keeps at mode 0700. Tests that hand such paths to a sandbox use this instead
(the conftest.py of tests/sandbox, tests/harness and tests/agentruns put it in place of ``tmp_path``).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["reachable_tmp_dir"]


@contextmanager
def reachable_tmp_dir(name: str = "") -> Iterator[Path]:
    """A new directory under the system's temporary directory, mode 0755, removed afterwards."""
    label = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:40]
    path = Path(tempfile.mkdtemp(prefix=f"evalsi-test-{label}-"))
    try:
        path.chmod(0o755)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
