"""OCI image roots: an image unpacked once into a root directory, cached by its manifest's digest.

An image comes from an OCI image layout directory, an image archive (an OCI layout tarball or ``docker save``),
both named by an absolute path, or a registry reference (``python:3.12-slim``), pulled only from a registry the
operator listed in ``sandbox.images.registries`` (``oci_config.py``) and never from one a request chose. A tag is
resolved once, when first pulled, and then served from the cache (as ``docker run`` does):
``evalsi sandbox image pull REF`` pulls it again. Without a listed registry, only cached images are served.

Layout under ``cache_dir/oci``:

    sha256/<hex>/rootfs       the unpacked root, bound read-only as the sandbox's /
    sha256/<hex>/image.json   digest, layers, unpacked bytes and files, the references it was pulled as
    refs/<sha256 of the reference>.json   {"reference", "digest"}: what a tag resolved to when pulled
    .locks/<hex>              one unpacker per digest at a time (flock); others wait, then reuse its result

Every blob's digest is verified before it is applied; layers are applied in order with whiteouts by the one rule
of ``layers.py``; the image's files and unpacked bytes are bounded (``max_files``, ``max_bytes``). An unpack runs in
a private staging directory renamed into place only when complete, so a crash or a refusal never leaves a half root
(a crashed unpack's staging is removed by the next unpack of that digest), and concurrent unpacks of one digest
(threads or processes) end with one good directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from evalsi.errors import BadInputError
from evalsi.sandbox.cache_lock import locked, owned_cache_dir
from evalsi.sandbox.layers import Budget, LayerRefused, apply_layer
from evalsi.sandbox.oci_config import EMBEDDED_REGISTRIES, ImageSettings
from evalsi.sandbox.oci_local import ImageSource, open_local
from evalsi.sandbox.oci_manifest import Manifest
from evalsi.sandbox.oci_ref import Reference, parse_reference
from evalsi.sandbox.oci_registry import RegistrySource, load_credentials

__all__ = ["CachedImage", "ImageCache"]


@dataclass(frozen=True)
class CachedImage:
    digest: str
    path: Path  # the root directory
    bytes: int
    files: int
    references: tuple[str, ...] = ()


class ImageCache:
    """Images unpacked under ``cache_dir/oci``, resolved and pulled under the operator's ``settings``.
    ``default_registries`` applies when ``settings.registries`` is unset (embedded: docker.io)."""

    def __init__(self, cache_dir: Path, settings: ImageSettings | None = None,
                 default_registries: tuple[str, ...] = EMBEDDED_REGISTRIES) -> None:
        self.base = cache_dir / "oci"
        self.settings = settings or ImageSettings()
        self.default_registries = default_registries

    def resolve(self, source: str, where: str = "root") -> Path:
        """The root directory of ``source`` (an absolute path to a layout or archive, or a reference), unpacking or
        pulling it first when it is not cached. Blocking: call it from a thread in async code."""
        self._check_dirs()
        if source.startswith("/"):
            with open_local(Path(source), where) as local:
                return self._unpacked(local, local.manifest(), ()).path
        reference = parse_reference(source, where)
        cached = self._cached_digest(reference)
        if cached is not None:
            return cached.path
        return self.pull(source, where).path

    def pull(self, source: str, where: str = "image") -> CachedImage:
        """Fetch ``source``'s manifest from its registry (tags resolved afresh), then its blobs unless cached."""
        self._check_dirs()
        reference = parse_reference(source, where)
        registry = next((entry for entry in self.settings.allowed(self.default_registries)
                         if entry.host == reference.registry), None)
        if registry is None:
            allowed = ", ".join(str(entry) for entry in self.settings.allowed(self.default_registries)) or "none"
            raise BadInputError(f"{where}: {source[:200]!r}: registry {reference.registry} is not in "
                                f"sandbox.images.registries (allowed: {allowed}); the operator lists it there or "
                                "pulls the image with `evalsi sandbox image pull`")
        credentials = load_credentials(self.settings.credentials).get(reference.registry)
        remote = RegistrySource(reference, registry, credentials)
        try:
            image = self._unpacked(remote, remote.manifest(), (str(reference),))
        finally:
            remote.close()
        self._write_ref(str(reference), image.digest)
        return image

    def images(self) -> list[CachedImage]:
        """Every cached image with the references that resolve to it now (newest first)."""
        by_digest: dict[str, list[str]] = {}
        for reference, digest in sorted(self.references().items()):
            by_digest.setdefault(digest, []).append(reference)
        found = []
        for meta in (self.base / "sha256").glob("*/image.json"):
            image = self._read(meta.parent)
            if image is not None:
                image = CachedImage(image.digest, image.path, image.bytes, image.files,
                                    tuple(by_digest.get(image.digest, ())))
                found.append((meta.stat().st_mtime, image))
        return [image for _, image in sorted(found, key=lambda item: item[0], reverse=True)]

    def _cached_digest(self, reference: Reference) -> CachedImage | None:
        digest = reference.digest
        if not digest:
            try:
                digest = json.loads(self._ref_path(str(reference)).read_text())["digest"]
            except (OSError, ValueError, KeyError, TypeError):
                return None
        return self._read(self._dir(str(digest)))

    def _unpacked(self, source: ImageSource, manifest: Manifest, references: tuple[str, ...]) -> CachedImage:
        target = self._dir(manifest.digest)
        cached = self._read(target)
        if cached is not None:
            return cached
        with self._locked(manifest.digest):
            cached = self._read(target)  # another unpacker finished while this one waited
            if cached is not None:
                return cached
            hexdigest = manifest.digest.partition(":")[2]
            # Only a holder of this digest's lock stages it: what is left is a crashed unpack's. A directory without
            # its image.json was never served (one whose image.json is unreadable is left alone: rename refuses).
            stale = [*self.base.glob(f".unpack-{hexdigest}-*"), *(() if (target / "image.json").exists() else
                                                                  (target,))]
            for path in stale:
                shutil.rmtree(path, ignore_errors=True)
            staging = Path(tempfile.mkdtemp(prefix=f".unpack-{hexdigest}-", dir=self.base))
            try:
                image = self._unpack(source, manifest, staging, references)
                os.chmod(staging, 0o755)  # mkdtemp's 0700 would keep the sandbox's host user out
                os.rename(staging, target)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        return CachedImage(manifest.digest, target / "rootfs", image.bytes, image.files, references)

    def _unpack(self, source: ImageSource, manifest: Manifest, staging: Path,
                references: tuple[str, ...]) -> CachedImage:
        settings = self.settings
        declared = sum(layer.size for layer in manifest.layers)
        if declared > settings.max_bytes:
            raise BadInputError(f"{source.name}: its layers are {declared} bytes to download, more than "
                                f"{settings.max_bytes} (sandbox.images.max_bytes)")
        root = staging / "rootfs"
        root.mkdir()
        scratch = staging / "blobs"
        scratch.mkdir()
        budget = Budget(settings.max_bytes, settings.max_files, "sandbox.images.max_bytes",
                        "sandbox.images.max_files")
        for index, layer in enumerate(manifest.layers):
            with source.open_blob(layer, scratch) as stream:
                try:
                    apply_layer(stream, str(root), budget, whiteouts=True)
                except LayerRefused as exc:
                    raise BadInputError(f"{source.name}: layer {index} ({layer.digest}): {exc}") from None
        os.chmod(root, 0o755)
        scratch.rmdir()
        meta = {"digest": manifest.digest, "config": manifest.config.digest,
                "layers": [layer.digest for layer in manifest.layers], "bytes": budget.bytes, "files": budget.files,
                "references": list(references), "unpacked_at": time.time()}
        (staging / "image.json").write_text(json.dumps(meta, indent=1))
        return CachedImage(manifest.digest, root, budget.bytes, budget.files, references)

    def _read(self, directory: Path) -> CachedImage | None:
        try:
            meta = json.loads((directory / "image.json").read_text())
            image = CachedImage(str(meta["digest"]), directory / "rootfs", int(meta["bytes"]), int(meta["files"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return image if (directory / "rootfs").is_dir() else None

    def references(self) -> dict[str, str]:
        """reference -> digest, as last pulled."""
        found = {}
        for path in (self.base / "refs").glob("*.json"):
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                entry = json.loads(path.read_text())
                found[str(entry["reference"])] = str(entry["digest"])
        return found

    def _check_dirs(self) -> None:
        """Entries found here are served as roots unread: only directories no other user may write are trusted."""
        owned_cache_dir(self.base.parent)
        for directory in (self.base, self.base / "sha256", self.base / "refs"):
            owned_cache_dir(directory)

    def _dir(self, digest: str) -> Path:
        algorithm, _, hexdigest = digest.partition(":")
        return self.base / algorithm / hexdigest

    def _ref_path(self, reference: str) -> Path:
        return self.base / "refs" / f"{hashlib.sha256(reference.encode()).hexdigest()}.json"

    def _write_ref(self, reference: str, digest: str) -> None:
        path = self._ref_path(reference)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}")
        temporary.write_text(json.dumps({"reference": reference, "digest": digest}))
        os.replace(temporary, path)

    def _locked(self, digest: str) -> contextlib.AbstractContextManager[None]:
        (self.base / "sha256").mkdir(parents=True, exist_ok=True)
        return locked(self.base / ".locks" / digest.partition(":")[2])
