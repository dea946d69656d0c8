"""OCI image references (``python:3.12-slim``, ``ghcr.io/org/tool@sha256:...``), parsed and normalized as Docker
does, so a reference names one registry, one repository and a tag or a digest.

A name whose first component has no dot, colon or ``localhost`` is on Docker Hub (registry ``docker.io``, served
at ``registry-1.docker.io``), and a one-component Docker Hub name is in ``library/``. A reference with neither tag
nor digest means ``:latest``. Pure functions: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evalsi.errors import BadInputError

__all__ = ["DOCKER_HUB", "MAX_REFERENCE", "Reference", "check_digest", "parse_reference"]

DOCKER_HUB = "docker.io"
# Names Docker Hub answers to; all are the one registry "docker.io" for the operator's allowlist.
_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})
_HUB_ENDPOINT = "registry-1.docker.io"
MAX_REFERENCE = 512
# The distribution spec's grammar (reference.go), lowercase path components separated by / with . _ __ - allowed.
_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_REGISTRY = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
                       r"|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class Reference:
    """One image in one registry: ``registry`` as the operator lists it (``docker.io``, ``ghcr.io``,
    ``127.0.0.1:5000``), the repository (``library/python``), and a tag or a digest (a digest wins)."""

    registry: str
    repository: str
    tag: str = "latest"
    digest: str = ""

    @property
    def endpoint(self) -> str:
        """The host[:port] serving the registry's API."""
        return _HUB_ENDPOINT if self.registry == DOCKER_HUB else self.registry

    @property
    def ref(self) -> str:
        """What ``/v2/<name>/manifests/<ref>`` takes: the digest when pinned, else the tag."""
        return self.digest or self.tag

    def __str__(self) -> str:
        return (f"{self.registry}/{self.repository}" + (f":{self.tag}" if self.tag else "")
                + (f"@{self.digest}" if self.digest else ""))


def check_digest(text: str, where: str) -> str:
    """A ``sha256:<64 hex>`` digest, refused otherwise (the only algorithm a registry is asked to verify)."""
    if not _DIGEST.fullmatch(text):
        raise BadInputError(f"{where}: {text[:80]!r} is not a sha256 digest (sha256:<64 lowercase hex>)")
    return text


def parse_reference(text: str, where: str = "image") -> Reference:
    """``[REGISTRY/]REPOSITORY[:TAG][@sha256:DIGEST]``, refused naming ``where`` when malformed."""
    if not text or len(text) > MAX_REFERENCE or any(ch.isspace() or ord(ch) < 32 for ch in text):
        raise BadInputError(f"{where}: {text[:80]!r}; expected an image reference such as python:3.12-slim or "
                            f"ghcr.io/org/image@sha256:..., at most {MAX_REFERENCE} characters")
    name, _, digest = text.partition("@")
    if digest:
        check_digest(digest, where)
    tag = ""
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        name, tag = name[:colon], name[colon + 1:]
        if not _TAG.fullmatch(tag):
            raise BadInputError(f"{where}: tag {tag[:80]!r} is not valid; accepted: letters, digits, _ . - "
                                "(at most 128, not starting with . or -)")
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost" or first.startswith("[")):
        registry, repository = first, rest
    else:
        registry, repository = DOCKER_HUB, name
    if registry.lower() in _HUB_ALIASES:
        registry = DOCKER_HUB
    elif not _REGISTRY.fullmatch(registry):
        raise BadInputError(f"{where}: registry {registry[:80]!r} is not a host[:port]")
    if registry == DOCKER_HUB and "/" not in repository:
        repository = f"library/{repository}"
    if not repository or not all(_COMPONENT.fullmatch(part) for part in repository.split("/")):
        raise BadInputError(f"{where}: repository {repository[:120]!r} is not valid; accepted: lowercase "
                            "components of letters, digits and . _ - separated by /")
    return Reference(registry.lower(), repository, tag or ("" if digest else "latest"), digest)
