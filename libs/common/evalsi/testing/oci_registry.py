"""A local container registry for tests: the distribution HTTP API as Docker Hub speaks it, in a thread.

- ``GET /v2/`` and every repository call without a valid token: ``401`` with
  ``WWW-Authenticate: Bearer realm="http://HOST/token",service="registry.test",scope="repository:NAME:pull"``;
- ``GET /token?service=...&scope=repository:NAME:pull``: ``{"token": ...}`` valid for that repository only
  (with ``credentials`` set, only for a request carrying them as Basic auth);
- ``GET /v2/NAME/manifests/REF`` (a tag or a digest): the manifest or index with its ``Content-Type`` and
  ``Docker-Content-Digest``, ``404`` with the API's error body when unknown;
- ``GET /v2/NAME/blobs/DIGEST``: ``307`` to ``/cdn/DIGEST`` (as a CDN serves blobs), which needs no token.

``tamper`` replaces a blob's bytes on the wire (a corrupted or malicious registry). Every request is kept in
``requests`` (method, path, headers) for tests to assert on.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import secrets
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from evalsi.testing.oci_images import OciImage

__all__ = ["LocalRegistry", "Seen"]

_MANIFEST = re.compile(r"^/v2/(?P<name>[a-z0-9._/-]+)/manifests/(?P<ref>[A-Za-z0-9_.:-]+)$")
_BLOB = re.compile(r"^/v2/(?P<name>[a-z0-9._/-]+)/blobs/(?P<digest>sha256:[0-9a-f]{64})$")


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class _Repository:
    tags: dict[str, str] = field(default_factory=dict)
    manifests: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    blobs: dict[str, bytes] = field(default_factory=dict)


class LocalRegistry:
    """Start with ``with LocalRegistry() as registry``; ``registry.host`` is ``127.0.0.1:PORT``."""

    def __init__(self, credentials: tuple[str, str] | None = None) -> None:
        self.repositories: dict[str, _Repository] = {}
        self.tokens: dict[str, str] = {}  # token -> repository
        self.tamper: dict[str, bytes] = {}
        self.trickle_s = 0.0  # > 0: blobs are sent a KiB at a time with this pause between (a slow registry)
        self.requests: list[Seen] = []
        self.credentials = credentials
        self._server = _Server(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.host = f"127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> LocalRegistry:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def push(self, name: str, tag: str, image: OciImage, *, index: bool = True) -> None:
        """The image under ``name:tag``: its two-platform index (or its manifest alone) and every blob."""
        repository = self.repositories.setdefault(name, _Repository())
        manifests = json.loads(image.index)["manifests"]
        for entry in manifests:
            repository.manifests[entry["digest"]] = (entry["mediaType"], image.blobs[entry["digest"]])
        repository.manifests[image.index_digest] = ("application/vnd.oci.image.index.v1+json", image.index)
        repository.blobs.update(image.blobs)
        repository.tags[tag] = image.index_digest if index else image.manifest_digest


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet about clients closing kept-alive connections (every httpx client does at its end)."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _handler(registry: LocalRegistry) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read ``requests``
            pass

        def do_GET(self) -> None:
            url = urlparse(self.path)
            registry.requests.append(Seen("GET", url.path, {key.lower(): value for key, value in self.headers.items()}))
            if url.path == "/token":
                self._token(parse_qs(url.query))
            elif url.path.startswith("/cdn/"):
                self._blob_bytes(url.path[len("/cdn/"):])
            elif url.path in ("/v2", "/v2/"):
                if self._authorized(None):
                    self._send(200, b"{}", "application/json")
            elif match := _MANIFEST.match(url.path):
                if self._authorized(match["name"]):
                    self._manifest(match["name"], match["ref"])
            elif match := _BLOB.match(url.path):
                if self._authorized(match["name"]):
                    self.send_response(307)
                    self.send_header("Location", f"http://{registry.host}/cdn/{match['digest']}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
            else:
                self._error(404, "NAME_UNKNOWN", "no such route")

        def _authorized(self, name: str | None) -> bool:
            header = self.headers.get("Authorization", "")
            token = header[len("Bearer "):] if header.startswith("Bearer ") else ""
            if token in registry.tokens and (name is None or registry.tokens[token] == name):
                return True
            scope = f',scope="repository:{name}:pull"' if name else ""
            body = json.dumps({"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]}).encode()
            self.send_response(401)
            self.send_header("WWW-Authenticate", f'Bearer realm="http://{registry.host}/token",'
                                                 f'service="registry.test"{scope}')
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return False

        def _token(self, query: dict[str, list[str]]) -> None:
            scope = (query.get("scope") or [""])[0]
            match = re.fullmatch(r"repository:([a-z0-9._/-]+):pull", scope)
            if (query.get("service") or [""])[0] != "registry.test" or match is None:
                self._error(400, "DENIED", "expected service=registry.test and scope=repository:NAME:pull")
                return
            if registry.credentials is not None:
                expected = "Basic " + base64.b64encode(":".join(registry.credentials).encode()).decode()
                if self.headers.get("Authorization") != expected:
                    self._error(401, "UNAUTHORIZED", "bad credentials")
                    return
            token = secrets.token_hex(16)
            registry.tokens[token] = match.group(1)
            self._send(200, json.dumps({"token": token, "expires_in": 300}).encode(), "application/json")

        def _manifest(self, name: str, ref: str) -> None:
            repository = registry.repositories.get(name)
            digest = ref if ref.startswith("sha256:") else (repository.tags.get(ref, "") if repository else "")
            found = repository.manifests.get(digest) if repository else None
            if found is None:
                self._error(404, "MANIFEST_UNKNOWN", f"manifest unknown: {ref}")
                return
            media_type, body = found
            self._send(200, body, media_type, {"Docker-Content-Digest": digest})

        def _blob_bytes(self, digest: str) -> None:
            data = registry.tamper.get(digest)
            if data is None:
                data = next((repo.blobs[digest] for repo in registry.repositories.values() if digest in repo.blobs),
                            None)
            if data is None:
                self._error(404, "BLOB_UNKNOWN", f"blob unknown: {digest}")
                return
            if registry.trickle_s <= 0:
                self._send(200, data, "application/octet-stream")
                return
            self._send(200, b"", "application/octet-stream", {"Content-Length": str(len(data))})
            with contextlib.suppress(OSError):  # the client gave up
                for start in range(0, len(data), 1024):
                    self.wfile.write(data[start:start + 1024])
                    self.wfile.flush()
                    time.sleep(registry.trickle_s)

        def _error(self, status: int, code: str, message: str) -> None:
            body = json.dumps({"errors": [{"code": code, "message": message}]}).encode()
            self._send(status, body, "application/json")

        def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            headers = dict(headers or {})
            self.send_header("Content-Length", headers.pop("Content-Length", str(len(body))))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

    return Handler
