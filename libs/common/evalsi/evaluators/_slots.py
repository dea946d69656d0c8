"""Where an evaluation's results are written: one container, every result in its final place, built once.

Each result is created in the container that will carry it (a TaskResult's or a response's ``results`` when the
caller gives one), with its identity (record, evaluator, trial) before any call runs, and its outcome written
into it when the call ends. Nothing is copied afterwards: with the upb backend, appending a finished message to
another message's repeated field copies it, and that copy cost more than a deterministic evaluation.

A record-scope result is assembled from serialized pieces (the evaluator's identity, the verdict of a bare bool):
merging a few bytes is cheaper than setting the same fields one by one.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from google.protobuf.internal.containers import RepeatedCompositeFieldContainer

from evalsi.errors import InfraError, SkipRecord
from evalsi.evaluators._evaluator import BoundEvaluator, check_finite, normalize_scores
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateResponse
from evalsi.v1alpha1.record_pb2 import Record, Usage
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

Results = RepeatedCompositeFieldContainer[EvaluationResult]
_ID, _TRIAL = attrgetter("id"), attrgetter("provenance.trial")  # read in C, not by a Python expression a record


@dataclass
class RecordKeys:
    """Each record's part of a result's identity, its id and trial, a column each: read once for all its
    evaluators (from the records, or from the columns they were made of)."""

    ids: list[str]
    trials: list[int]

    @classmethod
    def of(cls, records: Sequence[Record]) -> RecordKeys:
        return cls(list(map(_ID, records)), list(map(_TRIAL, records)))


def bool_verdicts(bound: BoundEvaluator) -> tuple[bytes, bytes] | None:
    """(False, True) as the serialized outcome and score of a single-output evaluator returning a bare bool."""
    outputs = bound.evaluator.outputs
    return _verdicts(outputs[0].name) if len(outputs) == 1 else None


@functools.lru_cache(maxsize=256)
def _verdicts(output: str) -> tuple[bytes, bytes]:
    # Cached: a worker builds them for every evaluator of every task, and there are few output names.
    false, true = (
        EvaluationResult(outcome=OUTCOME_SCORED, scores=[Score(name=output, passed=passed)]).SerializeToString()
        for passed in (False, True)
    )
    return false, true


class ResultSlots:
    """The results of one evaluation, appended to ``into`` (a fresh container when None) in their final order."""

    def __init__(self, into: Results | None = None) -> None:
        if into is None:
            self._holder = EvaluateResponse()  # owns the results; the returned messages keep it alive
            into = self._holder.results
        self._into = into
        self._first = len(into)
        # Set when a score carrying a cost (a judge's tokens) may have been written: only then is usage summed.
        self.costed = False

    def new(self, record_id: str, bound: BoundEvaluator, trial: int) -> EvaluationResult:
        return self._into.add(
            record_id=record_id, evaluator=bound.alias, evaluator_ref=bound.evaluator.ref, trial=trial
        )

    def for_records(self, bound: BoundEvaluator, keys: RecordKeys) -> list[EvaluationResult]:
        """One result per record, in record order."""
        identity = EvaluationResult(evaluator=bound.alias, evaluator_ref=bound.evaluator.ref).SerializeToString()
        add = self._into.add
        slots = []
        for record_id, trial in zip(keys.ids, keys.trials, strict=True):
            slot = add()
            slot.MergeFromString(identity)
            slot.record_id = record_id
            if trial:
                slot.trial = trial
            slots.append(slot)
        return slots

    def results(self) -> list[EvaluationResult]:
        return self._into[self._first :]

    def count(self) -> int:
        """How many results were made here so far."""
        return len(self._into) - self._first

    def store(self, result: EvaluationResult, bound: BoundEvaluator, returned: Any) -> None:
        """Record what the evaluator returned, normalized to its declared outputs."""
        outputs = bound.evaluator.outputs
        kind = returned.__class__
        if kind is bool and len(outputs) == 1:
            result.scores.add(name=outputs[0].name, passed=returned)
            result.outcome = OUTCOME_SCORED
            return
        if kind is Score and len(outputs) == 1 and returned.name in ("", outputs[0].name) and returned.WhichOneof(
            "value"
        ):
            # normalize_scores' checks for the common single Score, without its lists (and without renaming the
            # evaluator's own Score: the copy gets the output's name).
            check_finite(bound.evaluator, returned)
            score = result.scores.add()
            score.CopyFrom(returned)
            score.name = outputs[0].name
            if not self.costed and returned.HasField("cost"):
                self.costed = True
            result.outcome = OUTCOME_SCORED
            return
        scores = normalize_scores(bound.evaluator, returned)
        if not self.costed and any(score.HasField("cost") for score in scores):
            self.costed = True
        result.scores.extend(scores)
        result.outcome = OUTCOME_SCORED

    def copy_into(self, result: EvaluationResult, done: EvaluationResult) -> None:
        """Commit a result evaluated on a copy (span, session, comparative and dataset calls)."""
        result.CopyFrom(done)
        if not self.costed and any(score.HasField("cost") for score in done.scores):
            self.costed = True

    def usage(self) -> Usage:
        """The tokens and cost the results' scores carry (a judge's), summed in result order."""
        input_tokens = output_tokens = 0
        cost_usd = 0.0
        if self.costed:
            for result in self.results():
                scores = result.scores
                # Indexed rather than iterated: iterating a protobuf repeated field costs several times more.
                for index in range(len(scores)):
                    score = scores[index]
                    if score.HasField("cost"):
                        cost = score.cost
                        input_tokens += cost.input_tokens
                        output_tokens += cost.output_tokens
                        cost_usd += cost.cost_usd
        return Usage(input_tokens=input_tokens, output_tokens=output_tokens,
                     total_tokens=input_tokens + output_tokens, cost_usd=cost_usd if self.costed else None)


def store_plain(result: EvaluationResult, bound: BoundEvaluator, returned: Any) -> None:
    """``ResultSlots.store`` for a result evaluated on a copy (its cost is seen when the copy is committed)."""
    outputs = bound.evaluator.outputs
    if returned.__class__ is bool and len(outputs) == 1:
        result.scores.add(name=outputs[0].name, passed=returned)
    else:
        result.scores.extend(normalize_scores(bound.evaluator, returned))
    result.outcome = OUTCOME_SCORED


def fail(result: EvaluationResult, exc: Exception) -> None:
    """The outcome of an evaluation that raised: a skip, an infrastructure error or an evaluator error."""
    if isinstance(exc, SkipRecord):
        result.outcome, result.reason = OUTCOME_SKIPPED, str(exc)
    elif isinstance(exc, InfraError):
        result.outcome, result.error_kind, result.reason = OUTCOME_ERROR, ERROR_KIND_INFRA, str(exc)
    else:
        result.outcome, result.error_kind = OUTCOME_ERROR, ERROR_KIND_EVALUATOR
        result.reason = f"{type(exc).__name__}: {exc}"


def timed_out(result: EvaluationResult, timeout_s: float) -> EvaluationResult:
    result.outcome, result.error_kind = OUTCOME_ERROR, ERROR_KIND_EVALUATOR
    result.reason = f"deadline: the evaluator call did not finish within {timeout_s:g}s and was abandoned"
    result.duration.FromNanoseconds(int(timeout_s * 1e9))
    return result


def skipped(result: EvaluationResult, reason: str) -> None:
    result.outcome, result.reason = OUTCOME_SKIPPED, reason


def cancelled(result: EvaluationResult) -> EvaluationResult:
    result.outcome, result.reason = OUTCOME_CANCELLED, "cancelled before it ran"
    return result
