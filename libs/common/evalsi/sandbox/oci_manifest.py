"""OCI and Docker image manifests and indexes, parsed from untrusted JSON (pure functions, no I/O).

An index (OCI image index or Docker manifest list) names one manifest per platform; ``pick_platform`` takes the
host's (``linux/amd64`` here). A manifest names the config blob and the layers, applied in order. Every digest is
checked for form here and for content where the blob is read.
"""

from __future__ import annotations

import hashlib
import json
import platform
from dataclasses import dataclass
from typing import Any

from evalsi.errors import BadInputError
from evalsi.sandbox.oci_ref import check_digest

__all__ = [
    "ACCEPT_MANIFESTS",
    "MAX_NESTING",
    "Descriptor",
    "Manifest",
    "host_platform",
    "parse_index",
    "parse_manifest",
    "pick_platform",
    "sha256_digest",
]

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)
MANIFEST_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST)
ACCEPT_MANIFESTS = ", ".join((*MANIFEST_TYPES, *INDEX_TYPES))
LAYER_TYPES = (
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.docker.image.rootfs.diff.tar",
)
MAX_MANIFEST_BYTES = 4 << 20
MAX_LAYERS = 256
# Indexes an image may be reached through (an index naming an index, then a manifest): past it, refused.
MAX_NESTING = 2
_ARCHITECTURES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


@dataclass(frozen=True)
class Descriptor:
    media_type: str
    digest: str
    size: int


@dataclass(frozen=True)
class Manifest:
    """One image: ``digest`` is its cache key (the manifest's digest; for a legacy ``docker save`` archive, which
    has none, the config's, Docker's image ID)."""

    digest: str
    config: Descriptor
    layers: tuple[Descriptor, ...]


def sha256_digest(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def host_platform() -> tuple[str, str]:
    return "linux", _ARCHITECTURES.get(platform.machine().lower(), "amd64")


def _document(body: bytes, where: str) -> dict[str, Any]:
    if len(body) > MAX_MANIFEST_BYTES:
        raise BadInputError(f"{where}: over {MAX_MANIFEST_BYTES} bytes; not a manifest")
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadInputError(f"{where}: not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise BadInputError(f"{where}: expected a JSON object")
    return document


def kind_of(body: bytes, media_type: str, where: str) -> str:
    """``index`` or ``manifest``, from the served media type or else the document's own."""
    document = _document(body, where)
    declared = media_type.split(";")[0].strip() or str(document.get("mediaType") or "")
    if declared in INDEX_TYPES or (not declared and "manifests" in document):
        return "index"
    if declared in MANIFEST_TYPES or (not declared and "layers" in document):
        return "manifest"
    accepted = ", ".join((*MANIFEST_TYPES, *INDEX_TYPES))
    raise BadInputError(f"{where}: media type {declared[:100]!r} is not an image manifest or index (Docker "
                        f"schema 1 is not supported); accepted: {accepted}")


def descriptor(raw: Any, where: str) -> Descriptor:
    if not isinstance(raw, dict):
        raise BadInputError(f"{where}: expected a descriptor object")
    size = raw.get("size")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise BadInputError(f"{where}.size: expected a non-negative integer")
    return Descriptor(str(raw.get("mediaType") or ""), check_digest(str(raw.get("digest") or ""),
                                                                    f"{where}.digest"), size)


def parse_index(body: bytes, where: str) -> list[tuple[Descriptor, dict[str, Any]]]:
    """The index's manifests with their platforms."""
    manifests = _document(body, where).get("manifests")
    if not isinstance(manifests, list) or not manifests:
        raise BadInputError(f"{where}: an index with no manifests")
    return [(descriptor(item, f"{where}.manifests[{index}]"),
             item.get("platform") if isinstance(item.get("platform"), dict) else {})
            for index, item in enumerate(manifests[:1024])]


def pick_platform(entries: list[tuple[Descriptor, dict[str, Any]]], where: str) -> Descriptor:
    """The host's platform; an index of one manifest without a platform (an OCI layout of one image) is that one."""
    system, architecture = host_platform()
    for entry, plat in entries:
        if plat.get("os") == system and plat.get("architecture") == architecture:
            return entry
    untagged = [entry for entry, plat in entries if not plat]
    if len(untagged) == 1:
        return untagged[0]
    if untagged:
        raise BadInputError(f"{where}: {len(untagged)} images without a platform; an image root names one image "
                            "(keep one per layout, or give each its platform)")
    offered = ", ".join(sorted({f"{plat.get('os')}/{plat.get('architecture')}" for _, plat in entries}))
    raise BadInputError(f"{where}: no manifest for {system}/{architecture}; the index offers {offered}")


def parse_manifest(body: bytes, digest: str, where: str) -> Manifest:
    document = _document(body, where)
    config = descriptor(document.get("config"), f"{where}.config")
    layers = document.get("layers")
    if not isinstance(layers, list):
        raise BadInputError(f"{where}.layers: expected a list")
    if len(layers) > MAX_LAYERS:
        raise BadInputError(f"{where}.layers: {len(layers)} layers; at most {MAX_LAYERS}")
    parsed = tuple(descriptor(layer, f"{where}.layers[{index}]") for index, layer in enumerate(layers))
    for index, layer in enumerate(parsed):
        if layer.media_type not in LAYER_TYPES:
            raise BadInputError(f"{where}.layers[{index}]: media type {layer.media_type[:100]!r} is not supported "
                                f"(zstd, foreign and non-distributable layers are not); accepted: "
                                f"{', '.join(LAYER_TYPES)}")
    return Manifest(digest, config, parsed)
