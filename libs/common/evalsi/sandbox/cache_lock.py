"""One builder per cache entry at a time, across threads and processes: the sandbox's caches (the runtime image,
unpacked root tarballs, OCI images) build an entry in a staging directory and rename it into place under this lock,
so concurrent builders end with one good entry and a crashed builder's staging is removed by the next holder."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["locked"]


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the exclusive flock of the file ``path`` (made when missing); others wait. A separate descriptor per
    holder, so threads of one process exclude each other too."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # closing the descriptor releases the lock
