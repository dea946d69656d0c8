"""An audit hook that refuses, and notes, every name lookup or connection beyond this machine: a process that
installs it first runs offline or says where it tried to go (``blocked``). The adapters' contract tests run their
upstream frameworks (MLflow, lm-eval) under it, in those frameworks' own venvs."""

from __future__ import annotations

import ipaddress
import sys
from typing import Any

blocked: list[str] = []


def _local(host: Any) -> bool:
    if not isinstance(host, str) or host == "localhost":
        return True  # an AF_UNIX path, or the loopback name
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect":
        address = args[1]
        host = address[0] if isinstance(address, tuple) else address
    elif event == "socket.getaddrinfo":
        host = args[0]
    else:
        return
    if not _local(host):
        blocked.append(f"{event} {host}")
        raise OSError(f"offline test: {event} to {host} refused")


def install() -> None:
    sys.addaudithook(_hook)
