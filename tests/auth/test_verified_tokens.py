"""Verified tokens are remembered briefly, and never past their own expiry."""

from __future__ import annotations

import asyncio
import time

from auth_helpers import AUDIENCE, ISSUER, SigningKey, claims, jwks

from evalsi.auth.authenticator import Authenticator
from evalsi.auth.config import load_auth_config
from evalsi.auth.principal import Credentials, Principal, Unauthenticated
from evalsi.auth.verified_tokens import VerifiedTokens

ADA = Principal(kind="user", provider="corp", subject="ada")
BOB = Principal(kind="user", provider="corp", subject="bob")


def test_an_entry_lives_until_its_ttl_or_the_tokens_expiry_whichever_is_first() -> None:
    now = [1000.0]
    cache = VerifiedTokens(ttl_s=60, clock=lambda: now[0])
    cache.put("token-a", ADA, expires_at=1030.0)
    cache.put("token-b", BOB, expires_at=None)
    assert cache.get("token-a") is ADA and cache.get("token-b") is BOB and cache.get("token-c") is None
    now[0] = 1030.0
    assert cache.get("token-a") is None and cache.get("token-b") is BOB
    now[0] = 1060.0
    assert cache.get("token-b") is None and len(cache) == 0


def test_the_least_recently_used_entry_goes_first() -> None:
    cache = VerifiedTokens(max_entries=2)
    cache.put("a", ADA, expires_at=None)
    cache.put("b", BOB, expires_at=None)
    assert cache.get("a") is ADA
    cache.put("c", BOB, expires_at=None)
    assert cache.get("b") is None and cache.get("a") is ADA and cache.get("c") is BOB and len(cache) == 2


async def test_a_remembered_token_is_refused_once_it_expires() -> None:
    signer = SigningKey.generate("ES256", "es-cache")
    config = load_auth_config({"jwt": {"providers": [{"name": "corp", "issuer": ISSUER, "audiences": [AUDIENCE],
                                                      "jwks": {"inline": jwks(signer)}, "clock_skew": "0s"}]}})
    authenticator = Authenticator(config)
    expires = int(time.time()) + 2
    credentials = Credentials("http", headers={"authorization": f"Bearer {signer.sign(claims(exp=expires))}"})
    assert (await authenticator.authenticate(credentials)).subject == "5f1c-user"
    assert (await authenticator.authenticate(credentials)).subject == "5f1c-user"
    await asyncio.sleep(max(0.0, expires - time.time()) + 0.05)
    try:
        await authenticator.authenticate(credentials)
    except Unauthenticated as refused:
        assert "expired" in str(refused)
    else:
        raise AssertionError("an expired token was accepted from the cache")
