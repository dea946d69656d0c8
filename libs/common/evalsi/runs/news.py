"""What a run driver learns about the runs it drives as results arrive: a wake-up for each run (a result folded,
a cancel) and the summaries folded from the results as they came, so nothing polls the store for progress or
re-reads every result to show a partial summary, and the final summaries need no re-read when the fold is whole.

A fold is *whole* when it holds exactly the run's stored results: it started from every stored result, and no result
was written here without being folded (a redelivery that found its task already finished) or folded while that first
read was still running (it may have been read too). The driver still compares the fold's counts with the store's
before trusting it, which catches results written by another replica."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from evalsi.evaluators.runner import Columns
from evalsi.runs.result_columns import fold_columns
from evalsi.runs.summary import SummaryBuilder
from evalsi.v1alpha1.score_pb2 import EvaluationResult


@dataclass
class RunNews:
    """Per driven run: an event set when something happened to it, and its partial summaries' accumulator."""

    _events: dict[str, asyncio.Event] = field(default_factory=dict)
    _partials: dict[str, SummaryBuilder] = field(default_factory=dict)
    _reading: set[str] = field(default_factory=set)  # runs whose stored results are being read into their fold
    _not_whole: set[str] = field(default_factory=set)

    def follow(self, run_id: str, partials: SummaryBuilder) -> None:
        """Start following a run: fold its results into ``partials`` from now on. The caller then reads what was
        stored into ``partials`` and calls ``read_done``."""
        self._events.setdefault(run_id, asyncio.Event())
        self._partials[run_id] = partials
        self._reading.add(run_id)
        self._not_whole.discard(run_id)

    def read_done(self, run_id: str) -> None:
        self._reading.discard(run_id)

    def forget(self, run_id: str) -> None:
        self._events.pop(run_id, None)
        self._partials.pop(run_id, None)
        self._reading.discard(run_id)
        self._not_whole.discard(run_id)

    def written_unfolded(self, run_id: str) -> None:
        """Results of the run were stored here but not folded: its fold no longer stands for what is stored."""
        if run_id in self._partials:
            self._not_whole.add(run_id)

    def whole_fold(self, run_id: str, stored: Mapping[int, int]) -> SummaryBuilder | None:
        """The run's fold, for its final summaries, if it is whole and holds as many results of each outcome as the
        store (``stored``: outcome to count); else None, and the fold's memory goes (the caller reads the store).

        The counts catch results another replica wrote (missing here) and results both read and folded."""
        folded = self._partials.get(run_id)
        whole = folded is not None and run_id not in self._not_whole and run_id not in self._reading
        if folded is not None and whole and folded.outcome_counts() == {o: n for o, n in stored.items() if n}:
            return folded
        self.drop_partials(run_id)
        return None

    def wake(self, run_id: str) -> None:
        event = self._events.get(run_id)
        if event is not None:
            event.set()

    def fold(self, run_id: str, results: Iterable[EvaluationResult]) -> None:
        """Add results to a followed run's partial summaries (once per task: the caller folds first completions)."""
        builder = self._partials.get(run_id)
        if builder is not None:
            if run_id in self._reading:
                self._not_whole.add(run_id)  # the first read may have seen these results already
            builder.add(results)

    def fold_columns(self, run_id: str, columns: Columns) -> None:
        """``fold`` of a worker's results as columns (runs.result_columns)."""
        builder = self._partials.get(run_id)
        if builder is not None:
            if run_id in self._reading:
                self._not_whole.add(run_id)
            fold_columns(builder, columns)

    def drop_partials(self, run_id: str) -> None:
        """Stop folding a run's partial summaries (its final summaries are being built): their memory goes now."""
        self._partials.pop(run_id, None)
        self._not_whole.discard(run_id)

    def partials(self, run_id: str) -> SummaryBuilder | None:
        return self._partials.get(run_id)

    async def wait(self, run_id: str, timeout_s: float) -> None:
        """Return when the run has news, or after ``timeout_s``."""
        event = self._events.setdefault(run_id, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout=timeout_s)
        event.clear()
