"""Shared parts of the local backing services: free loopback ports, log tails, liveness by PID."""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

LOOPBACK = "127.0.0.1"


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback TCP port that is free now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def free_ports_with_grpc(count: int, *, low: int = 10_000, high: int = 30_000) -> list[int]:
    """``count`` distinct free ports p (at most 55535) whose p+10000 is free too, as SeaweedFS needs."""
    chosen: list[int] = []
    taken: set[int] = set()
    for _ in range(2000):
        p = random.randint(low, min(high, 55_535))
        if {p, p + 10_000} & taken:
            continue
        if port_free(p) and port_free(p + 10_000):
            chosen.append(p)
            taken |= {p, p + 10_000}
            if len(chosen) == count:
                return chosen
    raise RuntimeError(f"could not find {count} free loopback ports with their +10000 ports free")


def log_tail(*paths: Path, lines: int = 40) -> str:
    out = []
    for path in paths:
        try:
            text = path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            continue
        out.append(f"--- {path} (last {len(text)} lines) ---\n" + "\n".join(text))
    return "\n".join(out) or "(no log)"


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie (exited, not yet reaped by an init that may never reap it) does not."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    # The state follows the parenthesized command name, which may itself contain spaces or parentheses.
    return stat_line.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")
