"""Human durations (``30s``, ``10m``, ``1h30m``, ``250ms``) in the protobuf JSON form that specs and configs share."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d)")
_UNIT_NANOS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
    "d": 86_400_000_000_000,
}
DURATION_HELP = "a duration like 30s, 10m, 1h30m or 250ms (or a number of seconds)"


def parse_duration(value: Any) -> str:
    """A human duration as the protobuf JSON form: ``"10m"`` -> ``"600s"``, ``"250ms"`` -> ``"0.25s"``.

    Accepts a sequence of number+unit parts (ns, us, ms, s, m, h, d), ``"600s"`` itself, or a bare number
    of seconds. Raises ``ValueError`` for anything else, including negative durations.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected {DURATION_HELP}, got {value!r}")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(f"a duration cannot be negative, got {value!r}")
        nanos = int(Decimal(str(value)) * 1_000_000_000)
    elif isinstance(value, str):
        text = value.strip().replace(" ", "")
        position, nanos = 0, 0
        for match in _DURATION_PART.finditer(text):
            if match.start() != position:
                break
            try:
                nanos += int(Decimal(match.group(1)) * _UNIT_NANOS[match.group(2)])
            except InvalidOperation:
                break
            position = match.end()
        if not text or position != len(text):
            raise ValueError(f"expected {DURATION_HELP}, got {value!r}")
    else:
        raise ValueError(f"expected {DURATION_HELP}, got {type(value).__name__}")
    seconds, rest = divmod(nanos, 1_000_000_000)
    return f"{seconds}s" if not rest else f"{seconds}.{rest:09d}".rstrip("0") + "s"
