"""Secure by default: what a served process may listen on given its ``auth``, ``rbac`` and ``authorization``
sections, and the gate (and TLS) it serves with.

- On loopback without an ``auth`` section, nothing changes: every caller is on this machine, nobody is
  authenticated, every call passes (as before issue 13).
- On any other address, a process refuses to start without an ``auth`` section. Running unauthenticated there
  takes ``auth: {mode: none}``, ``--no-auth`` or ``EVALSI_NO_AUTH=1`` (the rest of the auth config stays,
  unenforced), and each start logs :data:`NO_AUTH_WARNING`.
- Bearer tokens and API keys on a non-loopback plaintext listener need ``auth.allow_plaintext: true`` (which
  says TLS terminates in front); ``auth.tls`` puts the listeners themselves behind TLS.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evalsi.errors import BadInputError
from evalsi.hosts import is_loopback

if TYPE_CHECKING:
    from evalsi.auth.config import AuthConfig
    from evalsi.authz.attributes import AttributeSources
    from evalsi.gate.access import DecisionHook, Gate
    from evalsi.gate.tls import ServerTls

# The evalsi.yaml sections a served process reads for identity and access.
SECTIONS = ("auth", "rbac", "authorization", "audit")
NO_AUTH_ENV = "EVALSI_NO_AUTH"
NO_AUTH_WARNING = (
    "running WITHOUT AUTHENTICATION ({why}): anyone who can reach {host} can create, read and cancel runs, read "
    "traces and send spans to any project; configure evalsi.yaml's auth section (docs/auth.md) to require "
    "credentials"
)


@dataclass(frozen=True)
class AccessSettings:
    """The identity and access sections as configured, and whether ``--no-auth`` turned enforcement off."""

    auth: AuthConfig | None = None  # None: evalsi.yaml has no auth section
    rbac: Mapping[str, Any] | None = None
    authorization: Mapping[str, Any] | None = None
    no_auth: bool = False
    # The sections as written, for the services `evalsi serve` starts (they read and check them again).
    sections: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_document(cls, document: Mapping[str, Any], *, no_auth: bool = False, where: str = "") -> AccessSettings:
        """From evalsi.yaml's sections (each checked here, errors naming the key path); nothing read yet."""
        prefix = f"{where}: " if where else ""
        auth = None
        if "auth" in document:
            from evalsi.auth.config import load_auth_config

            try:
                auth = load_auth_config(document.get("auth"), "auth")
            except BadInputError as exc:
                raise BadInputError(f"{prefix}{exc}") from None
        sections = {key: document[key] for key in SECTIONS if key in document}
        settings = cls(auth, document.get("rbac"), document.get("authorization"), no_auth, sections)
        if settings.rbac is not None or settings.authorization is not None:
            from evalsi.authz.authorizer import Authorizer

            try:  # roles, bindings and rules checked at load: a typo refuses the start, never grants too much
                Authorizer.from_config(settings.rbac, settings.authorization)
            except BadInputError as exc:
                raise BadInputError(f"{prefix}{exc}") from None
        if "audit" in document:
            from evalsi.audit.config import load_audit_config

            try:  # retention and export checked at load, like the other sections
                load_audit_config(document["audit"])
            except BadInputError as exc:
                raise BadInputError(f"{prefix}{exc}") from None
        return settings

    @property
    def enforced(self) -> bool:
        return self.auth is not None and self.auth.enabled and not self.no_auth

    def unauthenticated_reason(self) -> str:
        """Why this process authenticates nobody although an ``auth`` section or a flag was given ('' otherwise)."""
        if self.no_auth:
            return f"--no-auth or {NO_AUTH_ENV}=1"
        if self.auth is not None and not self.auth.enabled:
            return "auth: {mode: none}"
        return ""

    def check(self, host: str, flag: str = "--host") -> str | None:
        """Refuse what must not start (BadInputError naming the way out); the warning to log at every start, or
        None."""
        loopback = is_loopback(host)
        if not loopback and self.auth is None and not self.no_auth:
            raise BadInputError(
                f"{flag} {host}: not a loopback address, and there is no auth section: Evals.si refuses to serve "
                "other machines unauthenticated. Configure evalsi.yaml's auth section (docs/auth.md: JWT providers, "
                f"API keys, mTLS), or run unauthenticated on purpose with auth: {{mode: none}}, --no-auth or "
                f"{NO_AUTH_ENV}=1"
            )
        auth = self.auth
        if self.enforced and auth is not None and not loopback and auth.tls is None and not auth.allow_plaintext \
                and (auth.jwt is not None or auth.api_keys is not None):
            raise BadInputError(
                f"{flag} {host}: bearer tokens and API keys would cross the network in plaintext; set auth.tls "
                "(cert_file, key_file) to serve TLS, or auth.allow_plaintext: true when TLS terminates in front"
            )
        why = self.unauthenticated_reason()
        return NO_AUTH_WARNING.format(why=why, host=host) if why else None

    @property
    def serves_tls(self) -> bool:
        return self.auth is not None and self.auth.tls is not None and bool(self.auth.tls.cert_file)

    def tls(self, *, reload_interval_s: float | None = None) -> ServerTls | None:
        """The listeners' TLS (``auth.tls``; served even with enforcement off), or None."""
        if self.auth is None or self.auth.tls is None or not self.serves_tls:
            return None
        from evalsi.gate.tls import RELOAD_INTERVAL_S, ServerTls, TlsFiles

        files = TlsFiles(self.auth.tls.cert_file, self.auth.tls.key_file, self.auth.client_ca)
        return ServerTls(files, reload_interval_s=RELOAD_INTERVAL_S if reload_interval_s is None else reload_interval_s)

    def login(self) -> dict[str, Any]:
        """What ``/.well-known/evalsi-auth`` publishes for ``evalsi login`` (empty: nothing to publish)."""
        login = self.auth.cli_login if self.auth is not None else None
        if login is None:
            return {}
        return {"issuer": login.issuer, "client_id": login.client_id, "scopes": list(login.scopes)}

    def gate(self, *, key_lookup: Any = None, sources: AttributeSources | None = None,
             on_decision: DecisionHook | None = None, authorizer: Any = None,
             metrics: Any = None) -> Gate | None:
        """The gate to serve with, or None when nobody is authenticated. ``authorizer`` replaces the one from
        config (the api adds roles and bindings stored in the database); ``metrics``: a Prometheus registry for
        the external authorizer's metrics."""
        if not self.enforced or self.auth is None:
            return None
        from evalsi.auth.authenticator import Authenticator
        from evalsi.authz.attributes import DEFAULT_SOURCES
        from evalsi.authz.authorizer import Authorizer
        from evalsi.authz.config import load_authorization_config
        from evalsi.gate.access import Gate

        external_config = load_authorization_config(self.authorization).external
        external = None
        if external_config is not None:  # authorization.ext_authz: asked after each local decision
            from evalsi.authz.external import ExternalAuthorizer
            from evalsi.authz.external_metrics import ExternalAuthzMetrics

            external = ExternalAuthorizer.from_config(
                external_config, metrics=ExternalAuthzMetrics(metrics) if metrics is not None else None)
        return Gate(
            Authenticator(self.auth, key_lookup=key_lookup),
            authorizer or Authorizer.from_config(self.rbac, self.authorization),
            sources=sources or DEFAULT_SOURCES,
            on_decision=on_decision,
            external=external,
        )


def refuse_ungated_listener(host: str, gated: bool, *, open_on_purpose: bool, what: str) -> None:
    """The listeners' own check, below ``AccessSettings.check``: one built in code without a gate serves beyond
    loopback only when its caller says it is unauthenticated on purpose (``--no-auth``, ``auth: {mode: none}``)."""
    if not gated and not open_on_purpose and not is_loopback(host):
        raise BadInputError(
            f"{what} on {host}: not a loopback address, and no gate authenticates its callers; give it the gate "
            f"of an auth section, or say it is open on purpose (--no-auth or {NO_AUTH_ENV}=1)")

