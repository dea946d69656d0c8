"""Images on disk: an OCI image layout directory (``oci-layout``, ``index.json``, ``blobs/sha256/...``), or a tarball
of one (``skopeo copy ... oci-archive:``, ``docker save`` since Docker 25), or a legacy ``docker save`` archive
(``manifest.json``, each layer an uncompressed tar checked against the config's ``rootfs.diff_ids``).

A source names its image (``manifest``) and hands out blobs (``open_blob``) only after their bytes matched the
descriptor's digest and size. Everything read is untrusted and bounded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Protocol

from evalsi.errors import BadInputError
from evalsi.sandbox.host_files import open_beneath
from evalsi.sandbox.layers import BoundedTarInfo, LayerRefused
from evalsi.sandbox.oci_manifest import (
    INDEX_TYPES,
    MAX_MANIFEST_BYTES,
    MAX_NESTING,
    Descriptor,
    Manifest,
    kind_of,
    parse_index,
    parse_manifest,
    pick_platform,
    sha256_digest,
)
from evalsi.sandbox.oci_ref import check_digest

__all__ = ["ImageSource", "open_local", "verified"]

_CHUNK = 1 << 20
_MAX_MEMBERS = 100_000


class ImageSource(Protocol):
    """Where an image's manifest and blobs come from; ``name`` is how refusals name it."""

    name: str

    def manifest(self) -> Manifest: ...

    def open_blob(self, blob: Descriptor, scratch: Path) -> contextlib.AbstractContextManager[IO[bytes]]: ...


def verified(stream: IO[bytes], blob: Descriptor, where: str) -> IO[bytes]:
    """``stream`` rewound after its bytes matched ``blob``'s size and digest; refused naming both otherwise."""
    digest = hashlib.sha256()
    size = 0
    while chunk := stream.read(_CHUNK):
        size += len(chunk)
        if size > blob.size:
            raise BadInputError(f"{where}: blob {blob.digest} is larger than its descriptor's {blob.size} bytes")
        digest.update(chunk)
    actual = f"sha256:{digest.hexdigest()}"
    if actual != blob.digest:
        raise BadInputError(f"{where}: blob {blob.digest} has digest {actual}: its content does not match")
    if size != blob.size:
        raise BadInputError(f"{where}: blob {blob.digest} is {size} bytes, its descriptor says {blob.size}")
    stream.seek(0)
    return stream


class _Files(Protocol):
    def exists(self, name: str) -> bool: ...

    def size(self, name: str) -> int: ...

    def open(self, name: str) -> IO[bytes]: ...


class _DirFiles:
    def __init__(self, root: Path) -> None:
        self.root = root

    def exists(self, name: str) -> bool:
        try:
            self.open(name).close()
        except BadInputError:
            return False
        return True

    def size(self, name: str) -> int:
        with self.open(name) as stream:
            return os.fstat(stream.fileno()).st_size

    def open(self, name: str) -> IO[bytes]:
        """``name`` (from the image's own JSON, so untrusted) resolved beneath the directory, never out of it by
        ``..`` or a link, and only a regular file (never a FIFO that would block, nor a device)."""
        root = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            descriptor = open_beneath(root, name, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise BadInputError(f"{self.root}: {name[:200]!r}: not a file inside the image ({exc.strerror})") from None
        finally:
            os.close(root)
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            os.close(descriptor)
            raise BadInputError(f"{self.root}: {name[:200]!r} is not a regular file")
        return os.fdopen(descriptor, "rb")


class _TarFiles:
    def __init__(self, archive: tarfile.TarFile, path: Path) -> None:
        self.archive = archive
        self.path = path
        self.members: dict[str, tarfile.TarInfo] = {}
        for count, member in enumerate(archive, 1):
            if count > _MAX_MEMBERS:
                raise BadInputError(f"{path}: more than {_MAX_MEMBERS} members; not an image archive")
            name = member.name.removeprefix("./")
            if member.isfile():
                self.members[name] = member

    def exists(self, name: str) -> bool:
        return name in self.members

    def size(self, name: str) -> int:
        return self.members[name].size

    def open(self, name: str) -> IO[bytes]:
        member = self.members.get(name)
        stream = self.archive.extractfile(member) if member is not None else None
        if stream is None:
            raise BadInputError(f"{self.path}: no file {name!r} in the archive")
        return stream


def _read_small(files: _Files, name: str, where: str) -> bytes:
    with files.open(name) as stream:
        data = stream.read(MAX_MANIFEST_BYTES + 1)
    if len(data) > MAX_MANIFEST_BYTES:
        raise BadInputError(f"{where}: {name} is over {MAX_MANIFEST_BYTES} bytes")
    return data


def _blob_name(digest: str) -> str:
    algorithm, _, hexdigest = digest.partition(":")
    return f"blobs/{algorithm}/{hexdigest}"


class _LayoutSource:
    """An OCI image layout (a directory or a tarball of one): index.json, then the host's platform."""

    def __init__(self, files: _Files, name: str) -> None:
        self.files = files
        self.name = name

    def manifest(self) -> Manifest:
        body = _read_small(self.files, "index.json", self.name)
        where = f"{self.name}: index.json"
        entry = pick_platform(parse_index(body, where), where)
        for _ in range(MAX_NESTING):
            body = self._blob_bytes(entry)
            where = f"{self.name}: manifest {entry.digest}"
            if entry.media_type in INDEX_TYPES or kind_of(body, entry.media_type, where) == "index":
                entry = pick_platform(parse_index(body, where), where)
                continue
            return parse_manifest(body, entry.digest, where)
        raise BadInputError(f"{self.name}: indexes nested more than {MAX_NESTING} deep")

    def _blob_bytes(self, entry: Descriptor) -> bytes:
        if entry.size > MAX_MANIFEST_BYTES:
            raise BadInputError(f"{self.name}: manifest {entry.digest} is over {MAX_MANIFEST_BYTES} bytes")
        body = _read_small(self.files, _blob_name(entry.digest), self.name)
        if sha256_digest(body) != entry.digest:
            raise BadInputError(f"{self.name}: blob {entry.digest} has digest {sha256_digest(body)}: its content "
                                "does not match")
        return body

    @contextlib.contextmanager
    def open_blob(self, blob: Descriptor, scratch: Path) -> Iterator[IO[bytes]]:
        with self.files.open(_blob_name(blob.digest)) as stream:
            yield verified(stream, blob, self.name)


class _DockerArchiveSource:
    """A legacy ``docker save`` archive: manifest.json's first image; its cache key is the config's digest."""

    def __init__(self, files: _Files, name: str) -> None:
        self.files = files
        self.name = name
        self._paths: dict[str, str] = {}

    def manifest(self) -> Manifest:
        where = f"{self.name}: manifest.json"
        try:
            entries = json.loads(_read_small(self.files, "manifest.json", self.name))
            entry: dict[str, Any] = entries[0]
            config_path, layer_paths = str(entry["Config"]), [str(path) for path in entry["Layers"]]
        except (ValueError, LookupError, TypeError) as exc:
            raise BadInputError(f"{where}: expected [{{Config, Layers}}]: {exc}") from None
        config_bytes = _read_small(self.files, config_path, self.name)
        config_digest = sha256_digest(config_bytes)
        try:
            diff_ids = [check_digest(str(value), f"{where}: config rootfs.diff_ids")
                        for value in json.loads(config_bytes)["rootfs"]["diff_ids"]]
        except (ValueError, LookupError, TypeError) as exc:
            raise BadInputError(f"{self.name}: config {config_path}: expected rootfs.diff_ids: {exc}") from None
        if len(diff_ids) != len(layer_paths):
            raise BadInputError(f"{where}: {len(layer_paths)} layers but the config lists {len(diff_ids)} diff_ids")
        layers = []
        for path, diff_id in zip(layer_paths, diff_ids, strict=True):
            if not self.files.exists(path):
                raise BadInputError(f"{where}: layer {path!r} is not in the archive")
            self._paths[diff_id] = path
            layers.append(Descriptor("application/vnd.docker.image.rootfs.diff.tar", diff_id, self.files.size(path)))
        return Manifest(config_digest, Descriptor("application/vnd.docker.container.image.v1+json", config_digest,
                                                  len(config_bytes)), tuple(layers))

    @contextlib.contextmanager
    def open_blob(self, blob: Descriptor, scratch: Path) -> Iterator[IO[bytes]]:
        with self.files.open(self._paths[blob.digest]) as stream:
            yield verified(stream, blob, self.name)


@contextlib.contextmanager
def open_local(path: Path, where: str) -> Iterator[ImageSource]:
    """The image at ``path``: a layout directory, or a tarball of a layout or of ``docker save``."""
    if path.is_dir():
        yield _pick(_DirFiles(path), str(path), where)
        return
    if not path.is_file():
        raise BadInputError(f"{where}: {path} is neither an OCI image layout directory nor an image archive")
    with contextlib.ExitStack() as stack:
        try:
            archive = stack.enter_context(tarfile.open(path, tarinfo=BoundedTarInfo))
            files = _TarFiles(archive, path)
        except (tarfile.TarError, OSError) as exc:
            raise BadInputError(f"{where}: {path}: not a readable image archive: {exc}") from None
        except LayerRefused as exc:  # an extension header too large to read
            raise BadInputError(f"{where}: {path}: {exc}") from None
        yield _pick(files, str(path), where)


def _pick(files: _Files, name: str, where: str) -> ImageSource:
    if files.exists("index.json"):
        return _LayoutSource(files, name)
    if files.exists("manifest.json"):
        return _DockerArchiveSource(files, name)
    raise BadInputError(f"{where}: {name} is neither an OCI image layout (index.json) nor a docker save archive "
                        "(manifest.json)")
