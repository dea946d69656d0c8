"""The sandbox's caches trust an entry they find (it is served as a sandbox's ``/`` unread), so a cache directory
another user could write or swap is refused, naming ``sandbox.cache_dir``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evalsi.errors import BadInputError
from evalsi.sandbox.cache_lock import owned_cache_dir
from evalsi.sandbox.model import RootFilesystem
from evalsi.sandbox.oci import ImageCache
from evalsi.sandbox.rootfs import RootCache
from evalsi.sandbox.runtime_image import ensure_runtime_image


def test_a_cache_directory_is_made_private_to_its_writers(tmp_path: Path) -> None:
    made = owned_cache_dir(tmp_path / "a" / "cache")
    assert made.is_dir() and not made.stat().st_mode & 0o022


def test_a_cache_others_may_write_is_refused_by_every_cache(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o777)
    with pytest.raises(BadInputError, match=r"sandbox.cache_dir: .*cache must be a directory owned by uid \d+ that "
                                             r"no other user may write \(it is uid \d+, mode 777\)"):
        ensure_runtime_image(cache)
    with pytest.raises(BadInputError, match=r"sandbox.cache_dir: .*no other user may write"):
        ImageCache(cache).resolve("docker.io/library/busybox:1")
    tarball = tmp_path / "root.tar"
    tarball.write_bytes(b"\0" * 1024)
    with pytest.raises(BadInputError, match=r"sandbox.cache_dir: .*no other user may write"):
        RootCache(cache).resolve(RootFilesystem("tarball", str(tarball)))
    assert sorted(p.name for p in cache.iterdir()) == []  # nothing built, pulled or unpacked


def test_a_planted_subdirectory_is_refused_too(tmp_path: Path) -> None:
    cache = owned_cache_dir(tmp_path / "cache")
    (cache / "runtime").mkdir()
    (cache / "runtime").chmod(0o757)
    with pytest.raises(BadInputError, match=r"runtime must be a directory .* mode 757"):
        ensure_runtime_image(cache)


def test_a_cache_owned_by_another_user_or_under_a_swappable_parent_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"  # chown to another uid needs root, as the sandbox tests do (CI runs as root)
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 4242, 4242)
    with pytest.raises(BadInputError, match=r"theirs must be a directory owned by uid 0 .* \(it is uid 4242"):
        owned_cache_dir(theirs)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # writable by all, without /tmp's sticky bit: anyone may rename the cache away
    with pytest.raises(BadInputError, match=r"lies under .*shared \(uid 0, mode 777\), which another user may change"):
        owned_cache_dir(shared / "cache")
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)  # as /tmp: others may add entries but not move ours
    assert owned_cache_dir(sticky / "cache").is_dir()
