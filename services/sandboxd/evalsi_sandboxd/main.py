"""The ``evalsi-sandboxd`` process (being built)."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    print("evalsi-sandboxd: not built yet", file=sys.stderr)
    return 1
