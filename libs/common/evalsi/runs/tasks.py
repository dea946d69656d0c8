"""The bus message of a planned task: what a worker needs to run it (its records by reference, its evaluators,
the judges, the target), the same for every driver."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from evalsi.bus.v1alpha1.bus_pb2 import STAGE_EVALUATE, STAGE_GENERATE, STAGE_REDUCE, Task
from evalsi.evaluators import BoundEvaluator
from evalsi.runs.plan import Task as PlannedTask
from evalsi.v1alpha1.run_pb2 import Run

STAGES = {"generate": STAGE_GENERATE, "evaluate": STAGE_EVALUATE, "reduce": STAGE_REDUCE}
ATTEMPT_LABEL = "evals.si/attempt"


def index_of(value: int | None) -> int:
    """Shard or trial index of a task; -1 for tasks that span all of them (reduce)."""
    return -1 if value is None else value


def task_message(run: Run, bound: Sequence[BoundEvaluator], planned: PlannedTask, records_ref: str) -> Task:
    task = Task(
        key=planned.key,
        run_id=run.id,
        project=run.project,
        shard=index_of(planned.shard),
        stage=STAGES[planned.stage],
        trial=index_of(planned.trial),
        summary=run.spec.summary,
        seed=run.spec.seed,
        records_ref=records_ref,
    )
    task.evaluators.extend(b.to_ref() for b in bound if b.alias == planned.evaluator)
    for name, judge in run.spec.judges.items():
        task.judges[name].CopyFrom(judge)
    task.target.CopyFrom(run.spec.target)
    if run.spec.HasField("harness"):
        task.harness.CopyFrom(run.spec.harness)
    if run.spec.HasField("sandbox") and planned.stage == "evaluate":
        task.sandbox.CopyFrom(run.spec.sandbox)
    return task


def message_id(run: Run, planned: PlannedTask) -> str:
    """``<task key>#<attempt>``: deterministic, so a task published twice is delivered once, and a resumed run's
    attempt publishes its tasks anew."""
    return f"{planned.key}#{run.labels.get(ATTEMPT_LABEL, '0')}"


def run_traceparent(run_id: str, span_of: str) -> str:
    """A W3C traceparent whose trace id is the run's, so every message of a run correlates in a trace
    backend (and a worker's result carries its task's), whether or not the services export spans."""
    trace_id = hashlib.sha256(run_id.encode()).hexdigest()[:32]
    span_id = hashlib.sha256(f"{run_id}/{span_of}".encode()).hexdigest()[:16]
    return f"00-{trace_id}-{span_id}-01"
