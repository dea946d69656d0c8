"""Bearer tokens (JWTs) verified against the configured providers, and their claims mapped to a ``Principal``.

A token's ``iss`` picks its provider; its header's ``alg`` must be in that provider's allowlist (never ``none``,
never HMAC); the signature, ``aud``, ``exp``/``nbf``/``iat`` (with the provider's clock skew) and the required
claims are checked by PyJWT with the key the provider's JWKS names. The size cap applies before any parsing.
Refusals name what is wrong (expired, audience, issuer, kid) and never the token.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Any, Final

import jwt

from evalsi.auth.config import JwtConfig, JwtProvider, RoleClaims
from evalsi.auth.jwks import JwksCache
from evalsi.auth.principal import Principal, PrincipalKind, Unauthenticated
from evalsi.auth.verified_tokens import VerifiedTokens

_SEGMENT: Final = re.compile(r"[A-Za-z0-9_-]+={0,2}")
# Claims that name the OAuth client a token was issued to (OIDC azp, RFC 9068 client_id, Okta cid).
_CLIENT_CLAIMS: Final = ("client_id", "azp", "cid")


def check_size(token: str, limit: int) -> None:
    size = len(token.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise Unauthenticated(f"the credential is {size} bytes; the limit is {limit} (auth.max_token_bytes)")


class JwtVerifier:
    """Verifies bearer tokens against a ``JwtConfig``'s providers, each with its own JWKS cache."""

    def __init__(self, config: JwtConfig, caches: Mapping[str, JwksCache], *, max_token_bytes: int,
                 verified: VerifiedTokens | None = None) -> None:
        self._providers = {provider.issuer: provider for provider in config.providers}
        self._caches = caches
        self._max_token_bytes = max_token_bytes
        self._verified = verified if verified is not None else VerifiedTokens()

    async def verify(self, token: str) -> Principal:
        check_size(token, self._max_token_bytes)
        known = self._verified.get(token)
        if known is not None:
            return known
        header, unverified = _peek(token)
        provider = self._provider_of(unverified)
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm not in provider.algorithms:
            raise Unauthenticated(f"algorithm {_short(algorithm)} is not accepted for provider {provider.name!r} "
                                  f"(accepted: {', '.join(provider.algorithms)})")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise Unauthenticated("malformed bearer token: its kid is not a string")
        key = await self._caches[provider.name].key(kid, algorithm)
        claims = _decode(token, key, algorithm, provider)
        principal = principal_from_claims(claims, provider)
        expires = claims.get("exp")
        self._verified.put(token, principal, expires_at=float(expires) + provider.clock_skew_s
                           if isinstance(expires, int | float) else None)
        return principal

    def unverified_claims(self, token: str) -> Mapping[str, Any]:
        """The claims of a token that failed verification, decoded without checking anything (permissive mode);
        empty when the token is oversized or not a JWT at all."""
        try:
            check_size(token, self._max_token_bytes)
            return _peek(token)[1]
        except Unauthenticated:
            return {}

    def _provider_of(self, claims: Mapping[str, Any]) -> JwtProvider:
        issuer = claims.get("iss")
        if not isinstance(issuer, str):
            raise Unauthenticated("the bearer token names no issuer (iss)")
        provider = self._providers.get(issuer)
        if provider is None:
            raise Unauthenticated(f"unknown token issuer {_short(issuer)}; accepted: "
                                  f"{', '.join(sorted(self._providers))}")
        return provider


def _peek(token: str) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """The header and claims, unverified: only to choose the provider and algorithm that then verify them.

    Read here in one pass rather than through PyJWT, which checks the encoding a character at a time in Python
    (each parse about 0.15 ms); PyJWT's strict parse still runs once, when the token is verified."""
    parts = token.split(".")
    if len(parts) != 3 or not all(_SEGMENT.fullmatch(part) for part in parts[:2]):
        raise Unauthenticated("malformed bearer token: not a signed JWT (header.claims.signature)")
    try:
        header, claims = (json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))) for part in parts[:2])
    except (ValueError, binascii.Error, RecursionError):
        # RecursionError: JSON nested thousands deep, which fits in the size cap and is no token.
        raise Unauthenticated("malformed bearer token: its header or claims are not base64url JSON") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise Unauthenticated("malformed bearer token: its header or claims are not a JSON object")
    return header, claims


def _decode(token: str, key: jwt.PyJWK, algorithm: str, provider: JwtProvider) -> dict[str, Any]:
    try:
        return jwt.decode(
            token, key, algorithms=[algorithm], audience=list(provider.audiences), issuer=provider.issuer,
            leeway=provider.clock_skew_s,
            options={"require": list(provider.required_claims), "verify_signature": True, "verify_exp": True,
                     "verify_nbf": True, "verify_iat": True, "verify_aud": True, "verify_iss": True},
        )
    except jwt.ExpiredSignatureError:
        raise Unauthenticated(f"the token has expired (exp, {provider.clock_skew_s:g}s skew allowed)") from None
    except jwt.ImmatureSignatureError as exc:
        claim = "iat" if "iat" in str(exc) else "nbf"
        raise Unauthenticated(f"the token is not valid yet ({claim} is in the future)") from None
    except jwt.MissingRequiredClaimError as exc:
        raise Unauthenticated(f"the token lacks the required claim {exc.claim!r}") from None
    except jwt.InvalidAudienceError:
        raise Unauthenticated(f"the token's audience (aud) is not one of: {', '.join(provider.audiences)}") from None
    except jwt.InvalidIssuerError:
        raise Unauthenticated(f"the token's issuer is not {provider.issuer!r}") from None
    except jwt.InvalidSignatureError:
        raise Unauthenticated(f"the token's signature does not verify with provider {provider.name!r}'s key") from None
    except jwt.DecodeError:
        raise Unauthenticated("malformed bearer token: not a signed JWT (header.claims.signature)") from None
    except jwt.InvalidTokenError as exc:
        raise Unauthenticated(f"invalid bearer token: {type(exc).__name__}") from None


def principal_from_claims(claims: Mapping[str, Any], provider: JwtProvider) -> Principal:
    """Verified claims to a principal, through the provider's claims mapping and role_claims."""
    mapping = provider.claims
    subject = claim(claims, mapping.subject)
    if isinstance(subject, int) and not isinstance(subject, bool):
        subject = str(subject)
    if not isinstance(subject, str) or not subject:
        raise Unauthenticated(f"the token has no subject claim {mapping.subject!r}")
    email = _string(claim(claims, mapping.email))
    kind: PrincipalKind = (token_kind(claims, email) if provider.principal_kind == "auto"
                           else provider.principal_kind)
    verified = claims.get("email_verified")
    return Principal(
        kind=kind, provider=provider.name, subject=subject,
        name=_string(claim(claims, mapping.name)) or subject,
        email=email, email_verified=bool(email) and (verified is True or verified == "true"),
        groups=_strings(claim(claims, mapping.groups)), claims=dict(claims),
        roles=roles_from_claims(claims, provider.role_claims) if provider.role_claims else {},
    )


def token_kind(claims: Mapping[str, Any], email: str) -> PrincipalKind:
    """``service`` for a token a client got for itself, ``user`` otherwise.

    A token is a service's when it carries no email and: a client claim (client_id, azp, cid) equals its sub
    (client credentials in Okta, Keycloak, RFC 9068), its sub is ``<client>@clients`` (Auth0), it says
    ``gty: client-credentials`` (Auth0) or ``idtyp: app`` (Entra ID), or it is a Kubernetes service account's
    (``system:serviceaccount:…``). Anything else is a user; ``principal_kind`` on the provider overrides the rule.
    """
    if email:
        return "user"
    subject = claims.get("sub")
    if any(claims.get(name) == subject for name in _CLIENT_CLAIMS if subject is not None):
        return "service"
    client = claims.get("azp")
    if isinstance(subject, str) and (subject.startswith("system:serviceaccount:")
                                     or (isinstance(client, str) and subject == f"{client}@clients")):
        return "service"
    if claims.get("gty") == "client-credentials" or claims.get("idtyp") == "app":
        return "service"
    return "user"


def roles_from_claims(claims: Mapping[str, Any], rule: RoleClaims) -> dict[str, tuple[str, ...]]:
    """Each value of the role claim that the map names adds its roles, per project, in the map's order."""
    roles: dict[str, list[str]] = {}
    for value in _strings(claim(claims, rule.claim)):
        for project, names in rule.map.get(value, {}).items():
            held = roles.setdefault(project, [])
            held.extend(name for name in names if name not in held)
    return {project: tuple(names) for project, names in roles.items()}


def claim(claims: Mapping[str, Any], path: str) -> Any:
    """The claim at a dotted path (``realm_access.roles``). A claim whose own name holds dots (Auth0's
    ``https://example.com/groups``) is found by its whole name first."""
    if path in claims:
        return claims[path]
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _strings(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,) if value else ()
    if isinstance(value, list):
        return tuple(item for item in value if isinstance(item, str) and item)
    return ()


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
