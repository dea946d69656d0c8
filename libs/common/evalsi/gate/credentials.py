"""What a call presents, gathered from each transport into one ``Credentials`` before any handler runs."""

from __future__ import annotations

from collections.abc import Mapping
from http.cookies import CookieError, SimpleCookie
from typing import Any

from evalsi.auth.principal import Credentials, Transport
from evalsi.gate.tls import grpc_transport_security, http_peer_certificate


def grpc_peer_address(peer: str) -> str:
    """``ipv4:127.0.0.1:5000`` / ``ipv6:[::1]:5000`` → the IP address; '' for anything else (unix sockets)."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0]
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    return ""


def _cookies(header: str) -> dict[str, str]:
    if not header:
        return {}
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except CookieError:
        return {}
    return {name: morsel.value for name, morsel in jar.items()}


def grpc_credentials(context: Any, headers: Mapping[str, str], transport: Transport = "grpc") -> Credentials:
    """From a grpc.aio ``ServicerContext`` and its metadata (lower-case keys, text values)."""
    secure, certificate = grpc_transport_security(context)
    return Credentials(
        transport=transport,
        headers=headers,
        cookies=_cookies(headers.get("cookie", "")),
        peer=grpc_peer_address(context.peer() or ""),
        peer_certificate=certificate,
        secure=secure,
    )


def grpc_metadata(context: Any) -> dict[str, str]:
    """A call's text metadata with lower-case keys (binary ``-bin`` entries carry no credential)."""
    metadata = context.invocation_metadata() or ()
    return {item.key.lower(): item.value for item in metadata if isinstance(item.value, str)}


def http_credentials(request: Any, transport: Transport = "http") -> Credentials:
    """From an aiohttp request."""
    return Credentials(
        transport=transport,
        headers={name.lower(): value for name, value in request.headers.items()},
        cookies=dict(request.cookies),
        query=dict(request.query),
        peer=request.remote or "",
        peer_certificate=http_peer_certificate(request.transport),
        secure=request.secure,
    )
