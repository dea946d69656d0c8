"""Picking a free TCP port for a server that will bind it later (a child process, a test's server).

A port the kernel hands out for ``bind(port 0)`` comes from its ephemeral range, and so does the local port of
every outgoing connection: between picking such a port and the server binding it, a client connection (to
Postgres, NATS, ClickHouse) can take it, and the server fails with "address already in use". So ports are picked
at random outside that range, and checked free on every address the server will listen on.

A free port is not yet a bound one, so two picks made before either server binds (a test stack's api ports, then
its nats-server's, then a child's /metrics) could agree. Every port this process hands out is therefore held
back from its later picks for a while.
"""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Collection, Sequence
from pathlib import Path

_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10_000  # above the well-known and registered ports most local services use
_HOLD_S = 900.0  # longer than any start-up between a pick and its bind

# Process-wide on purpose: the picks that must not agree are made by unrelated code (a test, the supervisor,
# nats-server's wrapper), and a port is a process-wide resource.
_handed_out: dict[int, float] = {}
_handed_out_lock = threading.Lock()


def pick_range() -> tuple[int, int]:
    """The ports picked from, [low, high): below the kernel's ephemeral range, else above it."""
    try:
        low, high = (int(part) for part in _EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        low, high = 32_768, 60_999  # Linux's default
    if low - _LOWEST >= 2_000:
        return _LOWEST, low
    return high + 1, 65_536


def port_free(port: int, hosts: Sequence[str] = ("127.0.0.1", "0.0.0.0")) -> bool:
    """Whether ``port`` can be bound on each of ``hosts`` now (a port in TIME_WAIT counts as taken)."""
    for host in hosts:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((host, port))
            except OSError:
                return False
    return True


def free_ports(count: int, *, avoid: Collection[int] = (), hosts: Sequence[str] = ("127.0.0.1", "0.0.0.0"),
               rng: random.Random | None = None) -> list[int]:
    """``count`` distinct ports free on ``hosts`` now, none of them in ``avoid``."""
    pick = rng or random.Random()
    low, high = pick_range()
    chosen: list[int] = []
    with _handed_out_lock:
        now = time.monotonic()
        for port in [port for port, at in _handed_out.items() if now - at > _HOLD_S]:
            del _handed_out[port]
        for _ in range(4_000):
            port = pick.randrange(low, high)
            if port not in chosen and port not in avoid and port not in _handed_out and port_free(port, hosts):
                chosen.append(port)
                if len(chosen) == count:
                    _handed_out.update(dict.fromkeys(chosen, now))
                    return chosen
    raise RuntimeError(f"could not find {count} free ports between {low} and {high - 1}")


def free_port(*, avoid: Collection[int] = (), hosts: Sequence[str] = ("127.0.0.1", "0.0.0.0")) -> int:
    """One port free on ``hosts`` now, not in ``avoid``."""
    return free_ports(1, avoid=avoid, hosts=hosts)[0]
