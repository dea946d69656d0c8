"""``authorization.ext_authz``: an external policy decision point the server asks after its own decision.

    authorization:
      ext_authz:
        authzen: {url: https://pdp.internal/access/v1/evaluation, ca_file: pdp-ca.pem,
                  headers_from: {authorization: {env: EVALSI_PDP_AUTHORIZATION}}}
        # or  grpc: {address: 127.0.0.1:9191}           (Envoy ext_authz, e.g. OPA's Envoy plugin)
        #     grpc: {address: opa.internal:9191, tls: {ca_file: ca.pem, cert_file: c.pem, key_file: k.pem}}
        mode: require          # require: local and external must both allow; decide: the external decision is
                               # final once the local deny and require rules passed
        timeout: 200ms         # past it the call is denied (fail closed)
        cache_ttl: 30s         # 0 turns the decision cache off
        max_cache_entries: 10000

The endpoint comes from the server's configuration only, never from a request. AuthZEN is spoken over https://
except to a loopback address; gRPC to anything but loopback needs ``tls``. Headers for the PDP (its own
credential) are named by reference (an environment variable or a file), never written in evalsi.yaml.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from evalsi.auth import _fields as read
from evalsi.hosts import is_loopback

ExternalMode = Literal["require", "decide"]
MODES: tuple[ExternalMode, ...] = ("require", "decide")
DEFAULT_TIMEOUT_S = 0.2
DEFAULT_CACHE_TTL_S = 30.0
DEFAULT_MAX_CACHE_ENTRIES = 10_000
_KEYS = ("authzen", "grpc", "mode", "timeout", "cache_ttl", "max_cache_entries")


@dataclass(frozen=True)
class AuthzenEndpoint:
    """An AuthZEN PDP's access evaluation URL, and the headers sent with every request (already resolved)."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)  # may carry the PDP's credential
    ca_file: str = ""  # the CA that signed the PDP's certificate, when not one the system trusts

    def describe(self) -> str:
        parts = urlsplit(self.url)  # without a query string, which might carry something secret
        return f"AuthZEN PDP {parts.scheme}://{parts.netloc}{parts.path}"


@dataclass(frozen=True)
class GrpcTls:
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    server_name: str = ""


@dataclass(frozen=True)
class EnvoyEndpoint:
    """An Envoy ext_authz gRPC server (``envoy.service.auth.v3.Authorization/Check``)."""

    address: str
    tls: GrpcTls | None = None

    def describe(self) -> str:
        return f"ext_authz gRPC {self.address}"


@dataclass(frozen=True)
class ExternalAuthzConfig:
    endpoint: AuthzenEndpoint | EnvoyEndpoint
    mode: ExternalMode = "require"
    timeout_s: float = DEFAULT_TIMEOUT_S
    cache_ttl_s: float = DEFAULT_CACHE_TTL_S
    max_cache_entries: int = DEFAULT_MAX_CACHE_ENTRIES


def load_external_config(raw: Any, path: str = "authorization.ext_authz") -> ExternalAuthzConfig:
    """The ``ext_authz`` section, every error naming its key path and what is accepted."""
    section = read.mapping(raw, path, _KEYS, example="{authzen: {url: https://pdp/access/v1/evaluation}}")
    named = [key for key in ("authzen", "grpc") if section.get(key) is not None]
    if len(named) != 1:
        raise read.refuse(path, "name exactly one external authorizer: authzen: {url: ...} (an AuthZEN PDP) or "
                                "grpc: {address: host:port} (Envoy ext_authz, e.g. OPA's Envoy plugin)")
    endpoint: AuthzenEndpoint | EnvoyEndpoint
    if named[0] == "authzen":
        endpoint = _authzen(section["authzen"], f"{path}.authzen")
    else:
        endpoint = _grpc(section["grpc"], f"{path}.grpc")
    timeout_s = read.seconds(section.get("timeout"), f"{path}.timeout", DEFAULT_TIMEOUT_S)
    if timeout_s <= 0:
        raise read.refuse(f"{path}.timeout", "must be more than 0 (a call past it is denied)")
    return ExternalAuthzConfig(
        endpoint=endpoint,
        mode=read.choice(section.get("mode"), f"{path}.mode", MODES, "require"),
        timeout_s=timeout_s,
        cache_ttl_s=read.seconds(section.get("cache_ttl"), f"{path}.cache_ttl", DEFAULT_CACHE_TTL_S),
        max_cache_entries=read.positive_int(section.get("max_cache_entries"), f"{path}.max_cache_entries",
                                            DEFAULT_MAX_CACHE_ENTRIES),
    )


def _authzen(raw: Any, path: str) -> AuthzenEndpoint:
    section = read.mapping(raw, path, ("url", "headers_from", "ca_file"),
                           example="{url: https://pdp/access/v1/evaluation}")
    url = read.text(section.get("url"), f"{path}.url")
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise read.refuse(f"{path}.url", f"expected an https:// URL of the PDP's evaluation endpoint, got {url!r}")
    if parts.username or parts.password:
        raise read.refuse(f"{path}.url", "credentials do not go in the URL; send them with headers_from")
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise read.refuse(f"{path}.url", "the PDP is asked over https:// (http:// only to a loopback address)")
    ca_file = read.text(section.get("ca_file"), f"{path}.ca_file", default="")
    if ca_file and not Path(ca_file).is_file():
        raise read.refuse(f"{path}.ca_file", f"{ca_file} is not a readable file (the PEM of the PDP's CA)")
    return AuthzenEndpoint(url, _headers_from(section.get("headers_from"), f"{path}.headers_from"), ca_file)


def _headers_from(raw: Any, path: str) -> dict[str, str]:
    """``{header: {env: NAME} | {file: path}}``: each header's value read now, so a missing one refuses the start."""
    headers: dict[str, str] = {}
    if raw is not None and not isinstance(raw, Mapping):
        raise read.refuse(path, "expected a mapping like {authorization: {env: EVALSI_PDP_AUTHORIZATION}}")
    for name, source in (raw or {}).items():
        where = f"{path}.{name}"
        if not isinstance(name, str) or not name.strip() or any(c in name for c in " :\r\n"):
            raise read.refuse(where, "a header name (letters, digits and dashes)")
        spec = read.mapping(source, where, ("env", "file"), example="{env: EVALSI_PDP_AUTHORIZATION}")
        if len([key for key in ("env", "file") if spec.get(key) is not None]) != 1:
            raise read.refuse(where, "name exactly one of env (an environment variable) or file (a path)")
        if spec.get("env") is not None:
            variable = read.text(spec["env"], f"{where}.env")
            value = os.environ.get(variable)
            if not value:
                raise read.refuse(f"{where}.env", f"the environment variable {variable} is not set")
        else:
            file = read.text(spec["file"], f"{where}.file")
            try:
                value = Path(file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise read.refuse(f"{where}.file", f"cannot read {file}: {exc.strerror}") from None
        if "\n" in value or "\r" in value:
            raise read.refuse(where, "a header value is one line")
        headers[name.lower()] = value
    return headers


def _grpc(raw: Any, path: str) -> EnvoyEndpoint:
    section = read.mapping(raw, path, ("address", "tls"), example="{address: 127.0.0.1:9191}")
    address = read.text(section.get("address"), f"{path}.address")
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or "/" in address:
        raise read.refuse(f"{path}.address", f"expected host:port of the ext_authz server, got {address!r}")
    tls = None
    if section.get("tls") is not None:
        keys = ("ca_file", "cert_file", "key_file", "server_name")
        spec = read.mapping(section["tls"], f"{path}.tls", keys)
        tls = GrpcTls(**{key: read.text(spec.get(key), f"{path}.tls.{key}", default="") for key in keys})
        if bool(tls.cert_file) != bool(tls.key_file):
            raise read.refuse(f"{path}.tls", "a client certificate needs both cert_file and key_file")
    if tls is None and not is_loopback(host):
        raise read.refuse(f"{path}.tls", f"{address} is not a loopback address: the ext_authz server is reached over "
                                         "TLS there (tls: {ca_file: ...}, or tls: {} for the system's roots)")
    return EnvoyEndpoint(address, tls)
