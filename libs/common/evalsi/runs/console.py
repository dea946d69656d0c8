"""The terminal around a run in this process (``evalsi run``, ``evalsi eval``, ``evaluate(progress=True)``): a
progress bar on stderr and what the first Ctrl-C does."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# One meaning of Ctrl-C for every run in this process: the run stops as a cancel does (runs.local).
STOPPING = "calls in flight finish, nothing new starts, finished work is kept"


@contextmanager
def progress_bar(enabled: bool, total: int) -> Iterator[Callable[[int], None] | None]:
    """A bar of ``total`` evaluations on stderr, advanced by the callable it yields (None when not ``enabled``)."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("evaluating"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("evaluating", total=total)
        yield lambda n: bar.advance(task, n)


@contextmanager
def interrupt_sets(cancel: asyncio.Event, enabled: bool) -> Iterator[None]:
    """While active, the first SIGINT sets ``cancel`` and says what happens; the handler then steps aside so a
    second one aborts."""
    if not enabled:
        yield
        return
    loop = asyncio.get_running_loop()

    def on_interrupt() -> None:
        sys.stderr.write(f"\ncancelling: {STOPPING} (Ctrl-C again to abort)\n")
        cancel.set()
        loop.remove_signal_handler(signal.SIGINT)

    loop.add_signal_handler(signal.SIGINT, on_interrupt)
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)
