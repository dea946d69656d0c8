"""A small real OCI image for tests and examples: two gzip layers over the static busybox, written as a registry
would serve it, as an OCI image layout (directory or tarball) and as a legacy ``docker save`` archive.

Layer 1 is the busybox root (``sandbox_images.busybox_image``) plus ``/etc/hello`` ("hello from layer 1"),
``/etc/gone`` and ``/opt/old``; layer 2 replaces ``/etc/hello`` ("hello from layer 2"), deletes ``/etc/gone`` with a
whiteout (``etc/.wh.gone``) and empties ``/opt`` with an opaque whiteout before adding ``/opt/new``.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from evalsi.testing.sandbox_images import busybox_image

__all__ = ["OciImage", "busybox_oci_image", "tar_layer", "write_docker_archive", "write_layout", "write_layout_tar"]

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"


def _digest(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


@dataclass
class OciImage:
    """An image's blobs by digest; ``manifest_digest`` is its cache key, ``index`` a two-platform index over it."""

    manifest: bytes
    config: bytes
    layers: list[bytes]  # gzip blobs, in order
    diff_ids: list[str]
    uncompressed: list[bytes]
    blobs: dict[str, bytes] = field(default_factory=dict)
    index: bytes = b""

    @property
    def manifest_digest(self) -> str:
        return _digest(self.manifest)

    @property
    def index_digest(self) -> str:
        return _digest(self.index)


def tar_layer(add: Callable[[tarfile.TarFile], None]) -> bytes:
    """An uncompressed tar made by ``add``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        add(archive)
    return buffer.getvalue()


def _file(archive: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    archive.addfile(info, io.BytesIO(data))


def _directory(archive: tarfile.TarFile, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, 0o755
    archive.addfile(info)


def image_from_layers(uncompressed: list[bytes]) -> OciImage:
    """A manifest, config and a two-platform index (linux/arm64 first, then linux/amd64) over the given layers."""
    layers = [gzip.compress(layer, mtime=0) for layer in uncompressed]
    diff_ids = [_digest(layer) for layer in uncompressed]
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Cmd": ["sh"]},
                         "rootfs": {"type": "layers", "diff_ids": diff_ids}}).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": _digest(config), "size": len(config)},
        "layers": [{"mediaType": OCI_LAYER_GZIP, "digest": _digest(layer), "size": len(layer)} for layer in layers],
    }).encode()
    other = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                        "config": {"mediaType": OCI_CONFIG, "digest": _digest(config), "size": len(config)},
                        "layers": []}).encode()
    index = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
        {"mediaType": OCI_MANIFEST, "digest": _digest(other), "size": len(other),
         "platform": {"os": "linux", "architecture": "arm64"}},
        {"mediaType": OCI_MANIFEST, "digest": _digest(manifest), "size": len(manifest),
         "platform": {"os": "linux", "architecture": "amd64"}},
    ]}).encode()
    blobs = {_digest(blob): blob for blob in (config, manifest, other, index, *layers)}
    return OciImage(manifest, config, layers, diff_ids, uncompressed, blobs, index)


def busybox_oci_image(workdir: Path) -> OciImage:
    """The two-layer busybox image (built under ``workdir``)."""
    root = busybox_image(workdir / "busybox-root")

    def first(archive: tarfile.TarFile) -> None:
        for entry in sorted(root.iterdir()):
            archive.add(entry, arcname=entry.name)
        _file(archive, "etc/hello", b"hello from layer 1\n")
        _file(archive, "etc/gone", b"deleted by layer 2\n")
        _directory(archive, "opt")
        _file(archive, "opt/old", b"hidden by an opaque whiteout\n")

    def second(archive: tarfile.TarFile) -> None:
        _file(archive, "etc/hello", b"hello from layer 2\n")
        _file(archive, "etc/.wh.gone", b"")
        _directory(archive, "opt")
        _file(archive, "opt/.wh..wh..opq", b"")
        _file(archive, "opt/new", b"added by layer 2\n")

    return image_from_layers([tar_layer(first), tar_layer(second)])


def write_layout(image: OciImage, directory: Path) -> Path:
    """An OCI image layout: oci-layout, index.json naming the manifest (no platform), blobs/sha256/..."""
    blobs = directory / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    for digest, data in image.blobs.items():
        (blobs / digest.partition(":")[2]).write_bytes(data)
    (directory / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (directory / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": OCI_MANIFEST, "digest": image.manifest_digest, "size": len(image.manifest),
         "annotations": {"org.opencontainers.image.ref.name": "1.0"}}]}))
    return directory


def write_layout_tar(image: OciImage, path: Path, workdir: Path) -> Path:
    """The layout as a tarball (``oci-archive``)."""
    layout = write_layout(image, workdir / "layout-for-tar")
    with tarfile.open(path, "w") as archive:
        for entry in sorted(layout.iterdir()):
            archive.add(entry, arcname=entry.name)
    return path


def write_docker_archive(image: OciImage, path: Path) -> Path:
    """A legacy ``docker save`` archive: manifest.json, the config, one uncompressed layer.tar per layer."""
    config_name = f"{image.manifest_digest.partition(':')[2][:12]}.json"
    layer_names = [f"layer{index}/layer.tar" for index in range(len(image.uncompressed))]

    def add(archive: tarfile.TarFile) -> None:
        _file(archive, "manifest.json", json.dumps([{"Config": config_name, "RepoTags": ["busybox-test:1.0"],
                                                     "Layers": layer_names}]).encode())
        _file(archive, config_name, image.config)
        for name, layer in zip(layer_names, image.uncompressed, strict=True):
            _file(archive, name, layer)

    path.write_bytes(tar_layer(add))
    return path
