"""The example's local SerpAPI-compatible search endpoint and page server
(``examples/benchmarks/bfcl/local_search_server.py``), loaded for the BFCL web search tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_PATH = Path(__file__).parents[2] / "examples" / "benchmarks" / "bfcl" / "local_search_server.py"
_SPEC = importlib.util.spec_from_file_location("bfcl_local_search_server", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
_MODULE = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_MODULE)

KEY: str = _MODULE.KEY
LATIN: str = _MODULE.LATIN
PAGE: str = _MODULE.PAGE
serve = _MODULE.serve
