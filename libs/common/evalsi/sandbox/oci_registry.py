"""Pulling an image from a registry over the distribution HTTP API (``/v2/<name>/manifests/<ref>``,
``/v2/<name>/blobs/<digest>``), blocking (callers in async code use a thread).

Authentication follows the registry's ``WWW-Authenticate`` challenge: ``Bearer realm=...,service=...`` is answered
with a token from the realm (anonymous, or with the operator's credentials for that registry as Basic auth),
``Basic`` with the credentials. A blob is downloaded to a scratch file, bounded by its descriptor's size, and handed
out only after its digest matched. Redirects (a CDN serving blobs) are followed; the client drops the
Authorization header when a redirect leaves the registry's origin. Only a registry the operator listed is asked for
an image (``oci.py`` checks before making a source); the token service its challenge names and the hosts its
redirects name are contacted too, as Docker does (docker.io's tokens come from auth.docker.io). A TLS registry's
token service must be HTTPS: the operator's credentials never travel in clear text.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import httpx

from evalsi.errors import BadInputError, InfraError
from evalsi.sandbox.oci_config import Registry
from evalsi.sandbox.oci_local import verified
from evalsi.sandbox.oci_manifest import (
    ACCEPT_MANIFESTS,
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
from evalsi.sandbox.oci_ref import Reference
from evalsi.yaml_files import read_yaml_file

__all__ = ["RegistrySource", "load_credentials"]

_MAX_TOKEN_BYTES = 64 * 1024
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
_TIMEOUT = httpx.Timeout(60.0, connect=10.0)
# httpx's timeout bounds each read, not a whole download: a registry trickling a byte a minute would hold the pull
# (and the digest's lock) forever. A download must finish within a minute plus its size at this slowest rate.
_MIN_BYTES_PER_S = 256 * 1024
_BASE_DEADLINE_S = 60.0


def _deadline(size: int) -> float:
    return time.monotonic() + _BASE_DEADLINE_S + size / _MIN_BYTES_PER_S


def load_credentials(path: Path | None, where: str = "sandbox.images.credentials") -> dict[str, tuple[str, str]]:
    """The credentials file: ``registry: {username, password}`` per registry host."""
    if path is None:
        return {}
    document = read_yaml_file(path)
    if not isinstance(document, Mapping):
        raise BadInputError(f"{where}: {path}: expected a mapping of registry to {{username, password}}")
    credentials = {}
    for registry, entry in document.items():
        if (not isinstance(entry, Mapping) or not isinstance(entry.get("username"), str)
                or not isinstance(entry.get("password"), str)):
            raise BadInputError(f"{where}: {path}: {str(registry)[:80]}: expected {{username, password}} strings")
        credentials[str(registry).lower()] = (entry["username"], entry["password"])
    return credentials


class RegistrySource:
    """One reference in one allowed registry."""

    def __init__(self, reference: Reference, registry: Registry, credentials: tuple[str, str] | None) -> None:
        self.reference = reference
        self.name = str(reference)
        self.credentials = credentials
        self.tls = registry.tls
        scheme = "https" if registry.tls else "http"
        self.base = f"{scheme}://{reference.endpoint}/v2/{reference.repository}"
        self.client = httpx.Client(timeout=_TIMEOUT, follow_redirects=True, trust_env=False)
        self._authorization: str | None = None

    def close(self) -> None:
        self.client.close()

    def manifest(self) -> Manifest:
        ref = self.reference.ref
        for _ in range(MAX_NESTING + 1):
            body, media_type, served = self._manifest_bytes(ref)
            where = f"{self.name}: manifest {ref}"
            if kind_of(body, media_type, where) == "manifest":
                return parse_manifest(body, served, where)
            ref = pick_platform(parse_index(body, where), where).digest
        raise BadInputError(f"{self.name}: indexes nested more than {MAX_NESTING} deep")

    def _manifest_bytes(self, ref: str) -> tuple[bytes, str, str]:
        with self._get(f"{self.base}/manifests/{ref}", {"Accept": ACCEPT_MANIFESTS}) as response:
            if response.status_code == 404:
                raise BadInputError(f"{self.name}: the registry has no manifest {ref!r} (404)")
            self._check(response, f"manifest {ref}")
            body = _bounded(response, MAX_MANIFEST_BYTES, f"{self.name}: manifest {ref}")
            media_type = response.headers.get("content-type", "")
            header = response.headers.get("docker-content-digest", "")
        digest = sha256_digest(body)
        if ref.startswith("sha256:") and digest != ref:
            raise BadInputError(f"{self.name}: manifest {ref} has digest {digest}: its content does not match")
        if header and header != digest:
            raise BadInputError(f"{self.name}: manifest {ref}: the registry says {header}, its content is {digest}")
        return body, media_type, digest

    @contextlib.contextmanager
    def open_blob(self, blob: Descriptor, scratch: Path) -> Iterator[IO[bytes]]:
        path = scratch / blob.digest.replace(":", "-")
        try:
            with self._get(f"{self.base}/blobs/{blob.digest}", {}) as response:
                self._check(response, f"blob {blob.digest}")
                written, deadline = 0, _deadline(blob.size)
                with path.open("wb") as target:
                    for chunk in response.iter_bytes():
                        _in_time(deadline, f"{self.name}: blob {blob.digest}")
                        written += len(chunk)
                        if written > blob.size:
                            raise BadInputError(f"{self.name}: blob {blob.digest} is larger than its descriptor's "
                                                f"{blob.size} bytes")
                        target.write(chunk)
            with path.open("rb") as stream:
                yield verified(stream, blob, self.name)
        finally:
            path.unlink(missing_ok=True)

    @contextlib.contextmanager
    def _get(self, url: str, headers: Mapping[str, str]) -> Iterator[httpx.Response]:
        """GET with the registry's authentication: on a 401, answer its challenge once and retry."""
        try:
            for attempt in range(2):
                sent = dict(headers)
                if self._authorization:
                    sent["Authorization"] = self._authorization
                with self.client.stream("GET", url, headers=sent) as response:
                    if response.status_code == 401 and attempt == 0:
                        self._authorization = self._answer(response.headers.get("www-authenticate", ""))
                        continue
                    yield response
                    return
        except httpx.HTTPError as exc:
            raise InfraError(f"{self.name}: registry {self.reference.endpoint} unreachable: {exc}") from None

    def _answer(self, challenge: str) -> str:
        scheme, _, rest = challenge.partition(" ")
        params = dict(_CHALLENGE.findall(rest))
        if scheme.lower() == "basic":
            if self.credentials is None:
                raise BadInputError(f"{self.name}: the registry asks for credentials; none are configured for "
                                    f"{self.reference.registry} (sandbox.images.credentials)")
            return _basic(self.credentials)
        if scheme.lower() != "bearer" or not params.get("realm", "").startswith(("https://", "http://")):
            raise BadInputError(f"{self.name}: the registry's challenge {challenge[:200]!r} is not Bearer or Basic")
        if self.tls and not params["realm"].startswith("https://"):
            raise BadInputError(f"{self.name}: the registry's token service {params['realm'][:200]!r} is not HTTPS; "
                                "a TLS registry's tokens (and the credentials asked for them) are fetched over HTTPS "
                                "only")
        query = {"scope": params.get("scope") or f"repository:{self.reference.repository}:pull"}
        if params.get("service"):
            query["service"] = params["service"]
        auth = httpx.BasicAuth(*self.credentials) if self.credentials else None
        try:
            with self.client.stream("GET", params["realm"], params=query, auth=auth) as response:
                if response.status_code != 200:
                    raise BadInputError(f"{self.name}: the token service {params['realm'][:200]} answered "
                                        f"{response.status_code}")
                body = _bounded(response, _MAX_TOKEN_BYTES, f"{self.name}: token")
        except httpx.HTTPError as exc:
            raise InfraError(f"{self.name}: token service unreachable: {exc}") from None
        try:
            document: Any = json.loads(body)
            token = document.get("token") or document.get("access_token")
        except (ValueError, AttributeError):
            token = None
        if not isinstance(token, str) or not token:
            raise BadInputError(f"{self.name}: the token service answered no token")
        return f"Bearer {token}"

    def _check(self, response: httpx.Response, what: str) -> None:
        if response.status_code == 401:
            raise BadInputError(f"{self.name}: {what}: the registry refused our credentials (401)")
        if response.status_code >= 500:
            raise InfraError(f"{self.name}: {what}: the registry answered {response.status_code}")
        if response.status_code != 200:
            raise BadInputError(f"{self.name}: {what}: the registry answered {response.status_code}")


def _basic(credentials: tuple[str, str]) -> str:
    username, password = credentials
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


def _in_time(deadline: float, where: str) -> None:
    if time.monotonic() > deadline:
        raise InfraError(f"{where}: the download is slower than {_MIN_BYTES_PER_S // 1024} KiB/s after "
                         f"{_BASE_DEADLINE_S:g} s; given up")


def _bounded(response: httpx.Response, limit: int, where: str) -> bytes:
    data, deadline = bytearray(), _deadline(limit)
    for chunk in response.iter_bytes():
        _in_time(deadline, where)
        data += chunk
        if len(data) > limit:
            raise BadInputError(f"{where}: over {limit} bytes")
    return bytes(data)
