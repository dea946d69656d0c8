"""What a stopped run did not run: when a cancel or a budget ends a run, its unrun evaluations are stored as results
(CANCELLED, or the target's failure where there is one), as an embedded run reports them, so both say how many
evaluations did not run. Record-scope evaluators only: span-, session- and dataset-scope work has no per-record
result to stand for."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalsi.bus.v1alpha1.bus_pb2 import STAGE_GENERATE
from evalsi.evaluators import BoundEvaluator
from evalsi.records import from_value
from evalsi.runs.outcome import TARGET_FAILURE_KEY
from evalsi.runs.plan import Plan
from evalsi.runs.ports import RunRecords
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import Run
from evalsi.v1alpha1.score_pb2 import (
    ERROR_KIND_INFRA,
    OUTCOME_CANCELLED,
    OUTCOME_ERROR,
    OUTCOME_SKIPPED,
    EvaluationResult,
)


async def record_unrun(
    store: Any, records: RunRecords, run: Run, bound: Sequence[BoundEvaluator], plan: Plan
) -> None:
    """Store the results of every record-scope evaluation task of ``plan`` still pending or cancelled. A result
    stored meanwhile by a task that did run is kept (a store never replaces a score by a cancellation)."""
    unrun = {row.key for row in await store.list_tasks(run.id, states=("pending", "cancelled"))}
    generated = await store.list_tasks(run.id, states=("done",), stage=STAGE_GENERATE)
    outputs = {row.key: row.output_ref for row in generated}
    by_alias = {b.alias: b for b in bound}
    for task in plan.tasks():
        b = by_alias.get(task.evaluator or "")
        if task.key not in unrun or task.stage != "evaluate" or b is None or b.evaluator.scope != "record":
            continue
        if task.depends_on and task.depends_on[0] in outputs:
            shard = await records.outputs(outputs[task.depends_on[0]])
        else:
            shard = await records.shard_records(run, task.start, task.stop)
        await store.upsert_results(run.project, run.id, unrun_results(shard, b, task.trial or 0))


def unrun_results(records: Sequence[Record], bound: BoundEvaluator, trial: int) -> list[EvaluationResult]:
    """The results of one record-scope evaluator's evaluations a cancel or a budget kept from running, as an
    embedded run reports them: a record the target produced nothing for keeps why (its failure marker), a record
    never generated was cancelled before the target was called, the rest were cancelled before they ran."""
    out = []
    for record in records:
        result = EvaluationResult(
            record_id=record.id, evaluator=bound.alias, evaluator_ref=bound.evaluator.ref, outcome=OUTCOME_CANCELLED,
            trial=record.provenance.trial if record.HasField("provenance") else trial,
        )
        if TARGET_FAILURE_KEY in record.metadata:
            marker = from_value(record.metadata[TARGET_FAILURE_KEY])
            kind, result.reason = marker.get("kind", "infra"), marker.get("reason", "the target failed")
            if kind == "infra":
                result.outcome, result.error_kind = OUTCOME_ERROR, ERROR_KIND_INFRA
            elif kind == "skipped":
                result.outcome = OUTCOME_SKIPPED
        else:
            result.reason = "cancelled before it ran" if record.HasField("output") else (
                "cancelled before the target was called")
        out.append(result)
    return out
