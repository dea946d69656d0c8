"""Test helpers that are also useful outside pytest (examples, end-to-end CLI runs): no pytest imports.

Names are loaded on first use (PEP 562) so that ``python -m evalsi.testing.providers`` does not import
the module twice (runpy warns when a package import already pulled in the module it is asked to run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalsi._lazy import lazy_exports

if TYPE_CHECKING:
    from .providers import FakeAnthropic, FakeOpenAI, FakeProvider, ReplyFn, Step, echo_reply

__all__ = ["FakeAnthropic", "FakeOpenAI", "FakeProvider", "ReplyFn", "Step", "echo_reply"]

__getattr__, __dir__ = lazy_exports(__name__, globals(), {".providers": __all__})
