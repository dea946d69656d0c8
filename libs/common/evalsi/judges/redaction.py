"""Provider and agent error bodies are redacted before they reach a result's ``reason``, a log line or a caller.

A provider's error body may echo what it was sent: the key itself, an ``Authorization: Bearer ...`` header, an
``x-api-key`` value. Whatever shape it takes, the known credential values are cut out first, then anything that
looks like a token; the text is bounded, so a provider's HTML error page cannot fill the result store.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_REASON_CHARS = 500
REDACTED = "[REDACTED]"
# Shorter values would cut ordinary words out of messages; no real credential is this short.
_MIN_SECRET_CHARS = 6

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}"), r"\1 " + REDACTED),
    # OpenAI- and Anthropic-style keys: sk-..., sk-proj-..., sk-ant-...
    (re.compile(r"\bsk-[A-Za-z0-9_-]{6,}"), "sk-" + REDACTED),
    # key: value, key=value and "key": "value" for header and parameter names that carry credentials.
    (
        re.compile(
            r"""(?ix)\b(x-api-key|api[_-]?key|authorization|access[_-]?token|secret|password|token)
                (["']?\s*[:=]\s*["']?)(?!(?:bearer|basic)\s|\[REDACTED\])[^\s"',;}&]+"""
        ),
        r"\1\2" + REDACTED,
    ),
)


def redact(text: str, secrets: Iterable[str | None] = (), *, limit: int = MAX_REASON_CHARS) -> str:
    """``text`` with every value of ``secrets`` and every token-like string replaced, at most ``limit`` chars."""
    for secret in secrets:
        if secret and len(secret) >= _MIN_SECRET_CHARS:
            text = text.replace(secret, REDACTED)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text
