"""Run with the RAGAS plugin venv's python: after the plugin's ``seal()``, what would reach the network does not.

Prints JSON: RAGAS's telemetry opt-out as RAGAS reads it, and what fetching a tiktoken encoding not in the
(empty) cache did, which is what RAGAS's tokenizers would do on first use.
"""

from __future__ import annotations

import json

from evalsi.adapters.ragas.offline import seal

seal()

import tiktoken  # noqa: E402
from ragas._analytics import do_not_track  # noqa: E402

try:
    tiktoken.get_encoding("cl100k_base")
    fetched = "fetched"
except Exception as exc:  # tiktoken's HTTP client wraps the refusal in its own error
    fetched = f"failed: {type(exc).__name__}: {exc}"
print(json.dumps({"do_not_track": do_not_track(), "tiktoken": fetched}))
