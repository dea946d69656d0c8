"""API keys: ``evk_`` secrets, stored only as ``sha256:`` hashes, each bound to a name, project roles and labels.

The ``evk_`` prefix lets secret scanners find a leaked key. Neither the config nor the database ever holds the
plaintext: a presented key is hashed and compared with the stored hashes. Keys from evalsi.yaml are checked first;
a ``KeyLookup`` (the database's keys, which also records their last use) answers for the rest, so stored keys
plug in without this module knowing the store.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, Protocol

from evalsi.auth.principal import APIKEY_PROVIDER, Principal, Unauthenticated

API_KEY_PREFIX: Final = "evk_"
KEY_HASH_PREFIX: Final = "sha256:"
# 32 random bytes: as hard to guess as a 256-bit secret key.
_KEY_BYTES: Final = 32
_KEY_HASH = re.compile(r"sha256:[0-9a-f]{64}")


def new_api_key() -> str:
    """A fresh key: ``evk_`` and 32 random bytes, URL-safe base64 (43 characters)."""
    return API_KEY_PREFIX + secrets.token_urlsafe(_KEY_BYTES)


def hash_api_key(key: str) -> str:
    """``sha256:<64 hex>``, the only form a key is stored in."""
    return KEY_HASH_PREFIX + hashlib.sha256(key.encode("utf-8")).hexdigest()


def is_key_hash(value: str) -> bool:
    return _KEY_HASH.fullmatch(value) is not None


def looks_like_api_key(value: str) -> bool:
    return value.startswith(API_KEY_PREFIX)


@dataclass(frozen=True)
class ApiKey:
    """A stored key: what a matching presented key proves. ``key_hash`` is ``sha256:<hex>``."""

    name: str
    key_hash: str
    roles: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    expires: datetime | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    def expired(self, now: datetime) -> bool:
        return self.expires is not None and now >= self.expires

    def principal(self) -> Principal:
        return Principal(
            kind="apikey", provider=APIKEY_PROVIDER, subject=self.name, name=self.name, key_name=self.name,
            roles=dict(self.roles), labels=dict(self.labels),
        )


class KeyLookup(Protocol):
    """Finds a key that is not in evalsi.yaml by its hash (the database's keys); ``None`` when unknown or revoked.

    An implementation may record the key's last use as it answers."""

    async def __call__(self, key_hash: str) -> ApiKey | None: ...


class ApiKeyVerifier:
    """Turns a presented ``evk_`` key into the principal of its stored entry, or refuses it."""

    def __init__(
        self,
        keys: Sequence[ApiKey] = (),
        lookup: KeyLookup | None = None,
        *,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._keys = tuple(keys)
        self._lookup = lookup
        self._now = now

    async def verify(self, key: str) -> Principal:
        presented = hash_api_key(key)
        entry = self._configured(presented)
        if entry is None and self._lookup is not None:
            entry = await self._lookup(presented)
        if entry is None:
            raise Unauthenticated("unknown API key")
        if entry.expired(self._now()):
            assert entry.expires is not None
            raise Unauthenticated(f"API key {entry.name!r} expired at {entry.expires.isoformat()}")
        return entry.principal()

    def _configured(self, presented: str) -> ApiKey | None:
        # Every stored hash is compared, in constant time, so the time taken says nothing about which matched.
        found = None
        for entry in self._keys:
            if hmac.compare_digest(entry.key_hash, presented):
                found = entry
        return found
