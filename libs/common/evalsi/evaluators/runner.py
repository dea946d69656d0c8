"""The batched runner: every bound evaluator over every record, with bounded concurrency.

Synchronous evaluators run in chunks on a worker thread (the loop stays free, and a chunk costs one
thread hop rather than one task per record); the record-scope calls of several evaluators share chunks, so a
worker's task of ten evaluators over fifty records is one hop. Asynchronous ones (judges) share one pool of
workers pulling from a queue, so one slow judge call holds one worker and never stalls the others.

With ``call_timeout_s`` every evaluator call has a deadline. An async call is cancelled when it passes. A
sync call cannot be interrupted (Python cannot stop a thread): the loop abandons it, reports its result as an
evaluator error, and goes on with the rest of the chunk on a fresh thread; the abandoned thread ends when
that call returns and does nothing after it. When the awaiting task is cancelled (a request's deadline), the
chunk's thread likewise stops after the call in progress.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import islice
from typing import Any

from evalsi.errors import BadInputError, InfraError, SkipRecord
from evalsi.evaluators import JUDGE_PENDING, BoundEvaluator, EvalContext, normalize_scores
from evalsi.records import content_test, has_content, to_value
from evalsi.stats.defaults import DEFAULT_BOOTSTRAP_RESAMPLES, DEFAULT_CONFIDENCE
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import (
    ERROR_KIND_EVALUATOR,
    ERROR_KIND_INFRA,
    OUTCOME_CANCELLED,
    OUTCOME_ERROR,
    OUTCOME_SCORED,
    OUTCOME_SKIPPED,
    EvaluationResult,
    Score,
)

Progress = Callable[[int], None]
DATASET_RECORD_ID = "*"


@dataclass(frozen=True)
class RunnerOptions:
    concurrency: int = 16
    chunk_size: int = 2048
    # Dataset-scope metrics get a percentile bootstrap over records (map once, reduce per resample).
    bootstrap_resamples: int = DEFAULT_BOOTSTRAP_RESAMPLES
    confidence: float = DEFAULT_CONFIDENCE
    seed: int = 0
    # Seconds one evaluator call may take (None: no limit); past it the call is abandoned, an evaluator error.
    call_timeout_s: float | None = None


def _new_result(record_id: str, bound: BoundEvaluator, trial: int) -> EvaluationResult:
    return EvaluationResult(record_id=record_id, evaluator=bound.alias, evaluator_ref=bound.evaluator.ref, trial=trial)


def _missing(bound: BoundEvaluator, record: Record, ctx: EvalContext) -> str | None:
    missing = [f for f in bound.evaluator.requires if f != "judge" and not has_content(record, f)]
    if missing:
        return "missing " + ", ".join(missing)
    if "judge" in bound.evaluator.requires and ctx.judge is None:
        return f"{JUDGE_PENDING}: no judge configured"
    return None


def _requirements(bound: BoundEvaluator, ctx: EvalContext) -> Callable[[Record], str | None]:
    """``_missing`` for one evaluator and context with its field tests decided once, for the per-record hot path:
    the reason is put together only when a record lacks something."""
    requires = bound.evaluator.requires
    tests = [(field, content_test(field)) for field in requires if field != "judge"]
    no_judge = f"{JUDGE_PENDING}: no judge configured" if "judge" in requires and ctx.judge is None else None

    def missing(record: Record) -> str | None:
        for _field, test in tests:
            if not test(record):
                return "missing " + ", ".join(field for field, test in tests if not test(record))
        return no_judge

    return missing


def _args(bound: BoundEvaluator, subject: Any, ctx: EvalContext) -> tuple[Any, ...]:
    return (subject, ctx) if bound.evaluator.wants_context else (subject,)


def _store(result: EvaluationResult, bound: BoundEvaluator, returned: Any) -> None:
    """Record what the evaluator returned; a bare bool from a single-output evaluator skips normalization."""
    outputs = bound.evaluator.outputs
    if returned.__class__ is bool and len(outputs) == 1:
        result.scores.add(name=outputs[0].name, passed=returned)
    else:
        result.scores.extend(normalize_scores(bound.evaluator, returned))
    result.outcome = OUTCOME_SCORED


def _fail(result: EvaluationResult, exc: Exception) -> None:
    """The outcome of an evaluation that raised: a skip, an infrastructure error or an evaluator error."""
    if isinstance(exc, SkipRecord):
        result.outcome, result.reason = OUTCOME_SKIPPED, str(exc)
    elif isinstance(exc, InfraError):
        result.outcome, result.error_kind, result.reason = OUTCOME_ERROR, ERROR_KIND_INFRA, str(exc)
    else:
        result.outcome, result.error_kind = OUTCOME_ERROR, ERROR_KIND_EVALUATOR
        result.reason = f"{type(exc).__name__}: {exc}"


def _timed_out(result: EvaluationResult, timeout_s: float) -> EvaluationResult:
    result.outcome, result.error_kind = OUTCOME_ERROR, ERROR_KIND_EVALUATOR
    result.reason = f"deadline: the evaluator call did not finish within {timeout_s:g}s and was abandoned"
    result.duration.FromNanoseconds(int(timeout_s * 1e9))
    return result


def _finish(result: EvaluationResult, bound: BoundEvaluator, call: Callable[[], Any]) -> None:
    """Run one evaluation and record its outcome and duration on ``result``."""
    started = time.perf_counter_ns()
    try:
        _store(result, bound, call())
    except BadInputError:
        raise
    except Exception as exc:
        _fail(result, exc)
    result.duration.FromNanoseconds(time.perf_counter_ns() - started)


async def _finish_async(
    result: EvaluationResult, bound: BoundEvaluator, args: tuple[Any, ...], timeout_s: float | None
) -> None:
    started = time.perf_counter_ns()
    deadline = asyncio.timeout(timeout_s)
    try:
        async with deadline:
            returned = await bound.evaluator.fn(*args, **bound.params)
        _store(result, bound, returned)
    except BadInputError:
        raise
    except Exception as exc:
        if timeout_s is not None and deadline.expired():
            _timed_out(result, timeout_s)
            return
        _fail(result, exc)
    result.duration.FromNanoseconds(time.perf_counter_ns() - started)


def _record_call(bound: BoundEvaluator, ctx: EvalContext) -> Callable[[Record], EvaluationResult]:
    """The hot path: one synchronous record-scope evaluation, as a chunk's lane calls it for each record.

    No per-record objects beyond the result itself, and no per-record duration: for deterministic
    evaluators it would cost more than the evaluation and tell nothing.
    """
    ev = bound.evaluator
    fn, params, alias, ref = ev.fn, bound.params, bound.alias, ev.ref
    extra = (ctx,) if ev.wants_context else ()
    requirements = _requirements(bound, ctx)

    def call(record: Record) -> EvaluationResult:
        result = EvaluationResult(
            record_id=record.id, evaluator=alias, evaluator_ref=ref, trial=record.provenance.trial
        )
        missing = requirements(record)
        if missing is not None:
            result.outcome, result.reason = OUTCOME_SKIPPED, missing
            return result
        try:
            _store(result, bound, fn(record, *extra, **params))
        except BadInputError:
            raise
        except Exception as exc:
            _fail(result, exc)
        return result

    return call


async def _run_record_calls(
    calls: Sequence[tuple[list[EvaluationResult], BoundEvaluator, Callable[[Record], EvaluationResult], Record]],
    timeout_s: float | None,
) -> None:
    """Record-scope calls of several evaluators in one lane (one thread hop), each result appended to its list."""

    def expire(item: tuple[list[EvaluationResult], BoundEvaluator, Any, Record]) -> None:
        into, bound, _call, record = item
        into.append(_timed_out(_new_result(record.id, bound, record.provenance.trial), timeout_s or 0.0))

    await _in_lanes(calls, lambda item: item[2](item[3]), lambda item, result: item[0].append(result), expire,
                    timeout_s)


class _Lane:
    """Calls ``call`` on ``items[start:]`` in order, on one thread; the event loop watches each call's duration.

    Once abandoned (its call in progress overran, or its awaiting task was cancelled) the lane commits nothing
    more and starts no further call. The lock makes "the call finished and was committed" and "the call was
    abandoned" exclusive, so an abandoned call's late answer never lands in a result.
    """

    def __init__(
        self, items: Sequence[Any], call: Callable[[Any], Any], commit: Callable[[Any, Any], None], start: int
    ) -> None:
        self.items, self.call, self.commit, self.start = items, call, commit, start
        self.lock = threading.Lock()
        self.index = start
        self.started = time.monotonic()
        self.in_call = False
        self.abandoned = False

    def run(self) -> None:
        items, call, commit, lock = self.items, self.call, self.commit, self.lock
        for index in range(self.start, len(items)):
            with lock:
                if self.abandoned:
                    return
                self.index, self.started, self.in_call = index, time.monotonic(), True
            value = call(items[index])
            with lock:
                if self.abandoned:
                    return
                self.in_call = False
                commit(items[index], value)

    def abandon_overdue(self, timeout_s: float) -> tuple[int | None, float]:
        """(index of the call abandoned now, None if none) and the seconds until the call in progress is due."""
        with self.lock:
            if not self.in_call:
                return None, min(timeout_s, 0.05)  # between calls or not started: look again shortly
            left = self.started + timeout_s - time.monotonic()
            if left > 0:
                return None, left
            self.abandoned = True
            return self.index, 0.0

    def abandon(self) -> None:
        with self.lock:
            self.abandoned = True


async def _in_lanes(
    items: Sequence[Any],
    call: Callable[[Any], Any],
    commit: Callable[[Any, Any], None],
    expire: Callable[[Any], object],
    timeout_s: float | None,
) -> None:
    """``commit(item, call(item))`` for each item in order off the loop; an overdue call is ``expire(item)``."""
    loop = asyncio.get_running_loop()
    if timeout_s is None:
        # No deadline to watch (embedded runs): the plain loop, without a lane's per-call locking.
        stopped = threading.Event()

        def run_all() -> None:
            for item in items:
                if stopped.is_set():
                    return
                commit(item, call(item))

        try:
            await loop.run_in_executor(None, run_all)
        except asyncio.CancelledError:
            stopped.set()
            raise
        return
    start = 0
    while start < len(items):
        lane = _Lane(items, call, commit, start)
        future = loop.run_in_executor(None, lane.run)
        try:
            while True:
                overdue, wait = lane.abandon_overdue(timeout_s)
                if overdue is not None:
                    expire(items[overdue])
                    start = overdue + 1
                    break
                done, _ = await asyncio.wait({future}, timeout=wait)
                if done:
                    future.result()  # a BadInputError from the evaluator ends the evaluation
                    return
        except asyncio.CancelledError:
            lane.abandon()
            raise


@dataclass
class _Unit:
    """One evaluator call: what it is given and where its result goes."""

    bound: BoundEvaluator
    subject: Any
    result: EvaluationResult
    ctx: EvalContext


def _record_units(bound: BoundEvaluator, records: Sequence[Record], ctx: EvalContext) -> Iterator[_Unit]:
    scope = bound.evaluator.scope
    if scope == "record":
        for record in records:
            yield _Unit(bound, record, _new_result(record.id, bound, record.provenance.trial), ctx)
    elif scope == "span":
        for record in records:
            for index, step in enumerate(record.trajectory.steps):
                span = step.span_id or step.id or str(index)
                result = _new_result(f"{record.id}/{span}", bound, record.provenance.trial)
                yield _Unit(bound, (record, step), result, ctx)
    elif scope == "session":
        for session_id, members in group_sessions(records).items():
            yield _Unit(bound, members, _new_result(session_id, bound, 0), ctx)
    else:
        raise ValueError(f"{bound.evaluator.name}: scope {scope} is not evaluated per unit")


def session_key(record: Record) -> str:
    """The session a record belongs to: its trajectory's, its provenance's, or metadata session_id."""
    if record.trajectory.session_id:
        return record.trajectory.session_id
    if record.provenance.session_id:
        return record.provenance.session_id
    value = record.metadata.get("session_id")
    return value.string_value if value is not None and value.string_value else ""


def group_sessions(records: Sequence[Record]) -> dict[str, list[Record]]:
    sessions: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        sessions[session_key(record) or record.id].append(record)
    return dict(sessions)


def _prepare(unit: _Unit) -> tuple[Any, ...] | None:
    """The call's arguments, or None after marking the unit skipped for a missing requirement."""
    bound, subject = unit.bound, unit.subject
    if unit.result.outcome:  # decided before the call (no counterpart to compare with)
        return None
    if bound.evaluator.scope == "span":
        record, subject = subject
        missing = _missing(bound, record, unit.ctx)
    elif bound.evaluator.scope in ("session", "comparative"):
        missing = next((m for m in (_missing(bound, r, unit.ctx) for r in subject) if m), None)
    else:
        missing = _missing(bound, subject, unit.ctx)
    if missing is not None:
        unit.result.outcome, unit.result.reason = OUTCOME_SKIPPED, missing
        return None
    return _args(bound, subject, unit.ctx)


def _unit_call(unit: _Unit) -> EvaluationResult:
    """One span, session or comparative evaluation, into a copy of its result (committed unless abandoned)."""
    result = EvaluationResult()
    result.CopyFrom(unit.result)
    local = _Unit(unit.bound, unit.subject, result, unit.ctx)
    args = _prepare(local)
    if args is not None:
        _finish(result, unit.bound, partial(unit.bound.evaluator.fn, *args, **unit.bound.params))
    return result


async def _run_sync_chunk(units: list[_Unit], timeout_s: float | None) -> None:
    await _in_lanes(
        units,
        _unit_call,
        lambda unit, result: unit.result.CopyFrom(result),
        lambda unit: _timed_out(unit.result, timeout_s or 0.0),
        timeout_s,
    )


def _chunks(units: Iterator[_Unit], size: int) -> Iterator[list[_Unit]]:
    chunk: list[_Unit] = []
    for unit in units:
        chunk.append(unit)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


async def _run_async_units(
    units: list[_Unit],
    concurrency: int,
    progress: Progress | None,
    cancelled: Callable[[], bool],
    timeout_s: float | None,
) -> None:
    queue: asyncio.Queue[_Unit] = asyncio.Queue()
    for unit in units:
        queue.put_nowait(unit)

    async def worker() -> None:
        while True:
            if cancelled():
                return
            try:
                unit = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            args = _prepare(unit)
            if args is not None:
                await _finish_async(unit.result, unit.bound, args, timeout_s)
            if progress is not None:
                progress(1)

    await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(units))))))


def _run_dataset(
    bound: BoundEvaluator, records: Sequence[Record], ctx: EvalContext, options: RunnerOptions
) -> EvaluationResult:
    """Map every record, reduce once for the value, and reduce resamples for a percentile interval."""
    ev = bound.evaluator
    assert ev.mapper is not None
    result = _new_result(DATASET_RECORD_ID, bound, 0)
    mapped: list[Any] = []
    skipped = 0
    for record in records:
        if _missing(bound, record, ctx) is not None:
            skipped += 1
            continue
        try:
            mapped.append(ev.mapper(record, **bound.params))
        except SkipRecord:
            skipped += 1

    def reduce(values: list[Any]) -> list[Score]:
        args = (values, ctx) if ev.wants_context else (values,)
        return normalize_scores(ev, ev.fn(*args, **bound.params))

    _finish(result, bound, partial(reduce, mapped))
    if result.outcome != OUTCOME_SCORED:
        return result
    resamples: dict[str, list[float]] = defaultdict(list)
    rng = random.Random(options.seed)
    n = len(mapped)
    if n >= 2:
        for _ in range(options.bootstrap_resamples):
            sample = [mapped[rng.randrange(n)] for _ in range(n)]
            try:
                for score in reduce(sample):
                    kind = score.WhichOneof("value")
                    if kind in ("number", "passed"):
                        resamples[score.name].append(float(getattr(score, kind)))
            except Exception:  # a resample the reducer cannot handle (e.g. one class only) is dropped
                continue
    alpha = (1 - options.confidence) / 2
    for score in result.scores:
        score.metadata["n"].CopyFrom(to_value(n))
        score.metadata["skipped"].CopyFrom(to_value(skipped))
        values = sorted(resamples.get(score.name, []))
        if len(values) >= 10:
            low = values[int(alpha * (len(values) - 1))]
            high = values[int((1 - alpha) * (len(values) - 1))]
            score.metadata["ci_low"].CopyFrom(to_value(low))
            score.metadata["ci_high"].CopyFrom(to_value(high))
            score.metadata["resamples"].CopyFrom(to_value(len(values)))
    return result


async def _run_dataset_call(
    bound: BoundEvaluator, records: Sequence[Record], ctx: EvalContext, options: RunnerOptions
) -> EvaluationResult:
    """The whole map-reduce (and its bootstrap) is the dataset evaluator's one call, under one deadline."""
    done: list[EvaluationResult] = []
    timeout_s = options.call_timeout_s
    await _in_lanes(
        [bound],
        lambda b: _run_dataset(b, records, ctx, options),
        lambda _, result: done.append(result),
        lambda b: done.append(_timed_out(_new_result(DATASET_RECORD_ID, b, 0), timeout_s or 0.0)),
        timeout_s,
    )
    return done[0]


async def run_evaluators(
    records: Sequence[Record],
    evaluators: Sequence[BoundEvaluator],
    context_for: Callable[[BoundEvaluator], EvalContext],
    *,
    options: RunnerOptions = RunnerOptions(),
    progress: Progress | None = None,
    compare_with: Sequence[Sequence[Record]] = (),
    cancel: asyncio.Event | None = None,
) -> list[EvaluationResult]:
    """Evaluate and return results grouped by evaluator, in record order within each.

    ``compare_with`` holds the other result sets for comparative evaluators, aligned to ``records`` by
    (id, trial); comparative evaluators receive ``[record, *others]``. Once ``cancel`` is set, calls in
    flight finish and everything not yet started ends ``OUTCOME_CANCELLED``.
    """
    cancelled = cancel.is_set if cancel is not None else lambda: False
    per_evaluator: list[list[EvaluationResult]] = []
    sync_chunks: list[list[_Unit]] = []
    async_units: list[_Unit] = []
    record_jobs: list[tuple[int, BoundEvaluator, EvalContext]] = []
    for bound in evaluators:
        ctx = context_for(bound)
        scope = bound.evaluator.scope
        if scope == "dataset":
            per_evaluator.append([])
            continue
        if scope == "record" and not bound.evaluator.is_async:
            record_jobs.append((len(per_evaluator), bound, ctx))
            per_evaluator.append([])
            continue
        if scope == "comparative":
            units = list(_comparative_units(bound, records, compare_with, ctx))
        else:
            units = list(_record_units(bound, records, ctx))
        per_evaluator.append([u.result for u in units])
        if bound.evaluator.is_async:
            async_units.extend(units)
        else:
            sync_chunks.extend(_chunks(iter(units), options.chunk_size))

    async def run_sync() -> None:
        # Every sync record-scope evaluator's calls (evaluator by evaluator, records in order) cut into chunks
        # across evaluators, so a task of ten evaluators over fifty records is one thread hop, not ten.
        jobs = [(per_evaluator[index], bound, _record_call(bound, ctx)) for index, bound, ctx in record_jobs]
        calls = ((into, bound, call, record) for into, bound, call in jobs for record in records)
        while chunk := list(islice(calls, options.chunk_size)):
            if cancelled():
                for into, bound, _call, record in chunk:
                    into.append(_cancelled(_new_result(record.id, bound, record.provenance.trial)))
                continue
            await _run_record_calls(chunk, options.call_timeout_s)
            if progress is not None:
                progress(len(chunk))
        for unit_chunk in sync_chunks:
            if not cancelled():
                await _run_sync_chunk(unit_chunk, options.call_timeout_s)
                if progress is not None:
                    progress(len(unit_chunk))

    await asyncio.gather(
        run_sync(), _run_async_units(async_units, options.concurrency, progress, cancelled, options.call_timeout_s)
    )
    for index, bound in enumerate(evaluators):
        if bound.evaluator.scope == "dataset":
            if cancelled():
                per_evaluator[index] = [_cancelled(_new_result(DATASET_RECORD_ID, bound, 0))]
                continue
            per_evaluator[index] = [await _run_dataset_call(bound, records, context_for(bound), options)]
            if progress is not None:
                progress(len(records))
    results = [result for results in per_evaluator for result in results]
    for result in results:
        if not result.outcome:  # never started: the run was cancelled first
            _cancelled(result)
    return results


def _cancelled(result: EvaluationResult) -> EvaluationResult:
    result.outcome, result.reason = OUTCOME_CANCELLED, "cancelled before it ran"
    return result


def _comparative_units(
    bound: BoundEvaluator,
    records: Sequence[Record],
    others: Sequence[Sequence[Record]],
    ctx: EvalContext,
) -> Iterator[_Unit]:
    if not others:
        raise BadInputError(
            f"evaluator {bound.evaluator.name} is comparative: give a second result set to compare with "
            "(--compare-to FILE, or compare_to= in evaluate())"
        )
    indexes = [{(r.id, r.provenance.trial): r for r in other} for other in others]
    for record in records:
        key = (record.id, record.provenance.trial)
        result = _new_result(record.id, bound, record.provenance.trial)
        counterparts = [index.get(key) for index in indexes]
        if any(c is None for c in counterparts):
            result.outcome, result.reason = OUTCOME_SKIPPED, "no counterpart in the other result set"
            yield _Unit(bound, None, result, ctx)
            continue
        yield _Unit(bound, [record, *counterparts], result, ctx)


def units_total(records: Sequence[Record], evaluators: Sequence[BoundEvaluator]) -> int:
    """How many progress steps a run takes (for the progress bar)."""
    total = 0
    for bound in evaluators:
        scope = bound.evaluator.scope
        if scope == "span":
            total += sum(len(r.trajectory.steps) for r in records)
        elif scope == "session":
            total += len(group_sessions(records))
        else:
            total += len(records)
    return total
