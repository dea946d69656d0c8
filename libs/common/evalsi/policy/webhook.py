"""Signed webhook alerts: the payload, its signature, and a sender over aiohttp with retries.

The signature is DESIGN.md's: ``Evalsi-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>``, over
the exact bytes sent. Each attempt is signed afresh (its own ``t``), so a receiver can refuse stale timestamps.
``Evalsi-Delivery`` carries the alert's key, the same on every retry and every replica, for receivers to
deduplicate.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

SIGNATURE_HEADER = "Evalsi-Signature"
DELIVERY_HEADER = "Evalsi-Delivery"


def alert_payload(
    *,
    policy: str,
    project: str,
    rule: str,
    window_start: float,
    window_s: float,
    values: Mapping[str, float | int],
    key: str,
) -> bytes:
    """The JSON body of an alert, compact with sorted keys (the bytes that are signed)."""
    document = {
        "type": "evalsi.alert",
        "policy": policy,
        "project": project,
        "rule": rule,
        "window": {"start": window_start, "end": window_start + window_s},
        "values": dict(values),
        "key": key,
    }
    return json.dumps(document, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def sign(secret: str | bytes, body: bytes, timestamp: int) -> str:
    """The ``Evalsi-Signature`` header value for ``body`` sent at ``timestamp`` (Unix seconds).

    An empty secret is refused (ValueError): anyone can compute a signature with an empty key.
    """
    if not secret:
        raise ValueError("refusing to sign with an empty secret: anyone could forge the signature")
    key = secret.encode() if isinstance(secret, str) else secret
    digest = hmac.new(key, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def verify(
    secret: str | bytes, body: bytes, header: str, *, now: float | None = None, tolerance_s: float = 300
) -> bool:
    """Check a signature header; false for a bad signature, a malformed header or a timestamp too far off."""
    if not secret:
        return False
    parts = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance_s:
        return False
    expected = sign(secret, body, timestamp).split("v1=", 1)[1]
    return hmac.compare_digest(expected, parts.get("v1", ""))


@dataclass(frozen=True)
class Delivery:
    delivered: bool
    attempts: int
    status: int | None  # the last HTTP status, None when no answer came
    error: str = ""


class WebhookSender:
    """POSTs signed payloads; retries connection failures, 429 and 5xx with exponential backoff.

    Other 4xx answers are final (the receiver refused the request itself). ``clock`` and ``sleep`` are
    injectable so tests neither wait nor depend on the wall clock.
    """

    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        attempts: int = 5,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        timeout_s: float = 10.0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        if attempts < 1:
            raise ValueError(f"attempts {attempts}: must be at least 1")
        self._session = session
        self.attempts = attempts
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._clock = clock
        self._sleep = sleep

    async def send(self, url: str, body: bytes, *, secret: str | bytes, key: str = "") -> Delivery:
        """POST ``body`` signed with ``secret``; ValueError for an empty secret (nothing is sent unsigned)."""
        if not secret:
            raise ValueError(f"refusing to send an unsigned alert to {url}: the signing secret is empty")
        status: int | None = None
        error = ""
        for attempt in range(1, self.attempts + 1):
            headers = {
                "Content-Type": "application/json",
                SIGNATURE_HEADER: sign(secret, body, int(self._clock())),
            }
            if key:
                headers[DELIVERY_HEADER] = key
            try:
                async with self._session.post(url, data=body, headers=headers, timeout=self.timeout) as response:
                    status = response.status
                    await response.read()
                if 200 <= status < 300:
                    return Delivery(True, attempt, status)
                error = f"HTTP {status}"
                if status != 429 and status < 500:
                    return Delivery(False, attempt, status, error)
            except (TimeoutError, aiohttp.ClientError) as exc:
                status, error = None, f"{type(exc).__name__}: {exc}"
            if attempt < self.attempts:
                await self._sleep(min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1)))
        return Delivery(False, self.attempts, status, error)
