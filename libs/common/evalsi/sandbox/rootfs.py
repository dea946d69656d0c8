"""Root filesystems for sandboxes: the runtime image (built once, ``runtime_image.py``), an image directory used as
it is, or a tarball unpacked once and cached by the digest of its bytes.

A tarball is untrusted input, applied by the one rule of ``layers.py`` (which OCI image layers follow too): ``..``
in names and links climbing out of the root refused, absolute names made relative, device files refused, setuid
bits stripped, and the host never following a link the tarball made; anything refused fails the whole unpack with
the member's name. Unpacking goes to a temporary directory that
is renamed into place only when complete, under a per-digest lock (``cache_lock.py``): concurrent unpacks of one
tarball end with one root and one of them waits, and a crash never leaves a half root in the cache (its staging is
removed by the next unpack of that tarball).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from evalsi.errors import BadInputError
from evalsi.sandbox.cache_lock import locked, owned_cache_dir
from evalsi.sandbox.image_build import find_image
from evalsi.sandbox.layers import Budget, LayerRefused, apply_layer
from evalsi.sandbox.model import RootFilesystem
from evalsi.sandbox.oci import ImageCache
from evalsi.sandbox.oci_config import ImageSettings
from evalsi.sandbox.runtime_image import ensure_runtime_image

__all__ = ["RootCache", "tarball_digest", "unpack_tarball"]

_CHUNK = 1 << 20
# A tarball holding more than this many members, or this many bytes once unpacked, is refused: a root is an image,
# not a dataset, and a bomb must not fill the cache's disk.
MAX_MEMBERS = 500_000
MAX_UNPACKED_BYTES = 16 << 30


def tarball_digest(path: Path) -> str:
    """``sha256:<hex>`` of the file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while chunk := source.read(_CHUNK):
            digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def unpack_tarball(tarball: Path, destination: Path) -> None:
    """Unpack ``tarball`` into the new directory ``destination``, refusing unsafe members (``BadInputError``
    naming the tarball and the member)."""
    destination.mkdir(parents=True)
    budget = Budget(MAX_UNPACKED_BYTES, MAX_MEMBERS, "a root filesystem tarball's limit",
                    "a root filesystem tarball's limit")
    try:
        with tarball.open("rb") as stream:
            apply_layer(stream, str(destination), budget, whiteouts=False)
    except LayerRefused as exc:
        raise BadInputError(f"{tarball}: {exc}") from None


@dataclass
class _Known:
    stat_key: tuple[int, int, int, int]
    digest: str


class RootCache:
    """Unpacked tarballs under ``cache_dir/<algorithm>/<hex>``; the digest of a file is remembered by its inode,
    size and modification time, so an unchanged tarball is hashed once per process."""

    def __init__(self, cache_dir: Path, images: ImageSettings | None = None) -> None:
        self.cache_dir = cache_dir
        self._digests: dict[str, _Known] = {}
        self.images = ImageCache(cache_dir, images)

    def resolve(self, root: RootFilesystem) -> Path | None:
        """The host directory to bind as the sandbox's ``/``; None for the host's /usr mode. The runtime image is
        built on first use (seconds), so call this from a thread in async code."""
        if root.kind == "host":
            return None
        if root.kind == "runtime":
            return ensure_runtime_image(self.cache_dir).path
        if root.kind == "oci":
            return self.images.resolve(root.path)
        if root.kind == "dockerfile":  # built by the ladder before a rung opens it (image_build.py)
            return find_image(root, self.cache_dir, self.images.settings).path
        path = Path(root.path)
        if root.kind == "image":
            if not path.is_dir():
                raise BadInputError(f"root: {root.path!r} is not an image directory")
            return path
        if not path.is_file():
            raise BadInputError(f"root: {root.path!r} is not a tarball")
        digest = self._digest(path)
        algorithm, _, hexdigest = digest.partition(":")
        target = owned_cache_dir(owned_cache_dir(self.cache_dir) / algorithm) / hexdigest
        if target.is_dir():
            return target
        with locked(target.parent / f".{hexdigest}.lock"):
            if target.is_dir():  # another unpacker finished while this one waited
                return target
            for stale in target.parent.glob(f".unpack-{hexdigest}-*"):  # a crashed unpack's: only holders stage
                shutil.rmtree(stale, ignore_errors=True)
            staging = Path(tempfile.mkdtemp(prefix=f".unpack-{hexdigest}-", dir=target.parent))
            try:
                unpack_tarball(path, staging / "root")
                os.chmod(staging / "root", 0o755)
                os.rename(staging / "root", target)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        return target

    def _digest(self, path: Path) -> str:
        status = path.stat()
        key = (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)
        known = self._digests.get(str(path))
        if known is not None and known.stat_key == key:
            return known.digest
        digest = tarball_digest(path)
        self._digests[str(path)] = _Known(key, digest)
        return digest
