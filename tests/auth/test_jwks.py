"""JWKS from a real aiohttp server on loopback: discovery, a URL, a file; rotation on an unknown kid, rate-limited;
a discovery document for another issuer, oversized and broken answers."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from auth_helpers import AUDIENCE, IdentityProvider, SigningKey, claims, jwks, tls_contexts

from evalsi.auth.authenticator import Authenticator
from evalsi.auth.config import load_auth_config
from evalsi.auth.jwks import MAX_JWKS_BYTES, JsonFetcher
from evalsi.auth.principal import Credentials, Unauthenticated


@pytest.fixture
async def idp() -> AsyncIterator[IdentityProvider]:
    provider = await IdentityProvider(keys=[SigningKey.generate("ES256", "2026-11")]).start()
    yield provider
    await provider.stop()


def _authenticator(idp: IdentityProvider, jwks_source: dict[str, Any], *, insecure: bool = True,
                   fetcher: JsonFetcher | None = None, clock: Callable[[], float] = time.monotonic) -> Authenticator:
    config = load_auth_config({"jwt": {"providers": [{
        "name": "corp", "issuer": idp.issuer, "audiences": [AUDIENCE], "jwks": jwks_source,
        "allow_insecure_jwks": insecure}]}})
    return Authenticator(config, fetcher=fetcher, clock=clock)


async def _authenticate(authenticator: Authenticator, key: SigningKey, issuer: str) -> str:
    token = key.sign(claims(iss=issuer))
    principal = await authenticator.authenticate(Credentials("http", headers={"authorization": f"Bearer {token}"}))
    return principal.subject


async def test_discovery_finds_the_jwks_and_verifies_tokens(idp: IdentityProvider) -> None:
    authenticator = _authenticator(idp, {"discovery": True})
    try:
        assert await _authenticate(authenticator, idp.keys[0], idp.issuer) == "5f1c-user"
        assert await _authenticate(authenticator, idp.keys[0], idp.issuer) == "5f1c-user"
        # One discovery and one JWKS fetch serve every later token.
        assert idp.requests == ["/realms/eng/.well-known/openid-configuration", "/realms/eng/certs"]
    finally:
        await authenticator.aclose()


async def test_discovery_of_a_document_for_another_issuer_is_refused(idp: IdentityProvider) -> None:
    idp.stated_issuer = "https://someone-else.example.test"
    authenticator = _authenticator(idp, {"discovery": True})
    try:
        with pytest.raises(Unauthenticated, match="signing keys of provider 'corp' are unavailable"):
            await _authenticate(authenticator, idp.keys[0], idp.issuer)
        # The document was read, its issuer did not match, and its jwks_uri was never followed.
        assert idp.jwks_fetches() == 0
    finally:
        await authenticator.aclose()


async def test_an_unknown_kid_refetches_once_per_interval(idp: IdentityProvider) -> None:
    now = [1000.0]
    authenticator = _authenticator(idp, {"url": idp.jwks_url}, clock=lambda: now[0])
    try:
        await authenticator.start()
        assert idp.jwks_fetches() == 1
        now[0] += 10  # the default interval (10 s) has passed since the keys were fetched
        # The issuer rotates: a new key is published and tokens are signed with it.
        rotated = SigningKey.generate("RS256", "2026-12")
        idp.keys.append(rotated)
        assert await _authenticate(authenticator, rotated, idp.issuer) == "5f1c-user"
        assert idp.jwks_fetches() == 2
        # A second unknown kid within the interval: refused without another fetch.
        stranger = SigningKey.generate("RS256", "made-up")
        for _ in range(5):
            now[0] += 1.5
            with pytest.raises(Unauthenticated, match="no RS256 key with kid 'made-up'"):
                await _authenticate(authenticator, stranger, idp.issuer)
        assert idp.jwks_fetches() == 2
        # Known kids still verify without fetching.
        assert await _authenticate(authenticator, idp.keys[0], idp.issuer) == "5f1c-user"
        assert idp.jwks_fetches() == 2
        # Once the interval is over, a newly published key is picked up by one more fetch.
        now[0] += 2.5
        idp.keys.append(stranger)
        assert await _authenticate(authenticator, stranger, idp.issuer) == "5f1c-user"
        assert idp.jwks_fetches() == 3
    finally:
        await authenticator.aclose()


async def test_concurrent_tokens_with_a_new_kid_share_one_refetch(idp: IdentityProvider) -> None:
    authenticator = _authenticator(idp, {"url": idp.jwks_url, "refetch_interval": "0s"})
    try:
        await authenticator.start()
        rotated = SigningKey.generate("EdDSA", "ed-1")
        idp.keys.append(rotated)
        subjects = await asyncio.gather(*(_authenticate(authenticator, rotated, idp.issuer) for _ in range(8)))
        assert subjects == ["5f1c-user"] * 8
        assert idp.jwks_fetches() == 2
    finally:
        await authenticator.aclose()


async def test_an_oversized_or_broken_jwks_is_not_used(idp: IdentityProvider) -> None:
    for body in (b"{" + b" " * (MAX_JWKS_BYTES + 10) + b"}", b"<html>not json</html>", b'{"keys": "no"}',
                 b"[" * 5000 + b"]" * 5000):
        idp.jwks_body = body
        authenticator = _authenticator(idp, {"url": idp.jwks_url})
        try:
            with pytest.raises(Unauthenticated, match="unavailable"):
                await _authenticate(authenticator, idp.keys[0], idp.issuer)
        finally:
            await authenticator.aclose()


async def test_an_unreachable_jwks_refuses_tokens_and_recovers(idp: IdentityProvider) -> None:
    idp.jwks_status = 503
    authenticator = _authenticator(idp, {"url": idp.jwks_url, "refetch_interval": "0s"})
    try:
        with pytest.raises(Unauthenticated, match="signing keys of provider 'corp' are unavailable") as refused:
            await _authenticate(authenticator, idp.keys[0], idp.issuer)
        # The client is not told internal addresses; the reason is kept for the service's log.
        assert idp.base not in str(refused.value)
        assert authenticator.jwks_errors() == {"corp": f"{idp.jwks_url} answered HTTP 503"}
        idp.jwks_status = 200
        assert await _authenticate(authenticator, idp.keys[0], idp.issuer) == "5f1c-user"
        assert authenticator.jwks_errors() == {}
    finally:
        await authenticator.aclose()


async def test_keys_from_a_file_are_reread_on_an_unknown_kid(idp: IdentityProvider, tmp_path: Path) -> None:
    path = tmp_path / "jwks.json"
    first, second = SigningKey.generate("ES256", "f1"), SigningKey.generate("ES256", "f2")
    path.write_text(json.dumps(jwks(first)))
    authenticator = _authenticator(idp, {"file": str(path), "refetch_interval": "0s"})
    try:
        assert await _authenticate(authenticator, first, idp.issuer) == "5f1c-user"
        path.write_text(json.dumps(jwks(first, second)))
        assert await _authenticate(authenticator, second, idp.issuer) == "5f1c-user"
    finally:
        await authenticator.aclose()


async def test_encryption_keys_in_a_jwks_are_never_used_to_verify(idp: IdentityProvider) -> None:
    key = SigningKey.generate("RS256", "enc-1")
    document = {"keys": [{**key.jwk(), "use": "enc"}]}
    authenticator = _authenticator(idp, {"inline": document})
    with pytest.raises(Unauthenticated, match="no RS256 key with kid 'enc-1'"):
        await _authenticate(authenticator, key, idp.issuer)


async def test_discovery_over_https_verifies_the_servers_certificate(tmp_path: Path) -> None:
    server_context, client_context = tls_contexts(tmp_path)
    idp = await IdentityProvider(keys=[SigningKey.generate("RS256", "tls-1")]).start(server_context)
    try:
        trusting = _authenticator(idp, {"discovery": True}, insecure=False,
                                  fetcher=JsonFetcher(ssl_context=client_context))
        try:
            assert await _authenticate(trusting, idp.keys[0], idp.issuer) == "5f1c-user"
        finally:
            await trusting.aclose()
        # The default trust store does not know the test CA: the keys are not fetched, tokens are refused.
        default = _authenticator(idp, {"discovery": True}, insecure=False)
        try:
            with pytest.raises(Unauthenticated, match="unavailable"):
                await _authenticate(default, idp.keys[0], idp.issuer)
            assert "certificate" in default.jwks_errors()["corp"].lower()
        finally:
            await default.aclose()
    finally:
        await idp.stop()


async def test_redirects_are_not_followed(idp: IdentityProvider) -> None:
    authenticator = _authenticator(idp, {"url": idp.jwks_url.replace("/certs", "/moved")})
    try:
        with pytest.raises(Unauthenticated, match="unavailable"):
            await _authenticate(authenticator, idp.keys[0], idp.issuer)
        assert authenticator.jwks_errors()["corp"].endswith("answered HTTP 302")
        assert idp.jwks_fetches() == 0
    finally:
        await authenticator.aclose()


async def test_a_slow_jwks_times_out(idp: IdentityProvider) -> None:
    idp.jwks_delay_s = 1.0
    authenticator = _authenticator(idp, {"url": idp.jwks_url, "timeout": "200ms"})
    try:
        # The keys would come after a second; waited for, they would verify the token.
        with pytest.raises(Unauthenticated, match="unavailable"):
            await _authenticate(authenticator, idp.keys[0], idp.issuer)
        assert "TimeoutError" in authenticator.jwks_errors()["corp"]
    finally:
        await authenticator.aclose()
