"""The ``auth:`` section of evalsi.yaml as frozen dataclasses, checked at load with errors that name the key path.

    auth:
      mode: enforce            # or none: nobody is authenticated (development and tests only)
      jwt: {mode: strict, location: {header: {name: authorization, prefix: "Bearer "}}, providers: [...]}
      api_keys: {mode: optional, keys: [{name: otel-collector, key: "sha256:…", roles: {support: [ingest]}}]}
      mtls: {mode: optional, identities: [{subject: "spiffe://…", roles: {"*": [ingest]}}]}
      trusted_proxies: {cidrs: [10.0.0.0/8], user_header: x-forwarded-user}
      tls: {cert_file: tls.crt, key_file: tls.key, client_ca: ca.crt}
      allow_plaintext: false
      cli_login: {issuer: https://sso.example.com/realms/eng, client_id: evalsi-cli}
      max_token_bytes: 8192

docs/auth.md ("Authentication") describes every key. Nothing here reads a file or the network: a config can be
checked anywhere (``evalsi auth check``), and what it names is loaded by the parts that use it.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from evalsi.auth import _fields as read
from evalsi.auth.api_keys import API_KEY_PREFIX, ApiKey, is_key_hash

MethodMode = Literal["strict", "optional", "permissive"]
PrincipalKindRule = Literal["auto", "user", "service"]
AuthMode = Literal["enforce", "none"]
LocationKind = Literal["header", "cookie", "query"]

METHOD_MODES: Final[tuple[MethodMode, ...]] = ("strict", "optional", "permissive")
AUTH_MODES: Final[tuple[AuthMode, ...]] = ("enforce", "none")
PRINCIPAL_KIND_RULES: Final[tuple[PrincipalKindRule, ...]] = ("auto", "user", "service")
# Asymmetric algorithms only: with an HMAC algorithm the verification key is a shared secret, and a JWKS's public
# key would then let anyone sign (the classic RS256-to-HS256 confusion).
SUPPORTED_ALGORITHMS: Final = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512",
                               "EdDSA")
DEFAULT_ALGORITHMS: Final = ("RS256", "ES256", "EdDSA")
DEFAULT_MAX_TOKEN_BYTES: Final = 8 * 1024
DEFAULT_CLOCK_SKEW_S: Final = 30.0
DEFAULT_REFETCH_INTERVAL_S: Final = 10.0
DEFAULT_FETCH_TIMEOUT_S: Final = 5.0
DEFAULT_CLI_SCOPES: Final = ("openid", "profile", "email", "offline_access")


@dataclass(frozen=True)
class TokenLocation:
    """Where a bearer token or API key is read: a header (with a prefix such as ``Bearer ``), a cookie or a query
    parameter. Header names are lower-case, as ``Credentials.headers`` are."""

    kind: LocationKind = "header"
    name: str = "authorization"
    prefix: str = "Bearer "

    def describe(self) -> str:
        if self.kind == "header":
            return f"the {self.name} header" + (f" ({self.prefix.strip()} scheme)" if self.prefix.strip() else "")
        return f"the {self.name} {'cookie' if self.kind == 'cookie' else 'query parameter'}"


@dataclass(frozen=True)
class JwksSource:
    """One of ``url``, ``file``, ``inline`` (a JWKS document) or ``discovery`` (``<issuer>/.well-known/
    openid-configuration`` names the ``jwks_uri``)."""

    url: str = ""
    file: str = ""
    inline: Mapping[str, Any] | None = None
    discovery: bool = False
    # An unknown kid refetches the keys (a rotation), at most once per this many seconds per provider.
    refetch_interval_s: float = DEFAULT_REFETCH_INTERVAL_S
    timeout_s: float = DEFAULT_FETCH_TIMEOUT_S


@dataclass(frozen=True)
class ClaimsMapping:
    """Dotted claim paths (``realm_access.roles``) for the principal's fields; identity providers name them
    differently."""

    subject: str = "sub"
    name: str = "name"
    email: str = "email"
    groups: str = "groups"


@dataclass(frozen=True)
class RoleClaims:
    """Roles taken from the token: each value of ``claim`` (a string or a list of them) maps to roles per project."""

    claim: str
    map: Mapping[str, Mapping[str, tuple[str, ...]]]


@dataclass(frozen=True)
class JwtProvider:
    name: str
    issuer: str
    audiences: tuple[str, ...]
    jwks: JwksSource
    claims: ClaimsMapping = field(default_factory=ClaimsMapping)
    required_claims: tuple[str, ...] = ("exp",)
    algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    clock_skew_s: float = DEFAULT_CLOCK_SKEW_S
    role_claims: RoleClaims | None = None
    allow_insecure_jwks: bool = False
    # auto: service when the token looks like a client's own (jwt_tokens.token_kind), else user.
    principal_kind: PrincipalKindRule = "auto"


@dataclass(frozen=True)
class JwtConfig:
    mode: MethodMode = "strict"
    location: TokenLocation = field(default_factory=TokenLocation)
    providers: tuple[JwtProvider, ...] = ()


@dataclass(frozen=True)
class ApiKeysConfig:
    mode: MethodMode = "strict"
    location: TokenLocation = field(default_factory=TokenLocation)
    keys: tuple[ApiKey, ...] = ()


@dataclass(frozen=True)
class MtlsIdentity:
    """What a client certificate's principal (its SPIFFE ID, else its subject CN) is granted."""

    subject: str
    roles: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MtlsConfig:
    mode: MethodMode = "optional"
    client_ca: str = ""
    identities: tuple[MtlsIdentity, ...] = ()


@dataclass(frozen=True)
class TrustedProxies:
    cidrs: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]
    user_header: str = "x-forwarded-user"
    groups_header: str = "x-forwarded-groups"
    email_header: str = "x-forwarded-email"

    def trusts(self, peer: str) -> bool:
        try:
            address = ipaddress.ip_address(peer.strip().strip("[]"))
        except ValueError:
            return False
        return any(address in network for network in self.cidrs)


@dataclass(frozen=True)
class TlsConfig:
    cert_file: str = ""
    key_file: str = ""
    client_ca: str = ""


@dataclass(frozen=True)
class CliLogin:
    """Advertised at ``/.well-known/evalsi-auth`` for ``evalsi login``."""

    issuer: str
    client_id: str
    scopes: tuple[str, ...] = DEFAULT_CLI_SCOPES


@dataclass(frozen=True)
class AuthConfig:
    mode: AuthMode = "enforce"
    jwt: JwtConfig | None = None
    api_keys: ApiKeysConfig | None = None
    mtls: MtlsConfig | None = None
    trusted_proxies: TrustedProxies | None = None
    tls: TlsConfig | None = None
    allow_plaintext: bool = False
    cli_login: CliLogin | None = None
    max_token_bytes: int = DEFAULT_MAX_TOKEN_BYTES

    @property
    def enabled(self) -> bool:
        """False for ``mode: none``: the rest of the section stays as written, unenforced."""
        return self.mode != "none"

    @property
    def client_ca(self) -> str:
        """The CA file that verifies client certificates (``tls.client_ca``, or ``mtls.client_ca``)."""
        return (self.tls.client_ca if self.tls else "") or (self.mtls.client_ca if self.mtls else "")


_AUTH_KEYS: Final = ("mode", "jwt", "api_keys", "mtls", "trusted_proxies", "tls", "allow_plaintext", "cli_login",
                     "max_token_bytes")


def load_auth_config(document: Any, where: str = "auth") -> AuthConfig:
    """The ``auth:`` mapping (``document``) as an ``AuthConfig``; ``where`` is its key path, which every error names
    (``auth.jwt.providers[0].jwks: ...``). ``None`` is an empty section: enforced, with no method configured."""
    section = read.mapping(document, where, _AUTH_KEYS, example="{jwt: {providers: [...]}}")
    mode = read.choice(section.get("mode"), f"{where}.mode", AUTH_MODES, "enforce")
    tls = _tls(section.get("tls"), f"{where}.tls") if section.get("tls") is not None else None
    mtls = _mtls(section.get("mtls"), f"{where}.mtls") if section.get("mtls") is not None else None
    if mtls is not None and not (tls and tls.cert_file):
        raise read.refuse(f"{where}.mtls", f"client certificates need a TLS listener: set {where}.tls.cert_file "
                          "and key_file")
    if mtls is not None and tls is not None and mtls.client_ca and tls.client_ca and mtls.client_ca != tls.client_ca:
        raise read.refuse(f"{where}.mtls.client_ca", f"differs from {where}.tls.client_ca; name the CA once")
    if mtls is not None and not (mtls.client_ca or (tls and tls.client_ca)):
        raise read.refuse(f"{where}.mtls.client_ca", "the CA file that signs client certificates is required")
    return AuthConfig(
        mode=mode,
        jwt=_jwt(section.get("jwt"), f"{where}.jwt") if section.get("jwt") is not None else None,
        api_keys=_api_keys(section.get("api_keys"), f"{where}.api_keys")
        if section.get("api_keys") is not None else None,
        mtls=mtls,
        trusted_proxies=_trusted_proxies(section.get("trusted_proxies"), f"{where}.trusted_proxies")
        if section.get("trusted_proxies") is not None else None,
        tls=tls,
        allow_plaintext=read.flag(section.get("allow_plaintext"), f"{where}.allow_plaintext"),
        cli_login=_cli_login(section.get("cli_login"), f"{where}.cli_login")
        if section.get("cli_login") is not None else None,
        max_token_bytes=read.positive_int(section.get("max_token_bytes"), f"{where}.max_token_bytes",
                                          DEFAULT_MAX_TOKEN_BYTES),
    )


def _mode(value: Any, path: str, default: MethodMode) -> MethodMode:
    return read.choice(value, path, METHOD_MODES, default)


def _location(value: Any, path: str) -> TokenLocation:
    example = '{header: {name: authorization, prefix: "Bearer "}}, {cookie: NAME} or {query: NAME}'
    section = read.mapping(value, path, ("header", "cookie", "query"), example=example)
    if len(section) != 1:
        raise read.refuse(path, f"name exactly one location: {example}")
    kind, spec = next(iter(section.items()))
    if kind == "header":
        header = read.mapping(spec, f"{path}.header", ("name", "prefix"), example="{name: x-api-token, prefix: ''}")
        name = read.text(header.get("name"), f"{path}.header.name", default="authorization").lower()
        prefix = read.text(header.get("prefix"), f"{path}.header.prefix",
                           default="Bearer " if name == "authorization" else "", allow_empty=True)
        return TokenLocation("header", name, prefix)
    return TokenLocation("cookie" if kind == "cookie" else "query", read.text(spec, f"{path}.{kind}"), "")


def _jwt(value: Any, path: str) -> JwtConfig:
    section = read.mapping(value, path, ("mode", "location", "providers"))
    providers = tuple(_provider(item, f"{path}.providers[{i}]")
                      for i, item in enumerate(read.items(section.get("providers"), f"{path}.providers")))
    if not providers:
        raise read.refuse(f"{path}.providers", "name at least one provider {name, issuer, audiences, jwks}")
    for seen, attribute in (("name", "name"), ("issuer", "issuer")):
        values = [getattr(provider, attribute) for provider in providers]
        for i, item in enumerate(values):
            if item in values[:i]:
                raise read.refuse(f"{path}.providers[{i}].{seen}", f"{item!r} is used by an earlier provider; "
                                  "each provider needs its own (tokens are matched to providers by issuer)")
    location = _location(section["location"], f"{path}.location") if "location" in section else TokenLocation()
    return JwtConfig(_mode(section.get("mode"), f"{path}.mode", "strict"), location, providers)


_PROVIDER_KEYS: Final = ("name", "issuer", "audiences", "jwks", "claims", "required_claims", "algorithms",
                         "clock_skew", "role_claims", "allow_insecure_jwks", "principal_kind")


def _provider(value: Any, path: str) -> JwtProvider:
    section = read.mapping(value, path, _PROVIDER_KEYS, example="{name, issuer, audiences, jwks}")
    insecure = read.flag(section.get("allow_insecure_jwks"), f"{path}.allow_insecure_jwks")
    issuer = read.text(section.get("issuer"), f"{path}.issuer")
    algorithms = read.strings(section.get("algorithms"), f"{path}.algorithms", default=DEFAULT_ALGORITHMS,
                              allow_empty=False)
    for i, algorithm in enumerate(algorithms):
        if algorithm not in SUPPORTED_ALGORITHMS:
            why = ("unsigned tokens are never accepted" if algorithm.lower() == "none" else
                   "shared-secret (HMAC) algorithms are not accepted: a JWKS holds public keys"
                   if algorithm.upper().startswith("HS") else "not a supported algorithm")
            raise read.refuse(f"{path}.algorithms[{i}]", f"{algorithm!r}: {why}; accepted: "
                              f"{', '.join(SUPPORTED_ALGORITHMS)}")
    return JwtProvider(
        name=read.text(section.get("name"), f"{path}.name"),
        issuer=issuer,
        audiences=read.strings(_required(section, "audiences", path, "the audiences tokens must name (aud), e.g. "
                                         "[evals.si]"), f"{path}.audiences", allow_empty=False),
        jwks=_jwks(_required(section, "jwks", path, "one of {url: ...}, {file: ...}, {inline: {keys: [...]}} or "
                             "{discovery: true}"), f"{path}.jwks", issuer, insecure),
        claims=_claims(section.get("claims"), f"{path}.claims"),
        required_claims=read.strings(section.get("required_claims"), f"{path}.required_claims", default=("exp",)),
        algorithms=algorithms,
        clock_skew_s=read.seconds(section.get("clock_skew"), f"{path}.clock_skew", DEFAULT_CLOCK_SKEW_S),
        role_claims=_role_claims(section.get("role_claims"), f"{path}.role_claims")
        if section.get("role_claims") is not None else None,
        allow_insecure_jwks=insecure,
        principal_kind=read.choice(section.get("principal_kind"), f"{path}.principal_kind",
                                   PRINCIPAL_KIND_RULES, "auto"),
    )


def _required(section: Mapping[str, Any], key: str, path: str, what: str) -> Any:
    if section.get(key) is None:
        raise read.refuse(f"{path}.{key}", f"required: {what}")
    return section[key]


def _jwks(value: Any, path: str, issuer: str, insecure: bool) -> JwksSource:
    section = read.mapping(value, path, ("url", "file", "inline", "discovery", "refetch_interval", "timeout"),
                           example="{discovery: true}")
    sources = [key for key in ("url", "file", "inline") if section.get(key) is not None]
    discovery = read.flag(section.get("discovery"), f"{path}.discovery")
    if len(sources) + discovery != 1:
        raise read.refuse(path, "name exactly one of url, file, inline or discovery: true")
    scheme_ok = ("https://", "http://") if insecure else ("https://",)
    url = read.text(section.get("url"), f"{path}.url", default="")
    if url and not url.startswith(scheme_ok):
        raise read.refuse(f"{path}.url", "JWKS are fetched over https:// (allow_insecure_jwks: true permits "
                          "http:// for local development)")
    if discovery and not issuer.startswith(scheme_ok):
        raise read.refuse(f"{path}.discovery", f"discovery fetches {issuer}/.well-known/openid-configuration, "
                          "which must be https:// (allow_insecure_jwks: true permits http:// for local development)")
    inline = _inline_jwks(section.get("inline"), f"{path}.inline") if section.get("inline") is not None else None
    return JwksSource(
        url=url,
        file=read.text(section.get("file"), f"{path}.file", default=""),
        inline=inline,
        discovery=discovery,
        refetch_interval_s=read.seconds(section.get("refetch_interval"), f"{path}.refetch_interval",
                                        DEFAULT_REFETCH_INTERVAL_S),
        timeout_s=read.seconds(section.get("timeout"), f"{path}.timeout", DEFAULT_FETCH_TIMEOUT_S),
    )


def _inline_jwks(value: Any, path: str) -> Mapping[str, Any]:
    document = value
    if isinstance(value, str):
        try:
            document = json.loads(value)
        except (ValueError, RecursionError) as exc:
            raise read.refuse(path, f"not a JSON document: {exc}") from None
    if not isinstance(document, Mapping) or not isinstance(document.get("keys"), list) or not document["keys"]:
        raise read.refuse(path, 'expected a JWKS: {"keys": [{"kty": ..., "kid": ...}, ...]} with at least one key')
    return document


def _claims(value: Any, path: str) -> ClaimsMapping:
    section = read.mapping(value, path, ("subject", "name", "email", "groups"),
                           example="{groups: realm_access.roles, name: preferred_username}")
    defaults = ClaimsMapping()
    return ClaimsMapping(**{key: read.text(section.get(key), f"{path}.{key}", default=getattr(defaults, key))
                            for key in ("subject", "name", "email", "groups")})


def _role_claims(value: Any, path: str) -> RoleClaims:
    section = read.mapping(value, path, ("claim", "map"),
                           example="{claim: app_roles, map: {lead: {checkout: [editor]}}}")
    claim = read.text(section.get("claim"), f"{path}.claim")
    table = section.get("map")
    if not isinstance(table, Mapping) or not table:
        raise read.refuse(f"{path}.map", "expected claim values mapped to roles per project, like "
                          '{checkout-lead: {checkout: [editor]}, auditor: {"*": [trace-auditor]}}')
    mapped = {}
    for claim_value, roles in table.items():
        if not isinstance(claim_value, str | int) or isinstance(claim_value, bool):
            raise read.refuse(f"{path}.map.{claim_value}", "claim values are strings")
        mapped[str(claim_value)] = read.project_roles(roles, f"{path}.map.{claim_value}")
    return RoleClaims(claim, mapped)


def _api_keys(value: Any, path: str) -> ApiKeysConfig:
    section = read.mapping(value, path, ("mode", "location", "keys"))
    keys = tuple(_api_key(item, f"{path}.keys[{i}]")
                 for i, item in enumerate(read.items(section.get("keys"), f"{path}.keys")))
    for i, key in enumerate(keys):
        if any(earlier.name == key.name for earlier in keys[:i]):
            raise read.refuse(f"{path}.keys[{i}].name", f"{key.name!r} names an earlier key too; names are unique")
        if any(earlier.key_hash == key.key_hash for earlier in keys[:i]):
            raise read.refuse(f"{path}.keys[{i}].key", "the same hash as an earlier key; every key is its own secret")
    location = _location(section["location"], f"{path}.location") if "location" in section else TokenLocation()
    return ApiKeysConfig(_mode(section.get("mode"), f"{path}.mode", "strict"), location, keys)


def _api_key(value: Any, path: str) -> ApiKey:
    section = read.mapping(value, path, ("name", "key", "roles", "expires", "labels"),
                           example='{name: otel-collector, key: "sha256:…", roles: {support: [ingest]}}')
    key = read.text(section.get("key"), f"{path}.key")
    if key.startswith(API_KEY_PREFIX):
        raise read.refuse(f"{path}.key", "a plaintext API key; store only its hash: run `evalsi auth hash-key` and "
                          "put the sha256:<hex> it prints here (then treat the plaintext as exposed)")
    if not is_key_hash(key):
        raise read.refuse(f"{path}.key", "expected sha256: and 64 lower-case hex digits (`evalsi auth hash-key`)")
    return ApiKey(
        name=read.text(section.get("name"), f"{path}.name"),
        key_hash=key,
        roles=read.project_roles(section.get("roles"), f"{path}.roles"),
        expires=read.timestamp(section.get("expires"), f"{path}.expires"),
        labels=read.string_map(section.get("labels"), f"{path}.labels"),
    )


def _mtls(value: Any, path: str) -> MtlsConfig:
    section = read.mapping(value, path, ("mode", "client_ca", "identities"))
    identities: list[MtlsIdentity] = []
    for i, item in enumerate(read.items(section.get("identities"), f"{path}.identities")):
        where = f"{path}.identities[{i}]"
        entry = read.mapping(item, where, ("subject", "roles", "labels"),
                             example='{subject: "spiffe://cluster.local/ns/evals/sa/collector", roles: {...}}')
        subject = read.text(entry.get("subject"), f"{where}.subject")
        if any(identity.subject == subject for identity in identities):
            raise read.refuse(f"{where}.subject", f"{subject!r} is granted by an earlier entry too; one entry each")
        identities.append(MtlsIdentity(subject, read.project_roles(entry.get("roles"), f"{where}.roles"),
                                       read.string_map(entry.get("labels"), f"{where}.labels")))
    return MtlsConfig(_mode(section.get("mode"), f"{path}.mode", "optional"),
                      read.text(section.get("client_ca"), f"{path}.client_ca", default=""), tuple(identities))


def _trusted_proxies(value: Any, path: str) -> TrustedProxies:
    section = read.mapping(value, path, ("cidrs", "user_header", "groups_header", "email_header"))
    cidrs = read.strings(section.get("cidrs"), f"{path}.cidrs")
    if not cidrs:
        raise read.refuse(f"{path}.cidrs", "required: the source networks of the proxies whose identity headers are "
                          "trusted (e.g. [10.0.0.5/32]); headers from anywhere else are ignored")
    networks = []
    for i, cidr in enumerate(cidrs):
        try:
            networks.append(ipaddress.ip_network(cidr, strict=False))
        except ValueError:
            raise read.refuse(f"{path}.cidrs[{i}]", f"{cidr!r} is not a network like 10.0.0.0/8 or fd00::/8") from None
    defaults = TrustedProxies(())
    headers = {name: read.text(section.get(name), f"{path}.{name}", default=getattr(defaults, name)).lower()
               for name in ("user_header", "groups_header", "email_header")}
    return TrustedProxies(tuple(networks), **headers)


def _tls(value: Any, path: str) -> TlsConfig:
    section = read.mapping(value, path, ("cert_file", "key_file", "client_ca"))
    tls = TlsConfig(**{key: read.text(section.get(key), f"{path}.{key}", default="")
                       for key in ("cert_file", "key_file", "client_ca")})
    if bool(tls.cert_file) != bool(tls.key_file):
        raise read.refuse(path, "cert_file and key_file go together")
    if tls.client_ca and not tls.cert_file:
        raise read.refuse(f"{path}.client_ca", "client certificates need the listener's own cert_file and key_file")
    return tls


def _cli_login(value: Any, path: str) -> CliLogin:
    section = read.mapping(value, path, ("issuer", "client_id", "scopes"))
    return CliLogin(read.text(section.get("issuer"), f"{path}.issuer"),
                    read.text(section.get("client_id"), f"{path}.client_id"),
                    read.strings(section.get("scopes"), f"{path}.scopes", default=DEFAULT_CLI_SCOPES))
