"""One builder per cache entry at a time, across threads and processes: the sandbox's caches (the runtime image,
unpacked root tarballs, OCI images) build an entry in a staging directory and rename it into place under this lock,
so concurrent builders end with one good entry and a crashed builder's staging is removed by the next holder.

An entry found in a cache is served as a sandbox's ``/`` without being read again, so a cache directory is trusted
only when no other user can plant or swap one in it (``owned_cache_dir``)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from evalsi.errors import BadInputError

__all__ = ["locked", "owned_cache_dir"]

_WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH


def owned_cache_dir(path: Path, where: str = "sandbox.cache_dir") -> Path:
    """``path``, made (0755) when missing, once it is a directory this process's user owns that no other user may
    write, under parents no other user may swap it in (each owned by root or this user, and writable by others only
    with the sticky bit, as /tmp). Refused otherwise, naming ``where``: a planted entry would be served as a root."""
    path.mkdir(mode=0o755, parents=True, exist_ok=True)
    euid = os.geteuid()
    info = os.stat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != euid or info.st_mode & _WRITABLE_BY_OTHERS:
        raise BadInputError(
            f"{where}: {path} must be a directory owned by uid {euid} that no other user may write (it is uid "
            f"{info.st_uid}, mode {stat.S_IMODE(info.st_mode):o}): an entry planted there would be served as a "
            "sandbox's root; chmod go-w it or choose another")
    for parent in Path(os.path.realpath(path)).parents:
        info = os.stat(parent)
        swappable = info.st_mode & _WRITABLE_BY_OTHERS and not info.st_mode & stat.S_ISVTX
        if info.st_uid not in (0, euid) or swappable:
            raise BadInputError(
                f"{where}: {path} lies under {parent} (uid {info.st_uid}, mode {stat.S_IMODE(info.st_mode):o}), "
                "which another user may change: the cache could be swapped; choose a cache under directories only "
                "root or this user can write")
    return path


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
