"""evalsi.yaml's ``sandbox.egress``: the logging egress proxy's bounds and an optional upstream proxy.

    sandbox:
      egress:
        upstream: http://proxy.internal:3128   # chain every allowed connection through this HTTP proxy
        max_connections: 64                    # open at once per sandbox; past it a connection is refused (503)
        max_head_bytes: 16384                  # a request line and headers; past it refused (431)
        idle_timeout: 60s                      # a tunnel with no bytes either way for this long is closed
        max_events: 10000                      # log entries kept per sandbox; later ones are counted, not kept

Every error names the key path and what is accepted. The upstream URL carries no credentials: configuration never
holds a secret in a file (secrets come from the environment, DESIGN: security by construction).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from evalsi.errors import BadInputError
from evalsi.sandbox.checks import check_bound, parse_endpoint, seconds
from evalsi.sandbox.model import Endpoint

__all__ = ["EgressSettings", "load_egress_settings", "parse_upstream"]

_KEYS = ("upstream", "max_connections", "max_head_bytes", "idle_timeout", "max_events")


@dataclass(frozen=True)
class EgressSettings:
    upstream: Endpoint | None = None
    max_connections: int = 64
    max_head_bytes: int = 16 * 1024
    idle_timeout_s: float = 60.0
    max_events: int = 10_000
    # Not configurable: a client that has not finished its request head by then is cut off (slow-loris).
    head_timeout_s: float = 10.0
    connect_timeout_s: float = 10.0


def parse_upstream(text: str, where: str) -> Endpoint:
    """``http://HOST:PORT`` of an HTTP proxy that accepts CONNECT."""
    prefix = "http://"
    if not text.startswith(prefix):
        raise BadInputError(f"{where}: {text!r}; expected http://HOST:PORT of an HTTP proxy")
    rest = text[len(prefix):].rstrip("/")
    if "@" in rest:
        raise BadInputError(f"{where}: credentials are not accepted in the URL (no secret in configuration)")
    try:
        return parse_endpoint(rest, where)
    except BadInputError:
        raise BadInputError(f"{where}: {text[:200]!r}; expected http://HOST:PORT with a port from 1 to 65535") from None


def load_egress_settings(raw: Any, path: str) -> EgressSettings:
    if raw is None:
        return EgressSettings()
    if not isinstance(raw, Mapping):
        raise BadInputError(f"{path}: expected a mapping such as {{upstream: http://proxy:3128}}")
    unknown = sorted(str(key) for key in raw if key not in _KEYS)
    if unknown:
        raise BadInputError(f"{path}.{unknown[0]}: unknown key; accepted: {', '.join(_KEYS)}")
    settings = EgressSettings()
    if raw.get("upstream"):
        if not isinstance(raw["upstream"], str):
            raise BadInputError(f"{path}.upstream: expected a string such as http://proxy:3128")
        settings = replace(settings, upstream=parse_upstream(raw["upstream"], f"{path}.upstream"))
    settings = replace(settings, max_connections=_count(raw, "max_connections", path, 4096, settings.max_connections),
                       max_head_bytes=_count(raw, "max_head_bytes", path, 1 << 20, settings.max_head_bytes, low=1024),
                       max_events=_count(raw, "max_events", path, 1_000_000, settings.max_events))
    if raw.get("idle_timeout") is not None:
        idle = seconds(raw["idle_timeout"], f"{path}.idle_timeout")
        if not 0 < idle <= 3600:
            raise BadInputError(f"{path}.idle_timeout: {idle:g}s; accepted: more than 0 and at most 1h")
        settings = replace(settings, idle_timeout_s=idle)
    return settings


def _count(raw: Mapping[str, Any], key: str, path: str, high: int, default: int, low: int = 1) -> int:
    value = raw.get(key)
    return default if value is None else check_bound(value, f"{path}.{key}", low, high)
