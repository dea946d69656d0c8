"""Store and bus URLs with their secrets masked, for consoles, logs and error messages.

A connection URL may carry a password (``postgresql://user:pw@host/db``), a NATS token
(``nats://token@host:4222``) or a secret query parameter (``?password=...``); none of them may reach a
console, a log line or an error message. This module has no dependencies, so a process masks URLs without
importing the stores.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

MASK = "***"

# Query parameters that carry credentials in the URL forms we accept or pass through (libpq, S3, NATS).
_SECRET_PARAM = re.compile(
    r"(?i)([?&](?:password|passwd|pass|pwd|sslpassword|secret|secret_key|secret_access_key|token|auth_token|"
    r"access_key|nkey|jwt)=)[^&#]*"
)
# Schemes whose user part alone is a credential (a NATS token: nats://s3cr3t@host).
_TOKEN_SCHEMES = ("nats", "tls", "ws", "wss")


def mask_url(url: str) -> str:
    """``url`` with the password of its user part, a token-only user part and secret query parameters
    replaced by ``***``; a string that is no URL comes back as it is.

    Masking errs on the side of hiding: the user part is taken up to the last ``@`` before the query, so a
    password holding an unescaped ``/`` or ``@`` is hidden whole.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    end = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    at = rest.rfind("@", 0, end)
    if at >= 0:
        userinfo, tail = rest[:at], rest[at:]
        user, colon, _password = userinfo.partition(":")
        if colon:
            rest = f"{user}:{MASK}{tail}"
        elif scheme.lower() in _TOKEN_SCHEMES and user:
            rest = MASK + tail
    return f"{scheme}://{_SECRET_PARAM.sub(lambda m: m.group(1) + MASK, rest)}"


def mask_urls_in(text: str) -> str:
    """``text`` (an error message, a log line) with every URL in it masked."""
    return re.sub(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"]+", lambda m: mask_url(m.group(0)), text)


def flags_with_secrets(argv: Sequence[str]) -> list[str]:
    """The flags in ``argv`` whose value is a URL carrying a secret (``--metadata-url postgresql://u:pw@h``):
    on a command line, every user of the machine reads them with ``ps``."""
    found: list[str] = []
    for index, arg in enumerate(argv):
        if not arg.startswith("--"):
            continue
        flag, eq, value = arg.partition("=")
        if not eq:
            value = argv[index + 1] if index + 1 < len(argv) else ""
        if value and mask_url(value) != value and flag not in found:
            found.append(flag)
    return found
