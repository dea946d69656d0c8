"""The memory budget of an embedded run: how much a run may add to this process before its results go to a local
store (``runs.local.run_locally``) instead of staying in memory.

The estimate counts what a run adds beyond the records the caller already holds: one ``EvaluationResult`` per
evaluation (kept by the store, then copied into the returned document) and, when a target generates outputs, a copy
of each record per trial with its output. It is an estimate from sizes, never a measurement, so it is cheap to make
before anything runs. Records read from a stream (a file, rows: ``runs.intake``) are checked as they arrive
(``RecordCost``), counting the messages the run would build of them as well.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from evalsi.errors import BadInputError
from evalsi.runs.spec import target_kind, trials_of
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import EvalRun

MEMORY_BUDGET_ENV = "EVALSI_EMBEDDED_MEMORY_MB"
DEFAULT_MEMORY_BUDGET_MB = 1024.0
# What keeping one result in memory adds to a run's peak, measured on exact-match results (benchmarks/
# embedded_evaluate.py --memory at 100,000 records: +277 MiB in memory, +197 MiB with the results in SQLite).
RESULT_BYTES = 850
# A record in memory against its serialized size: 100,000 small records are 6.1 MiB serialized and 123 MiB as
# messages (upb arenas, sub-messages, strings).
RECORD_OVERHEAD = 20
_SAMPLED_RECORDS = 1_000


def memory_budget_mb(given: float | None = None, environ: Mapping[str, str] = os.environ) -> float:
    """The budget in MiB: ``given``, else ``$EVALSI_EMBEDDED_MEMORY_MB``, else :data:`DEFAULT_MEMORY_BUDGET_MB`."""
    if given is not None:
        return _checked(given, "memory_budget_mb")
    text = environ.get(MEMORY_BUDGET_ENV, "").strip()
    if not text:
        return DEFAULT_MEMORY_BUDGET_MB
    try:
        value = float(text)
    except ValueError:
        raise BadInputError(f"{MEMORY_BUDGET_ENV}: {text!r} is not a number of MiB (e.g. 512)") from None
    return _checked(value, MEMORY_BUDGET_ENV)


def _checked(value: float, name: str) -> float:
    if not value >= 0:  # also refuses NaN
        raise BadInputError(f"{name}: the memory budget is MiB >= 0 (0 keeps every run's results on disk), got {value}")
    return float(value)


def estimated_run_bytes(document: EvalRun, records: Sequence[Record]) -> int:
    """What running ``document`` over ``records`` adds to this process's memory, roughly (see the module doc)."""
    if not records:
        return 0
    trials = trials_of(document)
    evaluations = len(records) * trials * max(len(document.spec.evaluators), 1)
    estimate = evaluations * RESULT_BYTES
    if target_kind(document) != "outputs":
        sample = records[:_SAMPLED_RECORDS]
        record_bytes = RECORD_OVERHEAD * sum(r.ByteSize() for r in sample) / len(sample)
        estimate += int(len(records) * trials * record_bytes)
    return estimate


@dataclass(frozen=True)
class RecordCost:
    """What each record of a stream adds to a run of ``document`` in memory: its results, and the messages the run
    builds of it (``runs.intake`` checks the total as records arrive, so it is worked out once, not per record)."""

    result_bytes: int  # a record's results
    record_factor: int  # times the record's serialized size: the record as a message, and its generated copies

    @classmethod
    def of(cls, document: EvalRun) -> RecordCost:
        trials = trials_of(document)
        copies = trials if target_kind(document) != "outputs" else 0  # a generated copy of each record per trial
        return cls(trials * max(len(document.spec.evaluators), 1) * RESULT_BYTES, RECORD_OVERHEAD * (1 + copies))

    def run_bytes(self, records: int, encoded_bytes: int) -> int:
        """The run over ``records`` records of ``encoded_bytes`` serialized, in memory."""
        return records * self.result_bytes + self.record_factor * encoded_bytes


def exceeds_memory_budget(document: EvalRun, records: Sequence[Record], budget_mb: float) -> bool:
    return estimated_run_bytes(document, records) > budget_mb * (1 << 20)
