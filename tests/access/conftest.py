"""The enforcement tests reuse the authentication tests' signing keys, identity provider and certificates."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "auth"))
