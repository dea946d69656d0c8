"""The hot path: synchronous record-scope evaluators over a batch of records.

Everything that does not depend on the record is decided once per evaluator (its call, its params, its
requirements, the serialized verdicts of a bare bool), and what depends only on the record is decided once per
record for every evaluator that shares it (its id and trial, which required fields it lacks). Per call there is
the call itself and one write into a result made in place (``_slots``).

The calls of all evaluators (evaluator by evaluator, records in order) are cut into chunks of
``RunnerOptions.chunk_size``. In a chunk, an evaluator declared ``cheap`` (bounded, microseconds per call, no I/O)
runs on the event loop: a thread hop and the lane's per-call deadline watch would cost more than its calls. It
lets the loop serve its other tasks (heartbeats, acks) every 20 ms, however long the chunk's texts.
Should such a call still pass the deadline, its answer is discarded when it returns and the result is the same
deadline error an abandoned call gets. Every other evaluator's calls in the chunk share one deadline-watched lane
(``_lanes``), so a task of ten evaluators over fifty records is one thread hop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from evalsi.datasets.held import TEXT_FIELDS, RecordColumns
from evalsi.errors import BadInputError
from evalsi.evaluators._context import JUDGE_PENDING, EvalContext
from evalsi.evaluators._evaluator import BoundEvaluator
from evalsi.evaluators._lanes import in_lanes
from evalsi.evaluators._slots import ResultSlots, bool_verdicts, fail, skipped, timed_out
from evalsi.records import content_test
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import EvaluationResult

Progress = Callable[[int], None]
# The longest a cheap evaluator's calls hold the event loop before it serves its other tasks.
_INLINE_SLICE_S = 0.02


class MissingFields:
    """Why each record cannot be evaluated for lack of a required field (None: nothing missing), per set of
    required fields: evaluators requiring the same fields share one pass over the records."""

    def __init__(self, records: Sequence[Record], held: RecordColumns | None = None) -> None:
        self._records = records
        self._held = held  # the columns the records were made of (datasets.held), when they were
        self._by_fields: dict[tuple[str, ...], list[str | None]] = {}

    def reasons(self, requires: Sequence[str]) -> list[str | None]:
        fields = tuple(field for field in requires if field != "judge")
        known = self._by_fields.get(fields)
        if known is None:
            known = self._by_fields[fields] = self._compute(fields)
        return known

    def _compute(self, fields: tuple[str, ...]) -> list[str | None]:
        if not fields:
            return [None] * len(self._records)
        if self._held is not None and all(field in TEXT_FIELDS for field in fields):
            return _missing_texts(self._held, fields)
        tests = [(field, content_test(field)) for field in fields]
        reasons: list[str | None] = []
        for record in self._records:
            reason = None
            for _field, test in tests:
                if not test(record):
                    reason = "missing " + ", ".join(field for field, test in tests if not test(record))
                    break
            reasons.append(reason)
        return reasons


def _missing_texts(held: RecordColumns, fields: tuple[str, ...]) -> list[str | None]:
    """``MissingFields`` of text fields from the records' columns: a text row's record has a field exactly where the
    row gave a text (``has_content``), so only the records lacking one are looked at again."""
    columns = [(field, held.values(field)) for field in fields]
    reasons: list[str | None] = [None] * len(held)
    lacking = sorted({index for _field, values in columns if None in values  # the scan only where one lacks it
                      for index, text in enumerate(values) if text is None})
    for index in lacking:
        reasons[index] = "missing " + ", ".join(field for field, values in columns if values[index] is None)
    return reasons


class _Raised:
    """An exception a lane's call raised, carried to its commit."""

    __slots__ = ("exc",)

    def __init__(self, exc: Exception) -> None:
        self.exc = exc


class RecordJob:
    """One synchronous record-scope evaluator over the batch's records, writing into its results (in order)."""

    def __init__(
        self,
        bound: BoundEvaluator,
        ctx: EvalContext,
        records: Sequence[Record],
        results: list[EvaluationResult],
        missing: MissingFields,
        slots: ResultSlots,
    ) -> None:
        ev = bound.evaluator
        self.bound, self.records, self.results, self.slots = bound, records, results, slots
        self.cheap = ev.cheap
        fn, params = ev.fn, bound.params
        if ev.wants_context:
            self.call: Callable[[Record], Any] = lambda record: fn(record, ctx, **params)
        elif params:
            self.call = lambda record: fn(record, **params)
        else:
            self.call = fn
        reasons = missing.reasons(ev.requires)
        if "judge" in ev.requires and ctx.judge is None:
            no_judge = f"{JUDGE_PENDING}: no judge configured"
            reasons = [no_judge if reason is None else reason for reason in reasons]
        self.reasons = reasons
        self.verdicts = bool_verdicts(bound)

    def write(self, result: EvaluationResult, returned: Any) -> None:
        verdicts = self.verdicts
        if verdicts is not None and returned.__class__ is bool:
            result.MergeFromString(verdicts[returned])
        else:
            self.slots.store(result, self.bound, returned)

    def skip_missing(self, start: int, stop: int) -> list[int]:
        """Mark the records in [start, stop) that lack a requirement skipped; the indexes left to call."""
        reasons, results, to_call = self.reasons, self.results, []
        for index in range(start, stop):
            reason = reasons[index]
            if reason is None:
                to_call.append(index)
            else:
                skipped(results[index], reason)
        return to_call

    def run_inline(self, start: int, stop: int, timeout_s: float | None, until: float) -> int:
        """Evaluate records [start, stop) here, on the event loop (cheap evaluators only), until the clock passes
        ``until``; the index to go on from (``stop`` when done)."""
        call, records, results, reasons = self.call, self.records, self.results, self.reasons
        # ``write`` spelled out: a method call per result is a noticeable part of a cheap evaluation.
        verdicts, store, bound = self.verdicts or (None, None), self.slots.store, self.bound
        clock = time.perf_counter
        limit = float("inf") if timeout_s is None else timeout_s
        # One clock reading per call: each call's time is the time since the previous reading (the loop's own
        # bookkeeping included, which only errs toward the deadline by nanoseconds).
        last = clock()
        rows = zip(results[start:stop], reasons[start:stop], records[start:stop], strict=True)
        for index, (result, reason, record) in enumerate(rows, start + 1):
            if reason is not None:
                skipped(result, reason)
                continue
            try:
                returned = call(record)
                now = clock()
                if now - last > limit:
                    timed_out(result, limit)
                elif returned.__class__ is bool and verdicts[returned] is not None:
                    result.MergeFromString(verdicts[returned])  # type: ignore[arg-type]
                else:
                    store(result, bound, returned)
            except BadInputError:
                raise
            except Exception as exc:
                now = clock()
                if now - last > limit:
                    timed_out(result, limit)
                else:
                    fail(result, exc)
            if now > until:
                return index
            last = now
        return stop


def _lane_call(item: tuple[RecordJob, int]) -> Any:
    job, index = item
    try:
        return job.call(job.records[index])
    except BadInputError:
        raise
    except Exception as exc:
        return _Raised(exc)


def _lane_commit(item: tuple[RecordJob, int], returned: Any) -> None:
    job, index = item
    result = job.results[index]
    if returned.__class__ is _Raised:
        fail(result, returned.exc)
        return
    try:
        job.write(result, returned)
    except BadInputError:
        raise
    except Exception as exc:
        fail(result, exc)


def _chunks(jobs: Sequence[RecordJob], size: int) -> Iterator[list[tuple[RecordJob, int, int]]]:
    """The calls (evaluator by evaluator, records in order) cut into chunks of ``size``, as (job, start, stop)."""
    chunk: list[tuple[RecordJob, int, int]] = []
    room = size
    for job in jobs:
        start, total = 0, len(job.records)
        while start < total:
            stop = min(total, start + room)
            chunk.append((job, start, stop))
            room -= stop - start
            start = stop
            if room == 0:
                yield chunk
                chunk, room = [], size
    if chunk:
        yield chunk


async def run_record_jobs(
    jobs: Sequence[RecordJob],
    chunk_size: int,
    timeout_s: float | None,
    progress: Progress | None,
    cancelled: Callable[[], bool],
) -> None:
    """Every job's calls, chunk by chunk; once cancelled, the chunks not started stay unwritten."""
    first = True
    for chunk in _chunks(jobs, chunk_size):
        if cancelled():
            continue
        if not first:
            await asyncio.sleep(0)  # between inline chunks the loop serves its other tasks
        first = False
        in_lane: list[tuple[RecordJob, int]] = []
        for job, start, stop in chunk:
            if job.cheap:
                while (start := job.run_inline(start, stop, timeout_s, time.perf_counter() + _INLINE_SLICE_S)) < stop:
                    await asyncio.sleep(0)  # long texts: the loop still serves its heartbeats and acks
            else:
                in_lane.extend((job, index) for index in job.skip_missing(start, stop))
        if in_lane:
            await in_lanes(
                in_lane, _lane_call, _lane_commit,
                lambda item: timed_out(item[0].results[item[1]], timeout_s or 0.0), timeout_s,
            )
        if progress is not None:
            progress(sum(stop - start for _job, start, stop in chunk))
