"""evalsi.yaml's ``sandbox.images``: which registries an OCI image root may be pulled from, the credentials file,
and the bounds of one image.

    sandbox:
      images:
        registries: [docker.io, ghcr.io, "http://127.0.0.1:5000"]   # host[:port]; http:// for a plain-HTTP one
        credentials: /etc/evalsi/registries.yaml                    # optional; registry -> {username, password}
        max_bytes: 8589934592                                       # unpacked bytes of one image (and its download)
        max_files: 500000                                           # entries of one image, all layers together

Where images come from is the operator's choice, never a request's: a request may name a reference, and it is
pulled only from a registry listed here. Without ``registries`` the form factor decides: embedded use (``evalsi
run``, ``evalsi sandbox run``) allows ``docker.io``; ``evalsi-sandboxd`` allows none, serving only images already
in its cache (``evalsi sandbox image pull REF`` by the operator). Every error names the key path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evalsi.errors import BadInputError
from evalsi.sandbox.checks import check_bound
from evalsi.sandbox.oci_ref import DOCKER_HUB

__all__ = ["EMBEDDED_REGISTRIES", "ImageSettings", "Registry", "load_image_settings", "parse_registry"]

_KEYS = ("registries", "credentials", "max_bytes", "max_files")
_HOST = re.compile(r"(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*|\[[0-9a-f:.]+\])"
                   r"(?::[0-9]{1,5})?")
EMBEDDED_REGISTRIES = (DOCKER_HUB,)
_MAX_REGISTRIES = 64


@dataclass(frozen=True)
class Registry:
    """One allowed registry: ``host`` as references name it (``docker.io``, ``127.0.0.1:5000``) and whether its API
    is spoken over TLS (plain HTTP only when the operator wrote ``http://``)."""

    host: str
    tls: bool = True

    def __str__(self) -> str:
        return self.host if self.tls else f"http://{self.host}"


@dataclass(frozen=True)
class ImageSettings:
    # None: the form factor's default (EMBEDDED_REGISTRIES embedded, none on sandboxd); () allows none.
    registries: tuple[Registry, ...] | None = None
    credentials: Path | None = None
    max_bytes: int = 8 << 30
    max_files: int = 500_000

    def allowed(self, default: tuple[str, ...] = EMBEDDED_REGISTRIES) -> tuple[Registry, ...]:
        if self.registries is not None:
            return self.registries
        return tuple(parse_registry(host, "sandbox.images.registries") for host in default)

    def for_server(self) -> ImageSettings:
        """sandboxd's default: no registry unless the operator lists some."""
        return self if self.registries is not None else replace(self, registries=())


def parse_registry(text: str, where: str) -> Registry:
    tls = True
    host = text.strip().lower().rstrip("/")
    if host.startswith("https://"):
        host = host[len("https://"):]
    elif host.startswith("http://"):
        host, tls = host[len("http://"):], False
    if host in ("index.docker.io", "registry-1.docker.io"):
        host = DOCKER_HUB
    if not _HOST.fullmatch(host):
        raise BadInputError(f"{where}: {text[:80]!r} is not a registry; accepted: host[:port] such as docker.io or "
                            "ghcr.io, or http://host:port for a plain-HTTP registry")
    return Registry(host, tls)


def load_image_settings(raw: Any, path: str = "sandbox.images") -> ImageSettings:
    if raw is None:
        return ImageSettings()
    if not isinstance(raw, Mapping):
        raise BadInputError(f"{path}: expected a mapping such as {{registries: [docker.io]}}")
    unknown = sorted(str(key) for key in raw if key not in _KEYS)
    if unknown:
        raise BadInputError(f"{path}.{unknown[0]}: unknown key; accepted: {', '.join(_KEYS)}")
    settings = ImageSettings()
    if raw.get("registries") is not None:
        value = raw["registries"]
        if not isinstance(value, list) or len(value) > _MAX_REGISTRIES:
            raise BadInputError(f"{path}.registries: expected a list of at most {_MAX_REGISTRIES} registries such "
                                "as [docker.io, ghcr.io] ([] allows none)")
        registries = []
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise BadInputError(f"{path}.registries[{index}]: expected a string such as docker.io")
            registries.append(parse_registry(item, f"{path}.registries[{index}]"))
        settings = replace(settings, registries=tuple(registries))
    if raw.get("credentials"):
        if not isinstance(raw["credentials"], str):
            raise BadInputError(f"{path}.credentials: expected the path of a credentials file")
        settings = replace(settings, credentials=Path(raw["credentials"]).expanduser())
    if raw.get("max_bytes") is not None:
        settings = replace(settings, max_bytes=check_bound(raw["max_bytes"], f"{path}.max_bytes", 1 << 20, 1 << 40))
    if raw.get("max_files") is not None:
        settings = replace(settings, max_files=check_bound(raw["max_files"], f"{path}.max_files", 1, 10_000_000))
    return settings

