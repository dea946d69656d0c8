"""TLS on the listeners (``auth.tls``): one certificate and key for the api's gRPC and HTTP ports and the OTLP ports,
an optional client CA for mutual TLS, and the files reloaded when they change on disk.

A rotated certificate (cert-manager, an ACME client) is picked up without a restart: aiohttp's listener keeps one
``SSLContext`` whose SNI callback (OpenSSL calls it for every handshake, SNI or not) hands each new connection
the newest context; grpc asks :meth:`ServerTls.grpc_fetch` before each handshake. Both look at the files' mtimes
at most every ``reload_interval_s`` seconds, and a half-written pair (a new certificate beside the old key) is
skipped with a warning until both files agree: the listener keeps serving the last good pair.
With a client CA every connection must present a certificate it signed (mutual TLS on both transports alike),
and the verified certificate reaches the authenticator as ``Credentials.peer_certificate``.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from evalsi.errors import BadInputError

log = logging.getLogger("evalsi.gate.tls")
RELOAD_INTERVAL_S = 5.0


@dataclass(frozen=True)
class TlsFiles:
    """``auth.tls``: PEM files. ``client_ca`` set: mutual TLS, a client certificate signed by it is required."""

    cert_file: str
    key_file: str
    client_ca: str = ""

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.cert_file, self.key_file, self.client_ca) if self.client_ca else (self.cert_file, self.key_file)


@dataclass(frozen=True)
class _Loaded:
    stamp: tuple[float, ...]
    context: ssl.SSLContext
    cert: bytes
    key: bytes
    ca: bytes | None


class ServerTls:
    """The current certificate pair of a set of listeners, reloaded when its files change."""

    def __init__(
        self, files: TlsFiles, *, reload_interval_s: float = RELOAD_INTERVAL_S, where: str = "auth.tls"
    ) -> None:
        self.files = files
        self._interval = reload_interval_s
        self._where = where
        # grpc calls the fetcher from its own threads, aiohttp from the event loop: one lock for the swap.
        self._lock = threading.Lock()
        self._checked = time.monotonic()
        try:
            self._loaded = self._load()
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise BadInputError(f"{where}: {exc}; cert_file and key_file are a PEM certificate (chain) and its "
                                "private key, client_ca a PEM bundle of CA certificates") from None
        self.reloads = 0

    @property
    def mutual(self) -> bool:
        return bool(self.files.client_ca)

    def _stamp(self) -> tuple[float, ...]:
        return tuple(os.stat(path).st_mtime_ns for path in self.files.paths)

    def _load(self) -> _Loaded:
        stamp = self._stamp()
        cert = Path(self.files.cert_file).read_bytes()
        key = Path(self.files.key_file).read_bytes()
        ca = Path(self.files.client_ca).read_bytes() if self.files.client_ca else None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        # The stamp was taken first: a file replaced while this loads differs at the next look, and loads again.
        context.load_cert_chain(self.files.cert_file, self.files.key_file)
        if ca is not None:
            context.load_verify_locations(cadata=ca.decode("ascii"))
            context.verify_mode = ssl.CERT_REQUIRED
        return _Loaded(stamp, context, cert, key, ca)

    def refresh(self, *, force: bool = False) -> bool:
        """Reload when the files changed (looked at most every interval); True when a new pair was loaded."""
        now = time.monotonic()
        with self._lock:
            if not force and now - self._checked < self._interval:
                return False
            self._checked = now
            try:
                if self._stamp() == self._loaded.stamp:
                    return False
                self._loaded = self._load()
            except (OSError, ssl.SSLError, ValueError) as exc:
                # Mid-rotation (the certificate written, not yet its key) or a bad file: keep serving the last good.
                log.warning("%s: not reloaded, keeping the current certificate: %s", self._where, exc)
                return False
            self.reloads += 1
        log.info("%s: certificate reloaded from %s", self._where, self.files.cert_file)
        return True

    # --- aiohttp ---

    def ssl_context(self) -> ssl.SSLContext:
        """The context to give the HTTP listener: each handshake switches to the newest loaded pair."""
        front = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        front.minimum_version = ssl.TLSVersion.TLSv1_2
        front.load_cert_chain(self.files.cert_file, self.files.key_file)  # required to listen; replaced per handshake
        if self.files.client_ca:
            front.load_verify_locations(cafile=self.files.client_ca)
            front.verify_mode = ssl.CERT_REQUIRED

        def newest(connection: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext) -> None:
            self.refresh()
            connection.context = self._loaded.context

        front.sni_callback = newest
        return front

    # --- grpc ---

    def _grpc_configuration(self) -> Any:
        loaded = self._loaded
        return grpc.ssl_server_certificate_configuration([(loaded.key, loaded.cert)], root_certificates=loaded.ca)

    def grpc_credentials(self) -> grpc.ServerCredentials:
        """Credentials whose certificate grpc fetches again before a handshake once the files changed."""
        # What this listener was last given: the HTTP listener may have been the one to notice the change.
        served = [self.reloads]

        def fetch() -> Any:
            self.refresh()
            if self.reloads == served[0]:
                return None
            served[0] = self.reloads
            return self._grpc_configuration()

        return grpc.dynamic_ssl_server_credentials(
            self._grpc_configuration(), fetch, require_client_authentication=self.mutual
        )


def grpc_transport_security(context: Any) -> tuple[bool, bytes | None]:
    """Whether a gRPC call came over TLS, and the DER of the caller's verified client certificate (or None)."""
    properties = context.auth_context()
    pem = properties.get("x509_pem_cert")
    certificate = ssl.PEM_cert_to_DER_cert(pem[0].decode("ascii")) if pem else None
    return properties.get("transport_security_type") == [b"ssl"], certificate


def http_peer_certificate(transport: Any) -> bytes | None:
    """The DER of an HTTP caller's verified client certificate, or None."""
    if transport is None:
        return None
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    der: bytes | None = ssl_object.getpeercert(binary_form=True)
    return der
