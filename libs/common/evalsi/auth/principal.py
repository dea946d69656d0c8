"""Who is calling: the principal a credential proves, and the credentials a request carries.

These are the contract between the authenticator (``evalsi.auth``), the authorizer (``evalsi.authz``)
and the one enforcement point in the api and ingest. Tokens and API keys never leave this layer: a
``Principal`` holds what was proved (claims, names, roles), never the credential itself, so it is safe
to log, to store as ``created_by`` and to hand to workers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from evalsi.errors import EvalsiError

PrincipalKind = Literal["user", "service", "apikey", "anonymous"]
Transport = Literal["grpc", "http", "otlp-grpc", "otlp-http"]

# The provider name of principals proved by an API key, a client certificate or a trusted proxy header.
APIKEY_PROVIDER = "apikey"
MTLS_PROVIDER = "mtls"
PROXY_PROVIDER = "proxy"
# Every project, in a roles mapping (``{"*": ["viewer"]}``) and in bindings.
ANY_PROJECT = "*"


class Unauthenticated(EvalsiError):
    """No acceptable credential (UNAUTHENTICATED / 401). The message says why without echoing the credential."""


class PermissionDenied(EvalsiError):
    """A proved principal may not do this (PERMISSION_DENIED / 403). The message names the action and project."""


@dataclass(frozen=True)
class Principal:
    """A caller as proved by one credential.

    ``provider`` and ``subject`` are unique together (``corp`` / ``5f1c…``, ``apikey`` / ``otel-collector``).
    ``roles`` are the roles the credential itself grants, per project (``*`` for every project): an API
    key's configured roles and the roles mapped from a token's ``role_claims``. Bindings in the rbac
    config add more at authorization time.
    """

    kind: PrincipalKind
    provider: str = ""
    subject: str = ""
    name: str = ""
    email: str = ""
    email_verified: bool = False
    groups: tuple[str, ...] = ()
    # The verified JWT claims (empty for API keys, certificates and anonymous callers).
    claims: Mapping[str, Any] = field(default_factory=dict)
    roles: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    # The API key's name when kind == "apikey" (bindings name it ``key:<name>``).
    key_name: str = ""
    # Permissive mode only: why the presented credential was not accepted (``token expired``), on an anonymous
    # principal. Empty when no credential was presented or it was accepted.
    credential_error: str = ""
    # Permissive mode only: a rejected token's claims, decoded WITHOUT verification, for policy use (CEL rules may
    # read them knowing anyone could have written them). Never merged into ``claims``, groups or roles.
    unverified_claims: Mapping[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        """``provider/subject``: what runs record as ``created_by`` and audit entries name."""
        return f"{self.provider}/{self.subject}" if self.provider else self.subject

    @property
    def authenticated(self) -> bool:
        return self.kind != "anonymous"


ANONYMOUS = Principal(kind="anonymous", subject="anonymous")


# Request headers that carry credentials: never shown to CEL rules (``request.headers``), never logged or stored.
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key", "x-evalsi-api-key"})


def visible_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """``headers`` without the ones carrying credentials."""
    return {name: value for name, value in headers.items() if name.lower() not in CREDENTIAL_HEADERS}


@dataclass(frozen=True)
class Credentials:
    """What a request presents, gathered by the transport before any handler runs.

    ``headers`` have lower-case names (gRPC metadata or HTTP headers); ``peer`` is the remote IP
    address; ``peer_certificate`` is the DER of a verified client certificate on a mutual-TLS listener;
    ``secure`` says the connection itself is TLS.
    """

    transport: Transport
    headers: Mapping[str, str] = field(default_factory=dict)
    cookies: Mapping[str, str] = field(default_factory=dict)
    query: Mapping[str, str] = field(default_factory=dict)
    peer: str = ""
    peer_certificate: bytes | None = None
    secure: bool = False
