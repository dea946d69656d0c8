"""What each service reads from the bus: its durable pull consumers as ``Subscription``s.

The services build their FastStream subscribers from these, and the AsyncAPI document (``evalsi.bus.asyncapi``)
describes the same objects, so the document cannot drift from what runs.
"""

from __future__ import annotations

from evalsi.bus import subjects
from evalsi.bus.broker import Subscription
from evalsi.bus.v1alpha1.bus_pb2 import RunControl, Task, TaskResult, TraceCompleted, TracesObserved

__all__ = ["SCHEDULER_DEADLETTERS", "control", "dead_letters", "results", "trace_notices", "traces_completed", "work"]

# The scheduler's durable on the dead letters (subjects.py names the consumers several services share).
SCHEDULER_DEADLETTERS = "scheduler-dead-letters"


def work(pool: str, *, concurrency: int, ack_wait_s: float, max_deliver: int) -> Subscription:
    """evalsi-worker: the tasks of one pool. The consumer is ``ensure_work_consumers``'s, adopted here."""
    return Subscription(
        subjects.WORK_STREAM, subjects.work_consumer(pool), subjects.work(pool), Task,
        f"tasks of the {pool} pool; every worker of the pool shares the durable",
        concurrency=concurrency, ack_wait_s=ack_wait_s, max_deliver=max_deliver, ensure=False,
    )  # fmt: skip


def results() -> Subscription:
    """evalsi-scheduler: task results of every run, folded by the run driver. Each handler waits for its results'
    batch to be committed (runs.writes) before the next message takes its slot: 32 in flight (16,000 results) keep
    both of its writers busy; 8 left one batch of 4,000 waiting on Postgres at a time and the scheduler idle."""
    return Subscription(
        subjects.RESULTS_STREAM, subjects.RESULTS_CONSUMER, "results.>", TaskResult,
        "task results of every run, for the schedulers", concurrency=32, ensure=False,
    )  # fmt: skip


def control() -> Subscription:
    """evalsi-scheduler: run created / cancel / resume."""
    return Subscription(
        subjects.CONTROL_STREAM, subjects.CONTROL_CONSUMER, "runs.control.>", RunControl,
        "run control (created, cancel, resume) for the schedulers", concurrency=4, ensure=False,
    )  # fmt: skip


def dead_letters() -> Subscription:
    """evalsi-scheduler: dead tasks and results become infrastructure errors of their runs."""
    return Subscription(
        subjects.DEADLETTER_STREAM, SCHEDULER_DEADLETTERS, "deadletter.>", None,
        "dead letters: a dead task is reported as an infrastructure error, a dead result or control message is "
        "handled again", concurrency=2, ensure=False,
    )  # fmt: skip


def traces_completed(*, concurrency: int, ack_wait_s: float, max_deliver: int) -> Subscription:
    """evalsi-policy: completed traces of every project, for the online policies."""
    return Subscription(
        subjects.TRACES_STREAM, subjects.POLICY_CONSUMER, "traces.completed.>", TraceCompleted,
        "completed traces for the online policies", concurrency=concurrency, ack_wait_s=ack_wait_s,
        max_deliver=max_deliver, retry_base_s=0.5, retry_max_s=10.0,
    )  # fmt: skip


def trace_notices(partition: int) -> Subscription:
    """evalsi-ingest: spans other replicas saw of traces this replica's partition completes."""
    return Subscription(
        subjects.ASSEMBLY_STREAM, subjects.assembler_consumer(partition), subjects.traces_observed(partition),
        TracesObserved, f"notices for ingest partition {partition}: spans other replicas saw of its traces",
        concurrency=1,
    )  # fmt: skip
