"""Test helpers that are also useful outside pytest (examples, end-to-end CLI runs): no pytest imports.

Names are loaded on first use (PEP 562) so that ``python -m evalsi.testing.providers`` does not import
the module twice (runpy warns when a package import already pulled in the module it is asked to run).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .providers import FakeAnthropic, FakeOpenAI, FakeProvider, ReplyFn, Step, echo_reply

__all__ = ["FakeAnthropic", "FakeOpenAI", "FakeProvider", "ReplyFn", "Step", "echo_reply"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module(".providers", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
