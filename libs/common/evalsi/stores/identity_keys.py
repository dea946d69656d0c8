"""The database's API keys as the authenticator's ``KeyLookup``, recording last use without a write per request.

A key's use is noted in memory and written at most once per ``touch_interval_s`` per key, in one background write
for every key due, so a collector sending a thousand batches a second costs the database one UPDATE a minute.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime

import structlog

from evalsi.auth.api_keys import ApiKey

from .identity import IdentityStore, StoredApiKey

log = structlog.get_logger("evalsi.auth")


def database_key_name(project: str, name: str) -> str:
    """The principal name of a database key: ``<project>/<name>`` (names are unique per project only), so its
    principal id is ``apikey/<project>/<name>`` and bindings name it ``key:<project>/<name>``."""
    return f"{project}/{name}"


def as_api_key(stored: StoredApiKey) -> ApiKey:
    expires = datetime.fromtimestamp(stored.expires_at, UTC) if stored.expires_at is not None else None
    return ApiKey(name=database_key_name(stored.project, stored.name), key_hash=stored.key_hash,
                  roles={stored.project: tuple(stored.roles)}, expires=expires, labels=dict(stored.labels))


class StoredKeyLookup:
    """``KeyLookup`` over an ``IdentityStore``: revoked keys are not found; expiry is the verifier's to judge."""

    def __init__(self, store: IdentityStore, *, touch_interval_s: float = 60.0,
                 clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._interval = touch_interval_s
        self._clock = clock
        # Per key hash: when its last use was written (or queued to be).
        self._touched: dict[str, float] = {}
        self._due: dict[str, float] = {}
        self._writer: asyncio.Task[None] | None = None

    async def __call__(self, key_hash: str) -> ApiKey | None:
        stored = await self._store.find_api_key(key_hash)
        if stored is None:
            return None
        self._note_use(key_hash)
        return as_api_key(stored)

    def _note_use(self, key_hash: str) -> None:
        now = self._clock()
        if now - self._touched.get(key_hash, float("-inf")) < self._interval:
            return
        self._touched[key_hash] = now
        self._due[key_hash] = now
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_due(), name="api-key-last-use")

    async def _write_due(self) -> None:
        due, self._due = self._due, {}
        try:
            await self._store.record_key_use(due)
        except Exception as exc:  # last use is informational: a failed write is tried again at the next use
            for key_hash in due:
                self._touched.pop(key_hash, None)
            log.warning("could not record API key use", keys=len(due), error=str(exc))

    async def flush(self) -> None:
        """Wait for the pending write (tests; a service's stop)."""
        if self._writer is not None:
            await self._writer
        if self._due:
            await self._write_due()
