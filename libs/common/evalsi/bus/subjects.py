"""Subject, stream and consumer names of the bus: the route is in the subject, never in the payload.

Every name any service uses comes from here, so a typo is an import error instead of a silent black hole.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

from evalsi.projects import check_project

__all__ = [
    "ASSEMBLY_STREAM",
    "CONTROL_CONSUMER",
    "CONTROL_STREAM",
    "DEADLETTER_STREAM",
    "EVENTS_STREAM",
    "POLICY_CONSUMER",
    "POOLS",
    "RESULTS_CONSUMER",
    "RESULTS_STREAM",
    "TRACES_STREAM",
    "WORK_STREAM",
    "Pool",
    "assembler_consumer",
    "check_pool",
    "check_token",
    "deadletter",
    "deadletter_for",
    "evaluate",
    "evaluate_queue",
    "is_deadletter",
    "results",
    "run_control",
    "run_events",
    "traces_completed",
    "traces_observed",
    "work",
    "work_consumer",
]

Pool = Literal["cpu", "judge", "gpu", "sandbox", "harness"]
POOLS: tuple[Pool, ...] = get_args(Pool)

WORK_STREAM = "WORK"
RESULTS_STREAM = "RESULTS"
EVENTS_STREAM = "EVENTS"
CONTROL_STREAM = "CONTROL"
DEADLETTER_STREAM = "DEADLETTER"
TRACES_STREAM = "TRACES"
ASSEMBLY_STREAM = "ASSEMBLY"

# Durable consumers shared by every replica of their service (a WorkQueue stream allows one per subject).
RESULTS_CONSUMER = "scheduler"
CONTROL_CONSUMER = "scheduler-control"
POLICY_CONSUMER = "policy"

# A token is one dot-free piece of a subject; NATS forbids whitespace and gives '*' and '>' meaning.
_TOKEN = re.compile(r"^[A-Za-z0-9_\-:=@+]+$")


def check_token(value: str, what: str) -> str:
    """``value`` when it is usable as one subject token, else a ValueError naming ``what``."""
    if not _TOKEN.match(value):
        raise ValueError(
            f"{what} {value!r} cannot be a subject token: use letters, digits and _-:=@+ (no dots, spaces, * or >)"
        )
    return value


def check_pool(pool: str) -> Pool:
    if pool not in POOLS:
        raise ValueError(f"unknown worker pool {pool!r}; pools are {', '.join(POOLS)}")
    return pool


def work(pool: str) -> str:
    """``work.<pool>``: tasks for one worker pool (stream WORK)."""
    return f"work.{check_pool(pool)}"


def work_consumer(pool: str) -> str:
    """``work-<pool>``: the durable pull consumer every worker of the pool shares."""
    return f"work-{check_pool(pool)}"


def results(run_id: str) -> str:
    """``results.<run_id>``: task results on their way to the scheduler (stream RESULTS)."""
    return f"results.{check_token(run_id, 'run id')}"


def run_events(run_id: str) -> str:
    """``runs.events.<run_id>``: progress events of a run, for WatchRun (stream EVENTS)."""
    return f"runs.events.{check_token(run_id, 'run id')}"


def run_control(run_id: str) -> str:
    """``runs.control.<run_id>``: created / cancel / resume for the schedulers (stream CONTROL)."""
    return f"runs.control.{check_token(run_id, 'run id')}"


def traces_completed(project: str) -> str:
    """``traces.completed.<project>``: completed traces for the policy service (stream TRACES).

    The project rule (evalsi.projects) admits no '.', space, '*' or '>', so a project is always exactly one token.
    """
    return f"traces.completed.{check_token(check_project(project, 'traces.completed subject'), 'project')}"


def traces_observed(partition: int) -> str:
    """``traces.observed.<partition>``: spans one ingest replica saw of traces another replica completes."""
    if partition < 0:
        raise ValueError(f"partition {partition}: must be 0 or more")
    return f"traces.observed.{partition}"


def assembler_consumer(partition: int) -> str:
    """``assembler-<partition>``: the durable consumer the replica owning a partition pulls its notices from."""
    if partition < 0:
        raise ValueError(f"partition {partition}: must be 0 or more")
    return f"assembler-{partition}"


def deadletter(name: str) -> str:
    """``deadletter.<name>``: messages that ran out of deliveries or failed permanently (stream DEADLETTER)."""
    return f"deadletter.{check_token(name, 'dead-letter name')}"


def is_deadletter(subject: str) -> bool:
    """Whether ``subject`` is a dead letter's (``deadletter.*``): such a message is never dead-lettered again."""
    return subject.split(".", 1)[0] == "deadletter"


def deadletter_for(subject: str) -> str:
    """The dead-letter subject of a message's subject: ``work.cpu`` → ``deadletter.cpu``, ``results.r1`` →
    ``deadletter.results``, ``runs.control.r1`` → ``deadletter.control``."""
    tokens = subject.split(".")
    if tokens[0] == "work" and len(tokens) > 1:
        return deadletter(tokens[1])
    if tokens[0] == "runs" and len(tokens) > 1:
        return deadletter(tokens[1])
    return deadletter(tokens[0])


def evaluate(pool: str) -> str:
    """``evaluate.<pool>``: synchronous Evaluate over core request/reply."""
    return f"evaluate.{check_pool(pool)}"


def evaluate_queue(pool: str) -> str:
    """The queue group of ``evaluate.<pool>`` responders: each request is answered by one of them."""
    return f"evaluate-{check_pool(pool)}"
