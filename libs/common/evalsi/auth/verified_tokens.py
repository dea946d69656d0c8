"""Bearer tokens verified a moment ago, remembered by their SHA-256 so a client's next call skips the signature.

A client sends the same token with every call until it expires; verifying it each time (parse, signature, claims)
costs about half a millisecond of CPU, which a cache hit (a hash and a dict lookup) does not. An entry lives at most
``ttl_s`` (a minute by default), and never past the token's own ``exp`` plus the provider's skew, so a key the
issuer withdraws stops working within the TTL. Only the digest is kept, never the token.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from evalsi.auth.principal import Principal

DEFAULT_TTL_S: Final = 60.0
DEFAULT_MAX_ENTRIES: Final = 10_000


class VerifiedTokens:
    """A bounded, least-recently-used map of token digest to (principal, valid until)."""

    def __init__(self, *, ttl_s: float = DEFAULT_TTL_S, max_entries: int = DEFAULT_MAX_ENTRIES,
                 clock: Callable[[], float] = time.time) -> None:
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[bytes, tuple[Principal, float]] = OrderedDict()

    def get(self, token: str) -> Principal | None:
        digest = _digest(token)
        entry = self._entries.get(digest)
        if entry is None:
            return None
        principal, valid_until = entry
        if self._clock() >= valid_until:
            del self._entries[digest]
            return None
        self._entries.move_to_end(digest)
        return principal

    def put(self, token: str, principal: Principal, *, expires_at: float | None) -> None:
        """Remember a verified token; ``expires_at`` is its ``exp`` plus the skew the provider allows (wall clock
        seconds), ``None`` when it has none."""
        valid_until = self._clock() + self._ttl_s
        if expires_at is not None:
            valid_until = min(valid_until, expires_at)
        self._entries[_digest(token)] = (principal, valid_until)
        self._entries.move_to_end(_digest(token))
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
