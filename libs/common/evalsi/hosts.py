"""Whether a listen address stays on this machine: the one loopback rule of the API, ingest and ``evalsi serve``.

Without an ``auth`` section every listener refuses a non-loopback address (``evalsi.gate.exposure``).
"""

from __future__ import annotations

import ipaddress

# Host names that always resolve to loopback; any other name could resolve anywhere, so it is not one.
LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    """``127.0.0.0/8``, ``::1`` (bracketed or not) or ``localhost`` in any case."""
    host = host.strip().strip("[]")
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
