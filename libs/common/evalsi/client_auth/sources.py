"""Which credential a client sends, and the header value for each call.

Highest first: the flag (``--token``, ``--api-key``; ``Client(token=..., api_key=...)``), the environment
(``EVALSI_TOKEN``, ``EVALSI_TOKEN_FILE``, ``EVALSI_API_KEY``, or a GitHub Actions job's own OIDC token when
``EVALSI_OIDC_AUDIENCE`` is set), then the login ``evalsi login`` cached for the server. Both kinds travel as
``authorization: Bearer <value>``, the server's default token location; an ``evk_`` prefix tells an API key from a
JWT. A source gives the header value per call: a token file is read again (projected tokens rotate), a cached
login is refreshed when it expires, a GitHub token is fetched again when it lapses.

``origin`` names where a credential came from (``--token``, ``$EVALSI_TOKEN``, ``the login cached in ...``) for
messages; the credential itself is never in a message, a repr or a log line.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from evalsi.auth.api_keys import API_KEY_PREFIX
from evalsi.client_auth.cache import CachedLogin, CredentialCache, cache_path
from evalsi.client_auth.github_actions import AUDIENCE_ENV, GithubActionsToken, github_actions_token
from evalsi.errors import BadInputError

TOKEN_ENV = "EVALSI_TOKEN"
TOKEN_FILE_ENV = "EVALSI_TOKEN_FILE"
API_KEY_ENV = "EVALSI_API_KEY"
BEARER = "Bearer "
MAX_CREDENTIAL_BYTES = 16 * 1024  # the servers' token size cap is of this order; a file bigger is not a token


class CredentialSource(Protocol):
    """Something that gives the ``authorization`` header value for the next call."""

    @property
    def origin(self) -> str: ...

    def authorization(self) -> str: ...


@dataclass(frozen=True, repr=False)
class StaticCredential:
    """A token or API key given as a value (a flag, a variable, ``Client(token=...)``)."""

    value: str
    origin: str

    def authorization(self) -> str:
        return BEARER + self.value

    def __repr__(self) -> str:
        return f"StaticCredential(origin={self.origin!r})"


@dataclass(frozen=True)
class TokenFileCredential:
    """A token read from a file at every call: Kubernetes projected service-account tokens are rotated in place."""

    path: Path
    origin: str

    def authorization(self) -> str:
        try:
            with self.path.open("rb") as file:
                data = file.read(MAX_CREDENTIAL_BYTES + 1)
        except OSError as exc:
            raise BadInputError(f"{self.origin}: cannot read {self.path} ({exc.strerror or exc})") from None
        if len(data) > MAX_CREDENTIAL_BYTES:
            raise BadInputError(f"{self.origin}: {self.path} is over {MAX_CREDENTIAL_BYTES} bytes; not a token")
        return BEARER + check_credential(data.decode("utf-8", "replace").strip(), self.origin)


@dataclass
class CachedLoginCredential:
    """The login ``evalsi login`` cached for ``server``, refreshed (under the cache's lock) when it expires."""

    cache: CredentialCache
    server: str
    login: CachedLogin
    refresh: Callable[[CachedLogin], CachedLogin]
    clock: Callable[[], float] = time.time
    origin: str = field(init=False)

    def __post_init__(self) -> None:
        self.origin = f"the login cached in {self.cache.path} for {self.server}"

    def authorization(self) -> str:
        if self.login.expired(self.clock()):
            self.login = self._refreshed()
        return BEARER + self.login.access_token

    def _refreshed(self) -> CachedLogin:
        again = f"run `evalsi login --server {self.server}` again"
        with self.cache.locked():
            # Another command may have refreshed it while this one waited for the lock: a refresh token the
            # issuer rotates works once.
            current = self.cache.get(self.server)
            if current is None:
                raise BadInputError(f"the login for {self.server} was removed (evalsi logout); {again}")
            if not current.expired(self.clock()):
                return current
            if not current.refresh_token:
                raise BadInputError(f"the login for {self.server} expired and has no refresh token; {again}")
            try:
                renewed = self.refresh(current)
            except BadInputError as exc:  # invalid_grant: the refresh token expired or was revoked
                raise BadInputError(f"the login for {self.server} expired and could not be refreshed ({exc}); "
                                    f"{again}") from None
            self.cache.put(self.server, renewed)
            return renewed


def refresh_login(login: CachedLogin, *, clock: Callable[[], float] = time.time) -> CachedLogin:
    """A cached login with new tokens from its issuer's token endpoint (the refresh token kept if not rotated)."""
    from evalsi.client_auth.oauth import refresh

    tokens = refresh(login.token_endpoint, login.client_id, login.refresh_token)
    return replace(login, access_token=tokens.access_token, refresh_token=tokens.refresh_token or login.refresh_token,
                   expires_at=clock() + tokens.expires_in if tokens.expires_in else 0.0)


def check_credential(value: str, origin: str) -> str:
    """A credential that fits in one header line; the message names its origin, never the value."""
    if not value:
        raise BadInputError(f"{origin}: empty")
    if len(value.encode()) > MAX_CREDENTIAL_BYTES:
        raise BadInputError(f"{origin}: over {MAX_CREDENTIAL_BYTES} bytes; not a token or key")
    if any(c.isspace() or not c.isprintable() for c in value):
        raise BadInputError(f"{origin}: holds spaces or control characters; pass the token or key alone")
    return value


def _api_key(value: str, origin: str) -> StaticCredential:
    check_credential(value, origin)
    if not value.startswith(API_KEY_PREFIX):
        raise BadInputError(f"{origin}: Evals.si API keys start with {API_KEY_PREFIX!r} (`evalsi auth new-key` makes "
                            "one); a JWT goes in --token or EVALSI_TOKEN")
    return StaticCredential(value, origin)


def resolve_credentials(
    server: str,
    *,
    token: str | None = None,
    api_key: str | None = None,
    token_origin: str = "--token",
    api_key_origin: str = "--api-key",
    env: Mapping[str, str],
    cache: CredentialCache,
    fetch_github_token: Callable[[Mapping[str, str]], GithubActionsToken] = github_actions_token,
) -> CredentialSource | None:
    """The credential for calls to ``server`` by the precedence above; None when nothing gives one (the server
    then decides whether anonymous calls are allowed). Two credentials at one level are refused, naming both."""
    if token and api_key:
        raise BadInputError(f"{token_origin} and {api_key_origin} both given; pass one")
    if token:
        return StaticCredential(check_credential(token, token_origin), token_origin)
    if api_key:
        return _api_key(api_key, api_key_origin)
    given = [name for name in (TOKEN_ENV, TOKEN_FILE_ENV, API_KEY_ENV, AUDIENCE_ENV) if env.get(name)]
    if len(given) > 1:
        raise BadInputError(f"{' and '.join('$' + name for name in given)} are all set; set one of them")
    if env.get(TOKEN_ENV):
        return StaticCredential(check_credential(env[TOKEN_ENV], f"${TOKEN_ENV}"), f"${TOKEN_ENV}")
    if env.get(TOKEN_FILE_ENV):
        return TokenFileCredential(Path(env[TOKEN_FILE_ENV]), f"${TOKEN_FILE_ENV}")
    if env.get(API_KEY_ENV):
        return _api_key(env[API_KEY_ENV], f"${API_KEY_ENV}")
    if env.get(AUDIENCE_ENV):
        return fetch_github_token(env)
    login = cache.get(server)
    if login is None:
        return None
    return CachedLoginCredential(cache, server, login, refresh_login)


def default_credentials(server: str, *, token: str | None = None, api_key: str | None = None,
                        token_origin: str = "--token", api_key_origin: str = "--api-key") -> CredentialSource | None:
    """This process's credential for ``server``: its environment and its user's credential cache."""
    env = dict(os.environ)
    return resolve_credentials(server, token=token, api_key=api_key, token_origin=token_origin,
                               api_key_origin=api_key_origin, env=env,
                               cache=CredentialCache(cache_path(env, Path.home())))
