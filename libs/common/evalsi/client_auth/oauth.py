"""The OAuth 2.0 and OIDC calls a client makes: what the server advertises (``/.well-known/evalsi-auth``), the
issuer's discovery document, its token endpoint (refresh, device code, authorization code) and its device
authorization endpoint (RFC 8628).

Synchronous, over the standard library's HTTP client like the Client's HTTP transport: these run before a call
of a sync client or in a one-shot CLI command, where an event loop would add nothing. Issuers are spoken to over
HTTPS; plain HTTP only on loopback (a local issuer in development and tests), so no token crosses a network in
clear.
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evalsi.errors import BadInputError, InfraError

# The Client's variable (evalsi.client_transports.CA_FILE_ENV), not imported: that module loads the protos.
CA_FILE_ENV = "EVALSI_CA_FILE"

WELL_KNOWN_EVALSI = "/.well-known/evalsi-auth"
WELL_KNOWN_OIDC = "/.well-known/openid-configuration"
DEVICE_CODE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
TIMEOUT_S = 30.0
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
MAX_RESPONSE_BYTES = 1 << 20


class OAuthError(BadInputError):
    """The issuer refused a request with an OAuth error (``invalid_grant``, ``access_denied`` ...)."""

    def __init__(self, error: str, description: str, where: str) -> None:
        self.error = error
        self.description = description
        detail = f": {description}" if description else ""
        super().__init__(f"{where} answered {error}{detail}")


@dataclass(frozen=True)
class LoginConfig:
    """What a server advertises to ``evalsi login``: the issuer its users sign in with and the CLI's client."""

    issuer: str
    client_id: str
    scopes: tuple[str, ...] = ("openid", "offline_access")
    audience: str = ""


@dataclass(frozen=True)
class IssuerEndpoints:
    """The parts of an issuer's OIDC discovery document a client uses."""

    issuer: str
    token_endpoint: str
    authorization_endpoint: str = ""
    device_authorization_endpoint: str = ""


@dataclass(frozen=True)
class TokenSet:
    """A token endpoint's answer. ``expires_in`` is 0 when the issuer did not say."""

    access_token: str
    refresh_token: str = ""
    expires_in: float = 0.0
    token_type: str = "Bearer"

    def __repr__(self) -> str:  # never a token in a traceback
        return f"TokenSet(token_type={self.token_type!r}, expires_in={self.expires_in})"


@dataclass(frozen=True)
class DeviceAuthorization:
    """RFC 8628 §3.2: what the user is shown and how long and how often to poll."""

    device_code: str
    user_code: str
    verification_uri: str
    verification_uri_complete: str
    expires_in: float
    interval: float


def check_endpoint(url: str, what: str) -> str:
    """An issuer URL a token may be sent to: HTTPS, or HTTP on loopback."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme == "https" and parsed.netloc:
        return url
    if parsed.scheme == "http" and parsed.hostname in LOOPBACK_HOSTS:
        return url
    raise BadInputError(f"{what} {url!r}: must be an https:// URL (plain http only on 127.0.0.1 or localhost), "
                        "so tokens never cross a network in clear")


def fetch_login_config(server: str) -> LoginConfig:
    """``GET {server}/.well-known/evalsi-auth``: the issuer and client id the server's users log in with. An
    ``https://`` server is verified like the Client's calls to it (``EVALSI_CA_FILE``, else the system's roots)."""
    parsed = urllib.parse.urlsplit(server)
    if parsed.scheme not in ("http", "https"):
        raise BadInputError(f"--server {server}: login reads {WELL_KNOWN_EVALSI} over HTTP; give the server's HTTP "
                            "address (http://host:8080), or name the issuer with --issuer and --client-id")
    where = f"{server.rstrip('/')}{WELL_KNOWN_EVALSI}"
    ca_file = os.environ.get(CA_FILE_ENV, "") if parsed.scheme == "https" else ""
    context = ssl.create_default_context(cafile=ca_file) if ca_file else None
    document = _get_json(where, what=f"the server's login settings ({where})", context=context)
    issuer, client_id = document.get("issuer"), document.get("client_id")
    if not isinstance(issuer, str) or not issuer or not isinstance(client_id, str) or not client_id:
        raise BadInputError(f"{where}: the server advertises no login (no issuer and client_id; its config needs "
                            "auth.cli_login: {issuer: ..., client_id: ...}); use --token or --api-key instead")
    scopes = document.get("scopes")
    return LoginConfig(
        issuer=issuer, client_id=client_id,
        scopes=tuple(str(s) for s in scopes) if isinstance(scopes, list) and scopes else LoginConfig.scopes,
        audience=str(document.get("audience") or ""),
    )


def discover(issuer: str) -> IssuerEndpoints:
    """The issuer's OIDC discovery document; its ``issuer`` must be the one asked for (OIDC Discovery §4.3)."""
    check_endpoint(issuer, "issuer")
    where = issuer.rstrip("/") + WELL_KNOWN_OIDC
    document = _get_json(where, what=f"the issuer's discovery document ({where})")
    if str(document.get("issuer", "")).rstrip("/") != issuer.rstrip("/"):
        raise BadInputError(f"{where}: names issuer {document.get('issuer')!r}, not {issuer!r}; refusing it")
    token_endpoint = document.get("token_endpoint")
    if not isinstance(token_endpoint, str):
        raise BadInputError(f"{where}: no token_endpoint")
    endpoints = IssuerEndpoints(
        issuer=issuer, token_endpoint=check_endpoint(token_endpoint, "token_endpoint"),
        authorization_endpoint=str(document.get("authorization_endpoint") or ""),
        device_authorization_endpoint=str(document.get("device_authorization_endpoint") or ""),
    )
    for name in ("authorization_endpoint", "device_authorization_endpoint"):
        if getattr(endpoints, name):
            check_endpoint(getattr(endpoints, name), name)
    return endpoints


def token_request(token_endpoint: str, form: Mapping[str, str]) -> TokenSet:
    """``POST`` a grant to the token endpoint; an OAuth error answer is an ``OAuthError`` with its code."""
    document = _post_form(token_endpoint, form, what="the token endpoint")
    access_token = document.get("access_token")
    if not isinstance(access_token, str) or not access_token:
        raise InfraError(f"{token_endpoint}: the answer has no access_token")
    return TokenSet(
        access_token=access_token, refresh_token=str(document.get("refresh_token") or ""),
        expires_in=float(document.get("expires_in") or 0), token_type=str(document.get("token_type") or "Bearer"),
    )


def refresh(token_endpoint: str, client_id: str, refresh_token: str) -> TokenSet:
    """RFC 6749 §6: a new access token for a refresh token (and, from issuers that rotate them, a new one)."""
    return token_request(token_endpoint, {"grant_type": "refresh_token", "refresh_token": refresh_token,
                                          "client_id": client_id})


def device_authorization(endpoint: str, client_id: str, scopes: tuple[str, ...], audience: str = "",
                         ) -> DeviceAuthorization:
    """RFC 8628 §3.1: start a device login."""
    form = {"client_id": client_id, "scope": " ".join(scopes), **({"audience": audience} if audience else {})}
    document = _post_form(endpoint, form, what="the device authorization endpoint")
    try:
        return DeviceAuthorization(
            device_code=str(document["device_code"]), user_code=str(document["user_code"]),
            verification_uri=str(document["verification_uri"]),
            verification_uri_complete=str(document.get("verification_uri_complete") or ""),
            expires_in=float(document.get("expires_in") or 600), interval=float(document.get("interval") or 5),
        )
    except KeyError as exc:
        raise InfraError(f"{endpoint}: the answer lacks {exc}") from None


def _get_json(url: str, *, what: str, context: ssl.SSLContext | None = None) -> dict[str, Any]:
    return _call(urllib.request.Request(url, headers={"accept": "application/json"}), what, context)


def _post_form(url: str, form: Mapping[str, str], *, what: str) -> dict[str, Any]:
    body = urllib.parse.urlencode(dict(form)).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "content-type": "application/x-www-form-urlencoded", "accept": "application/json"})
    return _call(request, what)


def _call(request: urllib.request.Request, what: str, context: ssl.SSLContext | None = None) -> dict[str, Any]:
    url = request.full_url
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=context) as response:
            return _document(response.read(MAX_RESPONSE_BYTES), url)
    except urllib.error.HTTPError as exc:
        document = _error_document(exc)
        if "error" in document:  # RFC 6749 §5.2: a 400 (or 401) with the error's code
            raise OAuthError(str(document["error"]), str(document.get("error_description") or ""), what) from None
        raise InfraError(f"{what} ({url}) answered HTTP {exc.code}") from None
    except urllib.error.URLError as exc:
        raise InfraError(f"cannot reach {what} ({url}): {exc.reason}") from None


def _document(body: bytes, url: str) -> dict[str, Any]:
    try:
        document = json.loads(body)
    except ValueError:
        raise InfraError(f"{url}: the answer is not JSON") from None
    if not isinstance(document, dict):
        raise InfraError(f"{url}: the answer is not a JSON object")
    return document


def _error_document(exc: urllib.error.HTTPError) -> dict[str, Any]:
    try:
        document = json.loads(exc.read(MAX_RESPONSE_BYTES))
    except (ValueError, OSError):
        return {}
    return document if isinstance(document, dict) else {}
