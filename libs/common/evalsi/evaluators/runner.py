"""The batched runner: every bound evaluator over every record, with bounded concurrency.

Synchronous evaluators run in chunks on a worker thread (the loop stays free, and a chunk costs one
thread hop rather than one task per record); the record-scope calls of several evaluators share chunks, so a
worker's task of ten evaluators over fifty records is one hop. A synchronous record-scope evaluator declared
``cheap`` (microseconds a call, bounded by its input) runs its chunks on the event loop instead: the hop would
cost more than its calls (``_record_pass``). Asynchronous ones (judges) share one pool of workers pulling from a
queue, so one slow judge call holds one worker and never stalls the others.

With ``call_timeout_s`` every evaluator call has a deadline. An async call is cancelled when it passes. A
sync call cannot be interrupted (Python cannot stop a thread): the loop abandons it, reports its result as an
evaluator error, and goes on with the rest of the chunk on a fresh thread; the abandoned thread ends when
that call returns and does nothing after it (``_lanes``). When the awaiting task is cancelled (a request's
deadline), the chunk's thread likewise stops after the call in progress. A cheap call that passes the deadline
gets the same evaluator error, once it returns; its answer is discarded.

Results are built in place, in their final order, in one container (``_slots``): the caller's (a TaskResult's
or a response's ``results``) when it passes ``into``, so no result is copied after it is written.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from evalsi.datasets.held import HeldRecords
from evalsi.errors import BadInputError, SkipRecord
from evalsi.evaluators._columns import (
    ColumnJob,
    ColumnLists,
    Columns,
    TextColumns,
    append_results,
    infra_errors_in,
    record_fields,
    rows_as_results,
)
from evalsi.evaluators._context import JUDGE_PENDING, EvalContext
from evalsi.evaluators._evaluator import BoundEvaluator, CountedStacked, normalize_scores, plain_figures
from evalsi.evaluators._lanes import in_lanes
from evalsi.evaluators._record_pass import MissingFields, Progress, RecordJob, run_record_jobs
from evalsi.evaluators._slots import (
    RecordKeys,
    Results,
    ResultSlots,
    cancelled,
    fail,
    skipped,
    store_plain,
    timed_out,
)
from evalsi.records import has_content, to_value
from evalsi.stats.defaults import DEFAULT_BOOTSTRAP_RESAMPLES, DEFAULT_CONFIDENCE
from evalsi.v1alpha1.record_pb2 import Record, Usage
from evalsi.v1alpha1.score_pb2 import OUTCOME_SCORED, EvaluationResult, Score

DATASET_RECORD_ID = "*"
__all__ = ["DATASET_RECORD_ID", "ColumnLists", "Columns", "Results", "RunnerOptions", "append_results",
           "infra_errors_in", "run_evaluators"]


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


def _missing(bound: BoundEvaluator, record: Record, ctx: EvalContext) -> str | None:
    missing = [f for f in bound.evaluator.requires if f != "judge" and not has_content(record, f)]
    if missing:
        return "missing " + ", ".join(missing)
    if "judge" in bound.evaluator.requires and ctx.judge is None:
        return f"{JUDGE_PENDING}: no judge configured"
    return None


def _args(bound: BoundEvaluator, subject: Any, ctx: EvalContext) -> tuple[Any, ...]:
    return (subject, ctx) if bound.evaluator.wants_context else (subject,)


def _finish(result: EvaluationResult, bound: BoundEvaluator, call: Callable[[], Any]) -> None:
    """Run one evaluation and record its outcome and duration on ``result``."""
    started = time.perf_counter_ns()
    try:
        store_plain(result, bound, call())
    except BadInputError:
        raise
    except Exception as exc:
        fail(result, exc)
    result.duration.FromNanoseconds(time.perf_counter_ns() - started)


async def _finish_async(
    slots: ResultSlots, result: EvaluationResult, bound: BoundEvaluator, args: tuple[Any, ...],
    timeout_s: float | None,
) -> None:
    started = time.perf_counter_ns()
    deadline = asyncio.timeout(timeout_s)
    try:
        async with deadline:
            returned = await bound.evaluator.fn(*args, **bound.params)
        slots.store(result, bound, returned)
    except BadInputError:
        raise
    except Exception as exc:
        if timeout_s is not None and deadline.expired():
            timed_out(result, timeout_s)
            return
        fail(result, exc)
    result.duration.FromNanoseconds(time.perf_counter_ns() - started)


@dataclass
class _Unit:
    """One evaluator call: what it is given and where its result goes."""

    bound: BoundEvaluator
    subject: Any
    result: EvaluationResult
    ctx: EvalContext


def _record_units(
    bound: BoundEvaluator, records: Sequence[Record], ctx: EvalContext, slots: ResultSlots, keys: RecordKeys
) -> Iterator[_Unit]:
    scope = bound.evaluator.scope
    if scope == "record":
        for record, result in zip(records, slots.for_records(bound, keys), strict=True):
            yield _Unit(bound, record, result, ctx)
    elif scope == "span":
        for record in records:
            for index, step in enumerate(record.trajectory.steps):
                span = step.span_id or step.id or str(index)
                result = slots.new(f"{record.id}/{span}", bound, record.provenance.trial)
                yield _Unit(bound, (record, step), result, ctx)
    elif scope == "session":
        for session_id, members in group_sessions(records).items():
            yield _Unit(bound, members, slots.new(session_id, bound, 0), ctx)
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
        skipped(unit.result, missing)
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


async def _run_sync_chunk(units: list[_Unit], slots: ResultSlots, timeout_s: float | None) -> None:
    await in_lanes(
        units,
        _unit_call,
        lambda unit, result: slots.copy_into(unit.result, result),
        lambda unit: timed_out(unit.result, timeout_s or 0.0),
        timeout_s,
    )


async def _run_async_units(
    units: list[_Unit],
    slots: ResultSlots,
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
                await _finish_async(slots, unit.result, unit.bound, args, timeout_s)
            if progress is not None:
                progress(1)

    await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(units))))))


def _batch_mapped(bound: BoundEvaluator, records: Sequence[Record], chunk_size: int) -> list[Any]:
    """The mapper's batch form (``map_batch``) over the records' text columns, a chunk at a time: per record its
    value, or None for the mapper to decide (every record, without a batch form or where it fails)."""
    map_batch = bound.evaluator.map_batch
    if map_batch is None:
        return [None] * len(records)
    out: list[Any] = []
    for start in range(0, len(records), chunk_size):
        chunk = records[start:start + chunk_size]
        texts = {name: [getattr(record, name).text for record in chunk] for name in bound.evaluator.requires}
        try:
            values = list(map_batch(texts, **bound.params))
        except Exception:  # the mapper, the evaluator's definition, then decides these records
            values = []
        out += values if len(values) == len(chunk) else [None] * len(chunk)
    return out


def _run_dataset(
    bound: BoundEvaluator, records: Sequence[Record], ctx: EvalContext, options: RunnerOptions
) -> EvaluationResult:
    """Map every record, reduce once for the value, and reduce resamples for a percentile interval."""
    ev = bound.evaluator
    assert ev.mapper is not None
    result = EvaluationResult(
        record_id=DATASET_RECORD_ID, evaluator=bound.alias, evaluator_ref=ev.ref, trial=0
    )
    mapped: list[Any] = []
    units: list[str] = []  # the record each mapped value came from: its trials are resampled together
    present = [record for record in records if _missing(bound, record, ctx) is None]
    skipped = len(records) - len(present)
    batched = _batch_mapped(bound, present, options.chunk_size)
    for record, value in zip(present, batched, strict=True):
        if value is None:
            try:
                value = ev.mapper(record, **bound.params)
            except SkipRecord:
                skipped += 1
                continue
        mapped.append(value)
        units.append(record.id)

    # With ``stack``, the reduce gets the stacked values and the bootstrap takes its resamples from them by position.
    stacked = None
    if ev.stack is not None and mapped:
        try:
            stacked = ev.stack(mapped)
        except BadInputError:
            raise
        except Exception as exc:  # the evaluator's own failure (or skip), as a reduce's would be
            fail(result, exc)
            return result
    data = mapped if stacked is None else stacked

    def reduce(values: Any) -> list[Score]:
        args = (values, ctx) if ev.wants_context else (values,)
        return normalize_scores(ev, ev.fn(*args, **bound.params))

    def figures(values: Any) -> dict[str, float]:
        args = (values, ctx) if ev.wants_context else (values,)
        returned = ev.fn(*args, **bound.params)
        plain = plain_figures(ev, returned)
        if plain is not None:
            return plain
        return {score.name: float(getattr(score, kind)) for score in normalize_scores(ev, returned)
                if (kind := score.WhichOneof("value")) in ("number", "passed")}

    _finish(result, bound, partial(reduce, data))
    if result.outcome != OUTCOME_SCORED:
        return result
    from evalsi.stats.bootstrap import reducer_bootstrap  # numpy: only for dataset-scope evaluators

    by_cell = stacked if isinstance(stacked, CountedStacked) and stacked.cells is not None else None
    # No number or pass/fail output (a confusion matrix): no figure a resample could give an interval to.
    boot = None if not any(out.type in ("number", "boolean") for out in ev.outputs) else reducer_bootstrap(
        mapped, units, figures, level=options.confidence, seed=options.seed, resamples=options.bootstrap_resamples,
        take=None if stacked is None else stacked.take, cells=None if by_cell is None else by_cell.cells,
        counted=None if by_cell is None else by_cell.counted)
    for score in result.scores:
        score.metadata["n"].CopyFrom(to_value(len(mapped)))
        score.metadata["skipped"].CopyFrom(to_value(skipped))
        if boot is None:
            continue
        interval = boot.intervals.get(score.name)
        if interval is not None:
            score.metadata["ci_low"].CopyFrom(to_value(interval[0]))
            score.metadata["ci_high"].CopyFrom(to_value(interval[1]))
            score.metadata["resamples"].CopyFrom(to_value(boot.resamples[score.name]))
        if boot.failed:
            score.metadata["failed_resamples"].CopyFrom(to_value(boot.failed))
    return result


async def _run_dataset_call(
    slot: EvaluationResult, slots: ResultSlots, bound: BoundEvaluator, records: Sequence[Record], ctx: EvalContext,
    options: RunnerOptions,
) -> None:
    """The whole map-reduce (and its bootstrap) is the dataset evaluator's one call, under one deadline."""
    timeout_s = options.call_timeout_s
    await in_lanes(
        [bound],
        lambda b: _run_dataset(b, records, ctx, options),
        lambda _, result: slots.copy_into(slot, result),
        lambda _: timed_out(slot, timeout_s or 0.0),
        timeout_s,
    )


async def run_evaluators(
    records: Sequence[Record],
    evaluators: Sequence[BoundEvaluator],
    context_for: Callable[[BoundEvaluator], EvalContext],
    *,
    options: RunnerOptions = RunnerOptions(),
    progress: Progress | None = None,
    compare_with: Sequence[Sequence[Record]] = (),
    cancel: asyncio.Event | None = None,
    into: Results | None = None,
    columns: Columns | None = None,
    usage: Usage | None = None,
) -> list[EvaluationResult]:
    """Evaluate and return results grouped by evaluator, in record order within each.

    ``compare_with`` holds the other result sets for comparative evaluators, aligned to ``records`` by
    (id, trial); comparative evaluators receive ``[record, *others]``. Once ``cancel`` is set, calls in
    flight finish and everything not yet started ends ``OUTCOME_CANCELLED``. With ``into`` (a message's
    repeated ``results``) the results are appended there, and the returned ones are those messages. With
    ``columns`` they are appended there as columns instead (in the same order, each row the bytes of the same
    result), cheap evaluators' bool verdicts without a message made (``_columns``), and nothing is returned. With
    ``usage``, the tokens and cost the scores carry (a judge's) are added to it.
    """
    if columns is not None and into is not None:
        raise ValueError("run_evaluators: give into or columns, not both")
    cancelled_ = cancel.is_set if cancel is not None else lambda: False
    slots = ResultSlots(into)
    # Records held with the columns they were made of (datasets.held): ids, trials and texts read from those, not
    # through each record's message.
    held = records.columns if isinstance(records, HeldRecords) else None
    keys = RecordKeys([], [])
    if any(b.evaluator.scope == "record" for b in evaluators):
        keys = RecordKeys(held.ids, held.trials) if held is not None else RecordKeys.of(records)
    fields = record_fields(keys) if columns is not None else ([], [])
    texts = TextColumns(records, held)
    missing = MissingFields(records, held)
    record_jobs: list[RecordJob] = []
    # Column mode: per evaluator, its column job, or the range of its results among the messages.
    parts: list[ColumnJob | tuple[int, int]] = []
    sync_chunks: list[list[_Unit]] = []
    async_units: list[_Unit] = []
    dataset_slots: list[tuple[EvaluationResult, BoundEvaluator]] = []
    for bound in evaluators:  # every result made now, in its final place; the calls fill them in
        ctx = context_for(bound)
        if columns is not None and bound.evaluator.scope == "record" and bound.evaluator.cheap:
            job = ColumnJob(bound, ctx, records, keys, fields, missing, slots, texts)
            record_jobs.append(job)
            parts.append(job)
            continue
        first = slots.count()
        scope = bound.evaluator.scope
        if scope == "dataset":
            dataset_slots.append((slots.new(DATASET_RECORD_ID, bound, 0), bound))
        elif scope == "record" and not bound.evaluator.is_async:
            results = slots.for_records(bound, keys)
            record_jobs.append(RecordJob(bound, ctx, records, results, missing, slots))
        else:
            if scope == "comparative":
                units = list(_comparative_units(bound, records, compare_with, ctx, slots))
            else:
                units = list(_record_units(bound, records, ctx, slots, keys))
            if bound.evaluator.is_async:
                async_units.extend(units)
            else:
                sync_chunks.extend(_chunks(iter(units), options.chunk_size))
        parts.append((first, slots.count()))

    async def run_sync() -> None:
        await run_record_jobs(record_jobs, options.chunk_size, options.call_timeout_s, progress, cancelled_)
        for unit_chunk in sync_chunks:
            if not cancelled_():
                await _run_sync_chunk(unit_chunk, slots, options.call_timeout_s)
                if progress is not None:
                    progress(len(unit_chunk))

    if async_units:
        await asyncio.gather(
            run_sync(),
            _run_async_units(async_units, slots, options.concurrency, progress, cancelled_, options.call_timeout_s),
        )
    else:  # deterministic evaluators only: no tasks to schedule
        await run_sync()
    for slot, bound in dataset_slots:
        if cancelled_():
            break
        await _run_dataset_call(slot, slots, bound, records, context_for(bound), options)
        if progress is not None:
            progress(len(records))
    results = slots.results()
    for result in results:
        if not result.outcome:  # never started: the run was cancelled first
            cancelled(result)
    if columns is not None:
        written = len(columns.data)
        _to_columns(parts, results, columns)
        results = []
        if slots.costed:  # rare (a judge's or a cheap evaluator's cost): summed from the rows, in result order
            slots = rows_as_results(columns.data[written:])
    if usage is not None:
        totals = slots.usage()
        usage.input_tokens += totals.input_tokens
        usage.output_tokens += totals.output_tokens
        usage.total_tokens += totals.total_tokens
        if totals.HasField("cost_usd"):  # no score carried a cost: the cost stays unknown, not 0
            usage.cost_usd += totals.cost_usd
    return results


def _to_columns(
    parts: Sequence[ColumnJob | tuple[int, int]], messages: Sequence[EvaluationResult], columns: Columns
) -> None:
    """Every evaluator's results into ``columns``, in evaluator order: a column job's entries, or its messages."""
    for part in parts:
        if isinstance(part, ColumnJob):
            part.append_to(columns)
        else:
            append_results(columns, messages[part[0] : part[1]])


def _chunks(units: Iterator[_Unit], size: int) -> Iterator[list[_Unit]]:
    chunk: list[_Unit] = []
    for unit in units:
        chunk.append(unit)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _comparative_units(
    bound: BoundEvaluator,
    records: Sequence[Record],
    others: Sequence[Sequence[Record]],
    ctx: EvalContext,
    slots: ResultSlots,
) -> Iterator[_Unit]:
    if not others:
        raise BadInputError(
            f"evaluator {bound.evaluator.name} is comparative: give a second result set to compare with "
            "(--compare-to FILE, or compare_to= in evaluate())"
        )
    indexes = [{(r.id, r.provenance.trial): r for r in other} for other in others]
    for record in records:
        key = (record.id, record.provenance.trial)
        result = slots.new(record.id, bound, record.provenance.trial)
        counterparts = [index.get(key) for index in indexes]
        if any(c is None for c in counterparts):
            skipped(result, "no counterpart in the other result set")
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
