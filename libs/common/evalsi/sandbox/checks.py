"""The checks every surface that configures a sandbox shares: evalsi.yaml's ``sandbox:`` section (``config.py``,
``egress_config.py``), a run's ``spec.sandbox`` (``access.py``) and sandboxd's wire (``wire.py``). One rule each, so
a value one surface accepts the others accept alike; every error names the field and what is accepted.

An endpoint's host is compared in one form everywhere (``normalize_host``): the egress proxy matches a request's
host against the allowlist in that form.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from evalsi.durations import parse_duration
from evalsi.errors import BadInputError
from evalsi.sandbox.model import Endpoint

__all__ = ["MAX_ALLOW", "check_bound", "check_endpoint", "normalize_host", "parse_endpoint", "seconds"]

MAX_ALLOW = 64  # endpoints a sandbox's network allowlist may hold
_NAME = re.compile(r"^[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*\.?$")


def check_bound(value: Any, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadInputError(f"{where}: expected an integer from {low} to {high}, got {value!r}")
    if not low <= value <= high:
        raise BadInputError(f"{where}: {value} is out of range; accepted: {low} to {high}")
    return value


def seconds(value: Any, where: str) -> float:
    """A duration (``30s``, ``2m``, a number of seconds) in seconds."""
    try:
        return float(parse_duration(value).removesuffix("s"))
    except ValueError as exc:
        raise BadInputError(f"{where}: {exc}") from None


def normalize_host(text: str) -> str | None:
    """The form hosts are compared in: a name lowercased, an IP literal in its canonical form (``[::1]`` and
    ``::1`` alike); None when ``text`` is neither a DNS name nor an IP literal."""
    host = text.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return ipaddress.ip_address(host).compressed
    except ValueError:
        pass
    if len(host) > 253 or not _NAME.match(host):
        return None
    return host


def check_endpoint(host: str, port: int, where: str) -> Endpoint:
    """An endpoint given as its parts (sandboxd's wire), the host normalized."""
    # Bounded before normalizing: a caller's host of megabytes is refused, not lowercased.
    name = normalize_host(host) if len(host) <= 300 else None
    if not name or not 0 < port < 65536:
        raise BadInputError(f"{where}: {host[:100]!r} port {port} is not an endpoint; accepted: a host (a DNS name "
                            "or IP literal) and a port 1-65535")
    return Endpoint(name, port)


def parse_endpoint(text: str, where: str) -> Endpoint:
    """``HOST:PORT`` as ``spec.sandbox.allow`` takes it (the host normalized), or a ``BadInputError`` naming
    ``where``: one rule for every list of endpoints (a harness environment's escalation allowance too)."""
    host, _, port = text.rpartition(":")
    # Bounded before int(): a caller's port of thousands of digits, or a non-ASCII digit, must be refused, not raise.
    name = normalize_host(host) if len(text) <= 300 else None
    if not name or not (port.isascii() and port.isdigit() and len(port) <= 5) or not 0 < int(port) < 65536:
        raise BadInputError(f"{where}: {text[:100]!r} is not an endpoint; accepted: HOST:PORT (a DNS name or IP "
                            "literal, port 1-65535)")
    return Endpoint(name, int(port))
