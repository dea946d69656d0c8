"""The RAGAS plugin process stays offline: upstream telemetry and hub downloads opted out, and any IP connection
refused, so a code path that would phone home (RAGAS's usage events, a tiktoken BPE or Hugging Face download)
fails loudly as that record's evaluator error instead of reaching the network. Model calls never need the
network here: they go to the host over the plugin protocol (a Unix socket served by gRPC's C core, which this
guard does not see).
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

# Set before RAGAS is imported (it reads RAGAS_DO_NOT_TRACK once and caches it).
OPT_OUTS = {
    "RAGAS_DO_NOT_TRACK": "true",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGSMITH_TRACING": "false",
}
_IP_FAMILIES = (socket.AF_INET, socket.AF_INET6)


class NetworkRefused(OSError):
    """A connection the RAGAS plugin does not make: its judge calls go through the host."""


def _refuse_ip(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect" and getattr(args[0], "family", None) in _IP_FAMILIES:
        raise NetworkRefused(f"the RAGAS plugin runs offline: refused a connection to {args[1]!r} (its model calls "
                             "go to the run's judge through the host; see docs/adapters.md#ragas)")
    if event == "socket.getaddrinfo":
        raise NetworkRefused(f"the RAGAS plugin runs offline: refused to resolve {args[0]!r}")


def seal() -> None:
    """Opt out of every upstream download and telemetry, then refuse IP connections for the process's life (an
    audit hook cannot be removed, which is the point: this runs only in the plugin's own process)."""
    os.environ.update(OPT_OUTS)
    sys.addaudithook(_refuse_ip)
