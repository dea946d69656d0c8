"""The cyclic garbage collector paused while an embedded run of deterministic evaluators builds its records and
results.

Such a run allocates a few objects per record and per result in one burst (protobuf messages, which the collector
tracks), and the collector's full passes over everything alive grew with them: 3-4 full collections in an
``evaluate()`` of 100,000 exact-match records cost 0.5-0.7 CPU s of its ~4 (15-18%), freeing nothing, since what
such a run builds holds no reference cycles it would leave behind. Reference counting still frees everything as
usual; only cycles wait until the collector runs again.

The collector is one per process, so its pause is too: nested and concurrent pauses (two ``evaluate()`` calls on
two threads) count their holders, and the last one out restores the state the first one found.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager


class _CollectorPauses:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._was_enabled = False

    @contextmanager
    def paused(self) -> Iterator[None]:
        with self._lock:
            if self._holders == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._holders += 1
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                if self._holders == 0 and self._was_enabled:
                    gc.enable()


# Process-wide because the collector is: a pause per caller could re-enable it under another caller's pause.
_PAUSES = _CollectorPauses()


def collector_paused() -> AbstractContextManager[None]:
    """A context in which the cyclic collector does not run (it is restored on leaving the last such context)."""
    return _PAUSES.paused()
