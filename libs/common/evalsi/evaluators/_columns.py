"""Results written as columns (``ResultColumns``, what a task's results travel as), with no result message made for
the common one: a cheap record-scope evaluator's bare bool verdict.

A worker publishes its results as columns and an in-process run stores and folds them the same way
(``runs.result_columns``). Made from result messages, the columns cost a message per result (made, written into,
serialized, its fields read back): more than the evaluation itself for exact-match. Here a bool verdict's row is
assembled from serialized pieces, the record's ``record_id`` field, the evaluator's identity and verdict (both made
once per evaluator) and the record's ``trial`` field, in field-number order, so the bytes are those
``SerializeToString`` gives for the message the runner would have made. Any other outcome (a ``Score`` with an
explanation, a skip, an error, a deadline) is made as that message and serialized, so every row parses to exactly
the result the message path writes (``tests/engine/test_runner_columns.py``).
"""

from __future__ import annotations

import math
import operator
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from dataclasses import field as _field
from typing import Any

from evalsi.bus.v1alpha1.bus_pb2 import ResultColumns
from evalsi.datasets.held import TEXT_FIELDS, RecordColumns
from evalsi.datasets.wire import field, varint
from evalsi.errors import BadInputError
from evalsi.evaluators._context import EvalContext
from evalsi.evaluators._evaluator import BatchEntry, BatchVerdicts, BoundEvaluator, Verdict
from evalsi.evaluators._record_pass import MissingFields, RecordJob
from evalsi.evaluators._slots import RecordKeys, ResultSlots, cancelled, fail, skipped, timed_out
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateResponse
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import ERROR_KIND_INFRA, OUTCOME_ERROR, OUTCOME_SCORED, EvaluationResult

NOT_FOLDABLE = float("nan")  # no score is NaN (a NaN score is an evaluator error), so it marks "read the result"
_ID_TAG, _TRIAL_TAG = b"\x0a", b"\x40"  # EvaluationResult.record_id (1, bytes) and .trial (8, varint)
_ID_HEADS = [_ID_TAG + bytes((size,)) for size in range(128)]  # record_id's tag and a one-byte length
_RESULTS_TAG = b"\x0a"  # EvaluateResponse.results (1, bytes)
# EvaluationResult.outcome (4) = SCORED, .scores (5); Score.name (1), .number (2, a little-endian double), .passed
# (3: False, True), .explanation (6).
_SCORED, _SCORES = b"\x20" + bytes((OUTCOME_SCORED,)), b"\x2a"
_SCORE_NAME, _NUMBER, _PASSED, _EXPLANATION = b"\x0a", b"\x11", (b"\x18\x00", b"\x18\x01"), b"\x32"
_DOUBLE = struct.Struct("<d").pack


def fold_value(result: EvaluationResult) -> tuple[float, str]:
    """What the summaries fold of ``result``: its one pass/fail (1.0 or 0.0) or number score and that score's name,
    or (NaN, "") when it is not scored with exactly one such score (the fold then reads the result)."""
    if result.outcome == OUTCOME_SCORED:
        scores = result.scores
        if len(scores) == 1:
            score = scores[0]
            kind = score.WhichOneof("value")
            if kind == "passed":
                return (1.0 if score.passed else 0.0), score.name
            if kind == "number":
                return score.number, score.name
    return NOT_FOLDABLE, ""


@dataclass
class ColumnLists:
    """``ResultColumns``' columns as Python lists, what the runner writes into: an in-process run hands them to its
    driver as they are, and a worker copies them into its task's ``ResultColumns`` once (``copy_to``). Written into
    the message directly, every entry was copied into it and copied out again by each column the driver read (a
    fifth of an embedded ``evaluate()``)."""

    data: list[bytes] = _field(default_factory=list)
    evaluators: list[str] = _field(default_factory=list)
    record_ids: list[str] = _field(default_factory=list)
    trials: list[int] = _field(default_factory=list)
    outcomes: list[int] = _field(default_factory=list)
    values: list[float] = _field(default_factory=list)
    score_names: list[str] = _field(default_factory=list)

    def copy_to(self, message: ResultColumns) -> None:
        message.data.extend(self.data)
        message.evaluators.extend(self.evaluators)
        message.record_ids.extend(self.record_ids)
        message.trials.extend(self.trials)
        message.outcomes.extend(self.outcomes)
        message.values.extend(self.values)
        message.score_names.extend(self.score_names)


Columns = ResultColumns | ColumnLists
"""A task's results as columns: the bus message, or its lists in this process."""


def append_results(columns: Columns, results: Sequence[EvaluationResult]) -> None:
    """``results`` (messages) added to ``columns``, in order."""
    # A field at a time over a list (a comprehension per column): a worker does this for every result of the shapes
    # the runner does not write as columns itself.
    columns.data.extend([r.SerializeToString() for r in results])
    columns.evaluators.extend([r.evaluator for r in results])
    columns.record_ids.extend([r.record_id for r in results])
    columns.trials.extend([r.trial for r in results])
    columns.outcomes.extend([r.outcome for r in results])
    folded = [fold_value(r) for r in results]
    columns.values.extend([value for value, _name in folded])
    columns.score_names.extend([name for _value, name in folded])


def infra_errors_in(columns: Columns) -> int:
    """How many results in ``columns`` are infrastructure errors (only error rows are read)."""
    return sum(
        1 for outcome, data in zip(columns.outcomes, columns.data, strict=True)
        if outcome == OUTCOME_ERROR and EvaluationResult.FromString(data).error_kind == ERROR_KIND_INFRA
    )


def rows_as_results(rows: Sequence[bytes]) -> ResultSlots:
    """Result rows parsed back into messages (one parse for all of them), as the slots of a costed evaluation, so
    their usage sums as the message path's does."""
    holder = EvaluateResponse()
    slots = ResultSlots(holder.results)
    slots.costed = True
    holder.MergeFromString(b"".join([_RESULTS_TAG + varint(len(row)) + row for row in rows]))
    return slots


def record_fields(keys: RecordKeys) -> tuple[list[bytes], list[bytes]]:
    """Each record's ``record_id`` field and ``trial`` field (b"" for trial 0) of its results, serialized once for
    every evaluator; a column at a time."""
    encoded = list(map(str.encode, keys.ids))
    sizes = list(map(len, encoded))
    if max(sizes, default=0) < 128:
        ids = list(map(operator.add, map(_ID_HEADS.__getitem__, sizes), encoded))
    else:
        ids = [_ID_TAG + varint(size) + data for size, data in zip(sizes, encoded, strict=True)]
    trials = keys.trials
    if not any(trials):
        return ids, [b""] * len(trials)
    return ids, [_TRIAL_TAG + varint(trial) if trial else b"" for trial in trials]


class TextColumns:
    """The records' texts (``Content.text`` of a field, "" when it is not text), a column per field, read once for
    every batch form of one evaluation that asks for them."""

    def __init__(self, records: Sequence[Record], held: RecordColumns | None = None) -> None:
        self._records = records
        self._held = held  # the columns the records were made of (datasets.held), when they were
        self._columns: dict[str, list[str]] = {}

    def texts(self, name: str) -> list[str]:
        column = self._columns.get(name)
        if column is None:
            if self._held is not None and name in TEXT_FIELDS:
                column = self._held.texts(name)
            else:
                column = [getattr(record, name).text for record in self._records]
            self._columns[name] = column
        return column


class ColumnJob(RecordJob):
    """A cheap record-scope evaluator over the batch's records, its results written as column entries (``data``,
    ``outcomes``, ``values``, ``names``, one per record in order) instead of into messages. An entry never written
    (the run was cancelled first) has ``data`` None."""

    def __init__(
        self,
        bound: BoundEvaluator,
        ctx: EvalContext,
        records: Sequence[Record],
        keys: RecordKeys,
        fields: tuple[list[bytes], list[bytes]],
        missing: MissingFields,
        slots: ResultSlots,
        texts: TextColumns,
    ) -> None:
        super().__init__(bound, ctx, records, [], missing, slots)
        self.texts = texts
        count = len(records)
        self.keys = keys
        self.id_fields, self.trial_fields = fields
        self.data: list[bytes | None] = [None] * count
        self.outcomes = [0] * count
        self.values = [NOT_FOLDABLE] * count
        self.names = [""] * count
        self.batched_to = 0  # records before this index were offered to the batch form
        identity = EvaluationResult(evaluator=bound.alias, evaluator_ref=bound.evaluator.ref).SerializeToString()
        self.identity = identity
        output = bound.evaluator.outputs[0].name if len(bound.evaluator.outputs) == 1 else ""
        self.output = output
        verdicts = self.verdicts
        # identity + (outcome, score) of False and True: what sits between a row's record_id and its trial.
        self.middles = None if verdicts is None else (identity + verdicts[0], identity + verdicts[1])
        # A batch form's Verdict: identity, outcome, then the score's name and pass/fail before its explanation.
        name = field(_SCORE_NAME, output.encode()) if output else b""
        self.score_heads = (name + _PASSED[0], name + _PASSED[1])
        # A batch form's numbers: per declared output, the bytes of its Score entry up to the double (a Score of a
        # name and a number always has the same length) and the whole entries of its pass and fail.
        self.output_heads = [_output_heads(o.name, o.type) for o in bound.evaluator.outputs]
        kind = bound.evaluator.outputs[0].type if output else ""
        self.number_middle = (identity + _SCORED + self.output_heads[0][0]) if kind == "number" else None
        # A batch form's pass/fails are a boolean output's only (a bool for a number output is left to the function).
        self.bool_middles = self.middles if kind == "boolean" else None

    def _explained(self, verdict: Verdict) -> bytes:
        """A result's bytes between its record_id and trial for a batch form's ``Verdict``: the bytes ``store`` gives
        the returned ``Score(passed=..., explanation=...)``."""
        passed, explanation = verdict
        score = self.score_heads[passed]
        if explanation:
            score += field(_EXPLANATION, explanation.encode())
        return self.identity + _SCORED + field(_SCORES, score)

    def _message(self, index: int) -> EvaluationResult:
        record_id, trial = self.keys.ids[index], self.keys.trials[index]
        return EvaluationResult(
            record_id=record_id, evaluator=self.bound.alias, evaluator_ref=self.bound.evaluator.ref, trial=trial
        )

    def _put(self, index: int, result: EvaluationResult) -> None:
        self.data[index] = result.SerializeToString()
        self.outcomes[index] = result.outcome
        self.values[index], self.names[index] = fold_value(result)

    def _failed(self, index: int, mark: Callable[[EvaluationResult], Any]) -> None:
        result = self._message(index)
        mark(result)
        self._put(index, result)

    def run_inline(self, start: int, stop: int, timeout_s: float | None, until: float) -> int:
        """``RecordJob.run_inline``, writing column entries: the same outcomes, the same bytes."""
        call, records, reasons, store, bound = self.call, self.records, self.reasons, self.slots.store, self.bound
        data, outcomes, values, names = self.data, self.outcomes, self.values, self.names
        id_fields, trial_fields, middles, output = self.id_fields, self.trial_fields, self.middles, self.output
        pending: Sequence[int] = range(start, stop)
        if self.bound.evaluator.batch is not None:
            # The batch form's verdicts (the function's own), asked once for the records not asked yet: a resumed
            # slice (the last one ran out of time) only takes up the undecided ones, instead of re-asking the batch
            # for all the rest, which made a batch that outlasts a slice quadratic in the records it leaves undecided.
            first = max(start, self.batched_to)
            decided = self._decided(first, stop) if first < stop else None
            if decided is not None:
                self._write_decided(first, decided)
            self.batched_to = max(self.batched_to, stop)
            pending = [index for index in pending if data[index] is None]
        clock = time.perf_counter
        limit = float("inf") if timeout_s is None else timeout_s
        last = clock()
        for index in pending:
            reason = reasons[index]
            if reason is not None:
                self._failed(index, lambda result, reason=reason: skipped(result, reason))  # type: ignore[misc]
                continue
            result: EvaluationResult | None = None  # made only for what is not a bare bool verdict
            try:
                returned = call(records[index])
                now = clock()
                if now - last > limit:
                    result = self._message(index)
                    timed_out(result, limit)
                    self._put(index, result)
                elif returned.__class__ is bool and middles is not None:
                    data[index] = id_fields[index] + middles[returned] + trial_fields[index]
                    outcomes[index] = OUTCOME_SCORED
                    values[index] = 1.0 if returned else 0.0
                    names[index] = output
                else:
                    result = self._message(index)
                    store(result, bound, returned)
                    self._put(index, result)
            except BadInputError:
                raise
            except Exception as exc:
                now = clock()
                if result is None:
                    result = self._message(index)
                if now - last > limit:
                    timed_out(result, limit)
                else:
                    fail(result, exc)  # as the message path: into the result a failed store may have written to
                self._put(index, result)
            if now > until:
                return index + 1
            last = now
        return stop

    def _write_decided(self, start: int, decided: BatchVerdicts) -> None:
        """The entries of the records from ``start`` on that the batch form decided (an entry of the evaluator's
        outputs, and no required field missing), written a column at a time: the bytes and values the loop would
        write one by one."""
        reasons = self.reasons
        stop = start + len(decided)
        whole = None not in decided and reasons[start:stop].count(None) == len(decided)  # the usual batch
        chosen: Sequence[int] = range(start, stop) if whole else [
            index for index, entry in enumerate(decided, start) if entry is not None and reasons[index] is None]
        if not chosen:
            return
        picked = decided if whole else [decided[index - start] for index in chosen]
        fast = self._middles(picked)
        if fast is not None:
            middle, values = fast
        else:  # entries of several kinds, or some not one of the outputs' (or not finite): the function decides those
            slow, folded = self._middles_one_by_one(picked)
            kept = [position for position, row in enumerate(slow) if row is not None]
            if len(kept) < len(picked):
                whole = False
                chosen = [chosen[position] for position in kept]
            middle = [row for row in slow if row is not None]
            values = [folded[position] for position in kept]
        names = [self.output if value == value else "" for value in values]  # NaN: a result of several scores
        if whole:
            ids, trials = self.id_fields[start:stop], self.trial_fields[start:stop]
        else:
            ids, trials = [self.id_fields[i] for i in chosen], [self.trial_fields[i] for i in chosen]
        rows = list(map(b"".join, zip(ids, middle, trials, strict=True)))
        if whole:
            self.data[start:stop] = rows
            self.outcomes[start:stop] = [OUTCOME_SCORED] * len(rows)
            self.values[start:stop] = values
            self.names[start:stop] = names
            return
        data, outcomes, values_at, names_at = self.data, self.outcomes, self.values, self.names
        for index, row, value, name in zip(chosen, rows, values, names, strict=True):
            data[index], outcomes[index], values_at[index], names_at[index] = row, OUTCOME_SCORED, value, name

    def _middles(self, picked: Sequence[BatchEntry]) -> tuple[list[bytes], list[float]] | None:
        """Each entry's bytes between its record_id and trial, and its folded value, a column at a time for the
        common batches (all bare bools, or all finite numbers, of a single output); None otherwise."""
        kinds = set(map(type, picked))
        if kinds == {bool} and self.bool_middles is not None:
            return list(map(self.bool_middles.__getitem__, picked)), list(map(float, picked))  # type: ignore[arg-type]
        if kinds == {bool, Verdict} and self.bool_middles is not None:
            # Passes as bare bools, failures with their explanation (exact-match's batch): in one loop, not a call
            # of ``_middle`` an entry.
            middles, explained = self.bool_middles, self._explained
            return ([middles[entry] if entry.__class__ is bool else explained(entry)  # type: ignore[arg-type]
                     for entry in picked],
                    [1.0 if entry is True or (entry.__class__ is Verdict and entry[0]) else 0.0
                     for entry in picked])
        head = self.number_middle
        if head is not None and kinds <= {float, int} and math.isfinite(sum(picked)):  # type: ignore[arg-type]
            # A sum is finite only if every term is (NaN and the infinities stay in it); one that overflowed
            # takes the slower path, which checks each.
            values = list(map(float, picked))  # type: ignore[arg-type]
            return [head + _DOUBLE(value) for value in values], values
        return None

    def _middles_one_by_one(self, picked: Sequence[BatchEntry]) -> tuple[list[bytes | None], list[float]]:
        """``_middles`` entry by entry: None for an entry that is not one of the outputs' (the function decides it)."""
        middles: list[bytes | None] = []
        values: list[float] = []
        for entry in picked:
            middle, value = self._middle(entry)
            middles.append(middle)
            values.append(value)
        return middles, values

    def _middle(self, entry: BatchEntry) -> tuple[bytes | None, float]:
        outputs = self.output_heads
        if entry.__class__ is bool:
            if self.bool_middles is None:
                return None, NOT_FOLDABLE
            return self.bool_middles[entry], 1.0 if entry else 0.0
        if isinstance(entry, Verdict):
            if self.bool_middles is None:
                return None, NOT_FOLDABLE
            return self._explained(entry), 1.0 if entry.passed else 0.0
        if isinstance(entry, tuple):
            if len(entry) != len(outputs):
                return None, NOT_FOLDABLE
            scores = [_score_entry(heads, value) for heads, value in zip(outputs, entry, strict=True)]
            if None in scores:
                return None, NOT_FOLDABLE
            folded = NOT_FOLDABLE if len(entry) != 1 else float(entry[0])
            return self.identity + _SCORED + b"".join(scores), folded  # type: ignore[arg-type]
        if len(outputs) == 1:
            score = _score_entry(outputs[0], entry)
            if score is not None and not isinstance(entry, bool):
                return self.identity + _SCORED + score, float(entry)  # type: ignore[arg-type]
        return None, NOT_FOLDABLE

    def _decided(self, start: int, stop: int) -> BatchVerdicts | None:
        """The batch form's verdicts for records [start, stop) (None without a batch form, or when it fails: the
        function, the evaluator's definition, then decides every record). Its time is not held to the per-call
        deadline: a cheap evaluator's batch is bounded by its texts' length, as each call is."""
        batch = self.bound.evaluator.batch
        if batch is None:
            return None
        texts = {name: self.texts.texts(name)[start:stop] for name in self.bound.evaluator.requires}
        try:
            decided = batch(texts, **self.bound.params)
        except Exception:
            return None
        return decided if len(decided) == stop - start else None

    def append_to(self, columns: Columns) -> None:
        """This job's entries added to ``columns`` in record order; one never written ends cancelled."""
        data = self.data
        for index in [i for i, entry in enumerate(data) if entry is None]:
            self._failed(index, cancelled)
        columns.data.extend(data)  # type: ignore[arg-type]
        columns.evaluators.extend([self.bound.alias] * len(data))
        columns.record_ids.extend(self.keys.ids)
        columns.trials.extend(self.keys.trials)
        columns.outcomes.extend(self.outcomes)
        columns.values.extend(self.values)
        columns.score_names.extend(self.names)


OutputHeads = tuple[bytes, bytes, bytes, str]


def _output_heads(name: str, kind: str) -> OutputHeads:
    """An output's Score entry (``EvaluationResult.scores``) up to its number's double, and whole for fail and pass
    (the bytes ``SerializeToString`` gives for ``Score(name=name, number=...)`` and ``Score(name=name, passed=...)``),
    and the output's declared type."""
    named = field(_SCORE_NAME, name.encode())
    number = named + _NUMBER
    return (_SCORES + varint(len(number) + 8) + number, field(_SCORES, named + _PASSED[0]),
            field(_SCORES, named + _PASSED[1]), kind)


def _score_entry(heads: OutputHeads, value: object) -> bytes | None:
    """One output's Score entry for a batch form's bool (a boolean output's) or finite number (a number output's);
    None for anything else, which the function then decides."""
    if value.__class__ is bool:
        if heads[3] != "boolean":
            return None
        return heads[2] if value else heads[1]
    if heads[3] == "number" and isinstance(value, int | float) and math.isfinite(value):
        return heads[0] + _DOUBLE(value)
    return None
