"""``audit.retention``: how long audit entries are kept, and the periodic purge that enforces it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from evalsi.durations import DURATION_HELP, parse_duration
from evalsi.errors import BadInputError

log = structlog.get_logger("evalsi.audit")

DEFAULT_RETENTION_S = 2160 * 3600.0  # 2160h: 90 days
# Deletes entries older than a unix time; returns how many (``AuditStore.purge_audit``).
Purge = Callable[[float], Awaitable[int]]


def parse_retention(value: Any, where: str = "audit.retention") -> float:
    """Seconds from evalsi.yaml's ``audit.retention`` (``2160h``, ``30d``); at least one hour."""
    if value is None:
        return DEFAULT_RETENTION_S
    try:
        seconds = float(parse_duration(value).removesuffix("s"))
    except ValueError as exc:
        raise BadInputError(f"{where}: {exc}; expected {DURATION_HELP}, at least 1h") from None
    if seconds < 3600:
        raise BadInputError(f"{where}: {value!r} is shorter than the 1h minimum")
    return seconds


async def purge_expired(purge: Purge, retention_s: float, *, now: float | None = None) -> int:
    """Delete the entries older than ``retention_s``; the number deleted."""
    cutoff = (time.time() if now is None else now) - retention_s
    deleted = await purge(cutoff)
    if deleted:
        log.info("audit entries purged", deleted=deleted, older_than=cutoff)
    return deleted


async def purge_periodically(purge: Purge, retention_s: float, *, interval_s: float = 3600.0) -> None:
    """Purge now and then every ``interval_s`` until cancelled; a failed purge is logged and tried next time."""
    while True:
        try:
            await purge_expired(purge, retention_s)
        except Exception as exc:  # the store is down: the next round purges what this one could not
            log.warning("audit purge failed", error=str(exc))
        await asyncio.sleep(interval_s)
