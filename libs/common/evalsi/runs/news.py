"""What a run driver learns about the runs it drives as results arrive: a wake-up for each run (a result folded,
a cancel) and the partial summaries folded from the results as they came, so nothing polls the store for progress
or re-reads every result to show a partial summary."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from evalsi.runs.summary import SummaryBuilder
from evalsi.v1alpha1.score_pb2 import EvaluationResult


@dataclass
class RunNews:
    """Per driven run: an event set when something happened to it, and its partial summaries' accumulator."""

    _events: dict[str, asyncio.Event] = field(default_factory=dict)
    _partials: dict[str, SummaryBuilder] = field(default_factory=dict)

    def follow(self, run_id: str, partials: SummaryBuilder) -> None:
        """Start following a run, its partial summaries from ``partials`` (what was stored when it was taken)."""
        self._events.setdefault(run_id, asyncio.Event())
        self._partials[run_id] = partials

    def forget(self, run_id: str) -> None:
        self._events.pop(run_id, None)
        self._partials.pop(run_id, None)

    def wake(self, run_id: str) -> None:
        event = self._events.get(run_id)
        if event is not None:
            event.set()

    def fold(self, run_id: str, results: Iterable[EvaluationResult]) -> None:
        """Add results to a followed run's partial summaries (once per task: the caller folds first completions)."""
        builder = self._partials.get(run_id)
        if builder is not None:
            builder.add(results)

    def drop_partials(self, run_id: str) -> None:
        """Stop folding a run's partial summaries (its final summaries are being built): their memory goes now."""
        self._partials.pop(run_id, None)

    def partials(self, run_id: str) -> SummaryBuilder | None:
        return self._partials.get(run_id)

    async def wait(self, run_id: str, timeout_s: float) -> None:
        """Return when the run has news, or after ``timeout_s``."""
        event = self._events.setdefault(run_id, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout=timeout_s)
        event.clear()
