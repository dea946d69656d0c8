"""The terminal around a run in this process (``evalsi run``, ``evalsi eval``, ``evaluate(progress=True)``): a
progress bar on stderr (plain lines when stderr is no terminal: a CI log, a file) and what the first Ctrl-C does."""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

# One meaning of Ctrl-C for every run in this process: the run stops as a cancel does (runs.local).
STOPPING = "calls in flight finish, nothing new starts, finished work is kept"
# Seconds between plain progress lines: often enough to see a run move in a CI log, rarely enough not to flood it.
PLAIN_EVERY_S = 5.0


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def progress_line(done: int, total: int, elapsed_s: float) -> str:
    """``evaluating: 120/300 (40%), 24.0/s, ETA 8s``; the rate and ETA are absent until something is done."""
    share = f" ({done / total:.0%})" if total else ""
    line = f"evaluating: {done}/{total}{share}"
    if done and elapsed_s > 0:
        rate = done / elapsed_s
        line += f", {rate:.1f}/s"
        if total > done:
            line += f", ETA {_duration((total - done) / rate)}"
    return line


class PlainProgress:
    """Progress as plain lines on ``out`` every ``every_s`` seconds from a helper thread (so a stalled run still
    says where it is), and one last line when it ends."""

    def __init__(self, total: int, out: TextIO, every_s: float = PLAIN_EVERY_S) -> None:
        self.total, self.done = total, 0
        self._out, self._every_s = out, every_s
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="evalsi-progress", daemon=True)

    def advance(self, n: int) -> None:
        self.done += n

    def __enter__(self) -> PlainProgress:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        elapsed = time.monotonic() - self._started
        self._write(f"evaluated {self.done}/{self.total} in {_duration(elapsed)}")

    def _tick(self) -> None:
        while not self._stop.wait(self._every_s):
            self._write(progress_line(self.done, self.total, time.monotonic() - self._started))

    def _write(self, line: str) -> None:
        self._out.write(line + "\n")
        self._out.flush()


@contextmanager
def progress_bar(enabled: bool, total: int) -> Iterator[Callable[[int], None] | None]:
    """Progress of ``total`` evaluations on stderr, advanced by the callable it yields (None when not ``enabled``):
    a bar on a terminal or in a notebook, else a plain line every few seconds (``PlainProgress``)."""
    if not enabled:
        yield None
        return
    from rich.console import Console

    console = Console(stderr=True)
    if not console.is_terminal and not console.is_jupyter:  # a notebook renders the bar; a log file would not
        with PlainProgress(total, sys.stderr) as plain:
            yield plain.advance
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("evaluating"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as bar:
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
