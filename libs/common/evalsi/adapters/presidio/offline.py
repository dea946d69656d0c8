"""The Presidio plugin process stays offline. Presidio's email recognizer asks tldextract whether a domain's
suffix is public, and tldextract's first call fetches the public suffix list from GitHub (then caches it under
``~/.cache``). Two of tldextract's own settings, read when it is imported, stop that: no suffix-list URLs
(``TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS`` empty) and no disk cache (``TLDEXTRACT_CACHE`` empty), which leaves the
suffix list bundled in tldextract's wheel: the same list on every machine, never a stale or fresher download.
Any other IP connection is refused, so a code path that would phone home fails loudly instead.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

# Set before Presidio imports tldextract: tldextract builds its module-level extractor from them on import.
OPT_OUTS = {"TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS": "", "TLDEXTRACT_CACHE": "", "HF_HUB_OFFLINE": "1",
            "DO_NOT_TRACK": "1"}
_IP_FAMILIES = (socket.AF_INET, socket.AF_INET6)


class NetworkRefused(OSError):
    """A connection the Presidio plugin never needs: its recognizers and their data are in its venv."""


def _refuse_ip(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect" and getattr(args[0], "family", None) in _IP_FAMILIES:
        raise NetworkRefused(f"the Presidio plugin runs offline: refused a connection to {args[1]!r}")
    if event == "socket.getaddrinfo":
        raise NetworkRefused(f"the Presidio plugin runs offline: refused to resolve {args[0]!r}")


def seal() -> None:
    """tldextract's downloads off, then IP connections refused for the process's life (an audit hook cannot be
    removed: this runs only in the plugin's own process)."""
    if "tldextract" in sys.modules:
        raise RuntimeError("seal() must run before tldextract is imported: it reads its settings on import")
    os.environ.update(OPT_OUTS)
    sys.addaudithook(_refuse_ip)
