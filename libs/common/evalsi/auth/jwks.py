"""A provider's signing keys (its JWKS), fetched from a URL, a file, inline JSON or OIDC discovery, and cached.

Keys rotate: a token signed with a ``kid`` the cache does not know refetches the JWKS, but at most once per
``refetch_interval`` per provider, so a stream of tokens with made-up kids cannot turn the server into a load
generator against the identity provider. Responses are bounded in size and time, fetched over HTTPS (plain HTTP
only with ``allow_insecure_jwks``), and never followed through redirects, which could downgrade the scheme.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import aiohttp
import jwt

from evalsi.auth.config import JwtProvider
from evalsi.auth.principal import Unauthenticated

# A JWKS is a few kilobytes; a megabyte leaves room for large key sets and stops a hostile endpoint early.
MAX_JWKS_BYTES: Final = 1024 * 1024
# Keys fetched longer ago than this are refetched when next used (keys an issuer withdrew stop working); a failed
# refetch keeps the old ones, so an identity provider's outage does not log everybody out.
MAX_KEY_AGE_S: Final = 3600.0
_KEY_TYPES: Final = {"RS": ("RSA",), "PS": ("RSA",), "ES": ("EC",), "Ed": ("OKP",)}
_CURVES: Final = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}


class JwksUnavailable(Exception):
    """The keys could not be fetched or read; the message says from where and why (never a token)."""


class JsonFetcher:
    """GETs a JSON document over aiohttp with a deadline and a size cap; one session for every provider."""

    def __init__(self, *, ssl_context: ssl.SSLContext | None = None, max_bytes: int = MAX_JWKS_BYTES) -> None:
        self._ssl = ssl_context
        self._max_bytes = max_bytes
        self._session: aiohttp.ClientSession | None = None

    async def get(self, url: str, timeout_s: float) -> Any:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        try:
            async with self._session.get(
                url, timeout=aiohttp.ClientTimeout(total=timeout_s), allow_redirects=False,
                headers={"accept": "application/json"}, ssl=self._ssl if self._ssl is not None else True,
            ) as response:
                if response.status != 200:
                    raise JwksUnavailable(f"{url} answered HTTP {response.status}")
                body = await response.content.read(self._max_bytes + 1)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise JwksUnavailable(f"{url}: {type(exc).__name__}: {exc}".rstrip(": ")) from None
        if len(body) > self._max_bytes:
            raise JwksUnavailable(f"{url} answered more than {self._max_bytes} bytes")
        return _json(body, url)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class JwksCache:
    """The keys of one provider (its JWKS's signature keys, each parsed on first use per algorithm); ``key()``
    answers the verification key of one token."""

    def __init__(self, provider: JwtProvider, fetcher: JsonFetcher, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._provider = provider
        self._fetcher = fetcher
        self._clock = clock
        self._keys: tuple[Mapping[str, Any], ...] = ()
        # Parsed keys by (id of their JWK in ``_keys``, algorithm); emptied whenever ``_keys`` is replaced.
        self._parsed: dict[tuple[int, str], jwt.PyJWK] = {}
        self._loaded_at: float | None = None
        self._attempted_at: float | None = None
        self._lock = asyncio.Lock()
        self.fetches = 0  # how many times the keys were (re)read, successfully or not
        self.last_error = ""  # why the last read failed (empty after a success)

    async def key(self, kid: str | None, algorithm: str) -> jwt.PyJWK:
        """The key that verifies a token with this ``kid`` and ``algorithm``; an unknown kid refetches once per
        refetch interval. Raises ``Unauthenticated`` naming the provider and kid when there is none."""
        seen = self.fetches
        if self._loaded_at is None or self._clock() - self._loaded_at > MAX_KEY_AGE_S:
            await self._refresh(seen, force=False)
            seen = self.fetches
        found = _select(self._keys, kid, algorithm)
        if found is None and kid is not None and self._refetch_allowed():
            await self._refresh(seen, force=True)
            found = _select(self._keys, kid, algorithm)
        if found is None:
            name = self._provider.name
            if not self._keys and self._loaded_at is None:
                raise Unauthenticated(f"the signing keys of provider {name!r} are unavailable; try again shortly")
            if kid is None:
                raise Unauthenticated(f"the token names no kid and provider {name!r} has no single {algorithm} key")
            raise Unauthenticated(f"no {algorithm} key with kid {_short(kid)} in the JWKS of provider {name!r}")
        # Parsing a JWK into a key object costs about as much as checking a signature: once per key and algorithm.
        parsed = self._parsed.get((id(found), algorithm))
        if parsed is None:
            try:
                parsed = jwt.PyJWK(dict(found), algorithm=algorithm)
            except jwt.PyJWKError as exc:
                raise Unauthenticated(f"the key {_short(kid)} of provider {self._provider.name!r} is unusable: "
                                      f"{exc}") from None
            self._parsed[(id(found), algorithm)] = parsed
        return parsed

    async def refresh(self) -> None:
        """Read the keys now (a warm-up at start); failures are left for the first token to report."""
        await self._refresh(self.fetches, force=True)

    def _refetch_allowed(self) -> bool:
        last = self._attempted_at
        if last is None:
            return True
        # Inline keys change only with the config; there is nothing to refetch.
        return self._provider.jwks.inline is None and self._clock() - last >= self._provider.jwks.refetch_interval_s

    async def _refresh(self, seen: int, *, force: bool) -> None:
        """Fetch the keys, unless another request did since this one looked at them (``seen`` fetches): then
        its keys are as new as a fetch now would get."""
        async with self._lock:
            if self.fetches != seen:
                return
            if not force and not self._refetch_allowed():
                return
            self._attempted_at = self._clock()
            try:
                self._keys, self._parsed = _usable(await self._document()), {}
                self._loaded_at = self._clock()
                self.last_error = ""
            except JwksUnavailable as exc:
                # Keep the keys already held; the caller reports the unknown kid (or unavailability) to the client
                # without the internal address, which stays here for the service's log.
                self.last_error = str(exc)
            finally:
                # Counted once the answer is in, so requests that looked while it was on its way take it.
                self.fetches += 1

    async def _document(self) -> Any:
        source = self._provider.jwks
        if source.inline is not None:
            return source.inline
        if source.file:
            return await asyncio.to_thread(_read_file, Path(source.file))
        url = source.url or await self._discover()
        return await self._fetcher.get(url, source.timeout_s)

    async def _discover(self) -> str:
        issuer = self._provider.issuer
        address = issuer.rstrip("/") + "/.well-known/openid-configuration"
        document = await self._fetcher.get(address, self._provider.jwks.timeout_s)
        if not isinstance(document, Mapping):
            raise JwksUnavailable(f"{address}: not a discovery document")
        # OIDC Discovery 1.0 §4.3: the issuer a document states must be the one it was fetched for.
        if document.get("issuer") != issuer:
            raise JwksUnavailable(f"{address} states issuer {document.get('issuer')!r}, not {issuer!r}")
        jwks_uri = document.get("jwks_uri")
        secure = ("https://", "http://") if self._provider.allow_insecure_jwks else ("https://",)
        if not isinstance(jwks_uri, str) or not jwks_uri.startswith(secure):
            raise JwksUnavailable(f"{address}: jwks_uri {jwks_uri!r} is not an https:// URL")
        return jwks_uri


def _read_file(path: Path) -> Any:
    try:
        with path.open("rb") as handle:
            body = handle.read(MAX_JWKS_BYTES + 1)
    except OSError as exc:
        raise JwksUnavailable(f"{path}: {exc.strerror or exc}") from None
    if len(body) > MAX_JWKS_BYTES:
        raise JwksUnavailable(f"{path} is larger than {MAX_JWKS_BYTES} bytes")
    return _json(body, str(path))


def _json(body: bytes, where: str) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        raise JwksUnavailable(f"{where} did not answer JSON") from None


def _usable(document: Any) -> tuple[Mapping[str, Any], ...]:
    """The signature keys of a JWKS document (encryption keys and keys PyJWT cannot read are left out)."""
    if not isinstance(document, Mapping) or not isinstance(document.get("keys"), list):
        raise JwksUnavailable('not a JWKS document ({"keys": [...]})')
    keys = []
    for entry in document["keys"]:
        if not isinstance(entry, Mapping) or entry.get("use", "sig") != "sig":
            continue
        try:
            jwt.PyJWK(dict(entry))
        except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
            continue
        keys.append(entry)
    return tuple(keys)


def _select(keys: Sequence[Mapping[str, Any]], kid: str | None, algorithm: str) -> Mapping[str, Any] | None:
    fits = [key for key in keys if _fits(key, algorithm) and (kid is None or key.get("kid") == kid)]
    # Without a kid only an unambiguous key will do; guessing among several would accept any of them.
    return fits[0] if len(fits) == 1 or (fits and kid is not None) else None


def _fits(key: Mapping[str, Any], algorithm: str) -> bool:
    """Whether a JWK can verify ``algorithm``: its own ``alg`` (when stated) and its key type and curve must agree,
    so a key published for one algorithm never verifies another."""
    if key.get("alg") not in (None, algorithm):
        return False
    if key.get("kty") not in _KEY_TYPES.get(algorithm[:2], ()):
        return False
    if algorithm in _CURVES:
        return key.get("crv") == _CURVES[algorithm]
    return algorithm != "EdDSA" or key.get("crv") in ("Ed25519", "Ed448")


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
