"""The one authenticator: what a request presents (``Credentials``) to the ``Principal`` it proves.

Which method applies, in order: an API key when the token location holds ``evk_…``; else a bearer token (a
JWT); else a verified client certificate; else a trusted proxy's identity headers. Each method has a mode:

- strict: a bad credential is refused (401), and so is a request with no credential at all;
- optional: a bad credential is refused; no credential reaches authorization as ``ANONYMOUS``;
- permissive: nothing is refused; a bad credential becomes an anonymous principal that carries the reason
  (``credential_error``) and, for a token, its claims decoded without verification (``unverified_claims``).

A request with no credential is refused when any configured method is strict (and when none is configured at
all: the default is deny), else it is anonymous. Reasons never contain the credential itself.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from evalsi.auth.api_keys import ApiKeyVerifier, KeyLookup, looks_like_api_key
from evalsi.auth.config import AuthConfig, MethodMode, TokenLocation
from evalsi.auth.jwks import JsonFetcher, JwksCache
from evalsi.auth.jwt_tokens import JwtVerifier, check_size
from evalsi.auth.mtls import certificate_principal
from evalsi.auth.principal import ANONYMOUS, Credentials, Principal, Unauthenticated
from evalsi.auth.proxy import proxy_principal

REALM: Final = "evalsi"
_UNSAFE_IN_QUOTES = re.compile(r'["\\\x00-\x1f\x7f]')


class MissingCredential(Unauthenticated):
    """No credential at all where one is required (a 401 whose challenge carries no ``error``, RFC 6750 §3.1)."""


class Authenticator:
    """Built once per service from the ``auth:`` section (and, from the database, a ``KeyLookup``).

    ``start()`` warms the JWKS caches; ``aclose()`` closes the HTTP session they share.
    """

    def __init__(self, config: AuthConfig, *, key_lookup: KeyLookup | None = None,
                 fetcher: JsonFetcher | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._fetcher = fetcher or JsonFetcher()
        # ``clock`` times the JWKS refetch interval (monotonic seconds; tests step it).
        self._caches = {provider.name: JwksCache(provider, self._fetcher, clock=clock)
                        for provider in (config.jwt.providers if config.jwt else ())}
        self._jwt = (JwtVerifier(config.jwt, self._caches, max_token_bytes=config.max_token_bytes)
                     if config.jwt else None)
        keys_config = config.api_keys
        self._keys = (ApiKeyVerifier(keys_config.keys if keys_config else (), key_lookup)
                      if keys_config is not None or key_lookup is not None else None)
        self._modes: dict[str, MethodMode] = {}
        if config.jwt:
            self._modes["jwt"] = config.jwt.mode
        if self._keys is not None:
            self._modes["api_keys"] = keys_config.mode if keys_config else "strict"
        if config.mtls:
            self._modes["mtls"] = config.mtls.mode

    async def start(self) -> None:
        """Read every provider's keys now, so the first request does not wait; a failure is retried on use."""
        for cache in self._caches.values():
            await cache.refresh()

    def jwks_errors(self) -> dict[str, str]:
        """Why each provider's keys could not be read last time (by provider name), for the service's log."""
        return {name: cache.last_error for name, cache in self._caches.items() if cache.last_error}

    async def aclose(self) -> None:
        await self._fetcher.aclose()

    async def authenticate(self, credentials: Credentials) -> Principal:
        """The principal ``credentials`` prove; ``Unauthenticated`` (401) when the modes refuse them. With
        ``auth: {mode: none}`` everybody is ``ANONYMOUS``."""
        if not self.config.enabled:
            return ANONYMOUS
        key = self._presented(credentials, "api_keys")
        token = self._presented(credentials, "jwt")
        for value in (key, token):
            if value is not None and looks_like_api_key(value):
                return await self._api_key(value)
        if token is not None:
            return await self._bearer(token)
        if key is not None:
            return self._refused("api_keys", Unauthenticated(
                f"{self._location('api_keys').describe()} holds no evk_ API key"
                + (f" (bearer tokens are read from {self._location('jwt').describe()})" if self._jwt else
                   " and this server accepts no bearer tokens (auth.jwt is not configured)")))
        if credentials.peer_certificate is not None and self.config.mtls is not None:
            return self._certificate(credentials.peer_certificate)
        if self.config.trusted_proxies is not None:
            proxied = proxy_principal(credentials, self.config.trusted_proxies)
            if proxied is not None:
                return proxied
        if "strict" in self._modes.values() or not self._modes:
            raise MissingCredential(self._missing_reason())
        return ANONYMOUS

    def www_authenticate(self, error: Unauthenticated | None = None) -> str:
        """The ``WWW-Authenticate`` value of a 401 (RFC 6750 §3): the realm, and for a bad credential
        ``error="invalid_token"`` with the reason (which never contains the credential)."""
        challenge = f'Bearer realm="{REALM}"'
        if error is None or isinstance(error, MissingCredential):
            return challenge
        description = _UNSAFE_IN_QUOTES.sub("'", str(error))[:300]
        return f'{challenge}, error="invalid_token", error_description="{description}"'

    async def _api_key(self, key: str) -> Principal:
        if self._keys is None:
            return self._refused("api_keys", Unauthenticated(
                "API keys are not accepted by this server (auth.api_keys is not configured)"))
        try:
            check_size(key, self.config.max_token_bytes)
            return await self._keys.verify(key)
        except Unauthenticated as refused:
            return self._refused("api_keys", refused)

    async def _bearer(self, token: str) -> Principal:
        assert self._jwt is not None  # a token is only read from jwt's location when jwt is configured
        try:
            return await self._jwt.verify(token)
        except Unauthenticated as refused:
            return self._refused("jwt", refused, self._jwt.unverified_claims(token))

    def _certificate(self, der: bytes) -> Principal:
        assert self.config.mtls is not None
        try:
            return certificate_principal(der, self.config.mtls.identities)
        except Unauthenticated as refused:
            return self._refused("mtls", refused)

    def _refused(self, method: str, refused: Unauthenticated,
                 unverified: Mapping[str, Any] | None = None) -> Principal:
        if self._modes.get(method, "strict") != "permissive":
            raise refused
        return Principal(kind="anonymous", subject=ANONYMOUS.subject, credential_error=str(refused),
                         unverified_claims=dict(unverified or {}))

    def _location(self, method: str) -> TokenLocation:
        section = self.config.api_keys if method == "api_keys" else self.config.jwt
        return section.location if section is not None else TokenLocation()

    def _presented(self, credentials: Credentials, method: str) -> str | None:
        """The value at ``method``'s token location, or ``None`` when the method is off or nothing is there."""
        if method not in self._modes:
            return None
        return read_token(credentials, self._location(method))

    def _missing_reason(self) -> str:
        if not self._modes and self.config.trusted_proxies is None:
            return "no authentication method is configured (auth.jwt, auth.api_keys or auth.mtls), so every " \
                   "request is refused"
        ways = []
        if self.config.jwt:
            ways.append(f"a bearer token in {self.config.jwt.location.describe()}")
        if self._keys is not None:
            ways.append(f"an evk_ API key in {self._location('api_keys').describe()}")
        if self.config.mtls:
            ways.append("a client certificate")
        if self.config.trusted_proxies is not None:
            ways.append("come through a trusted proxy")
        return "authentication required: send " + " or ".join(ways)


def read_token(credentials: Credentials, location: TokenLocation) -> str | None:
    """The credential at ``location``: a header's value after its prefix (the scheme matched case-insensitively,
    RFC 7235), a cookie or a query parameter. ``None`` when absent or empty."""
    if location.kind == "cookie":
        value = credentials.cookies.get(location.name)
    elif location.kind == "query":
        value = credentials.query.get(location.name)
    else:
        value = credentials.headers.get(location.name)
        if value is not None and location.prefix:
            if value[: len(location.prefix)].lower() != location.prefix.lower():
                # Another scheme (Basic ...) in the header: not ours to read, and not a token.
                return None
            value = value[len(location.prefix):]
    value = value.strip() if value is not None else None
    return value or None
