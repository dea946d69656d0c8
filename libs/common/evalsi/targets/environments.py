"""Agent runs in harness environments (§11): which environment a record runs in, and what its Record says after.

A record's metadata ``environment`` (an object, ``evalsi.harness.environment``) is its own; otherwise the spec's
``spec.harness.environment`` is every record's. ``in_environment`` prepares the sandbox, lets the agent act in
it, runs the checker and destroys the sandbox; the checker's verdict goes into the record's metadata, where
``builtin/task-success`` reads it: ``task_success`` (the verdict), ``checker_output`` (its reason), ``checker``
(format, score, tests) and ``environment.isolation`` (the rung it ran on).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from evalsi.errors import BadInputError
from evalsi.harness.environment import Environment, environment_from_mapping
from evalsi.harness.environment_run import prepared, run_checker, stamp
from evalsi.harness.environment_session import EnvironmentSession
from evalsi.records import from_value, struct_dict
from evalsi.sandbox.access import SandboxOpener
from evalsi.targets.models import PromptError
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import HarnessSpec

__all__ = ["ENVIRONMENT_KEY", "any_environment", "in_environment", "record_environment", "spec_environment"]

ENVIRONMENT_KEY = "environment"


def spec_environment(harness: HarnessSpec | None) -> Environment | None:
    """``spec.harness.environment``, validated; None when the spec gives none."""
    if harness is None or not harness.HasField("environment"):
        return None
    return environment_from_mapping(struct_dict(harness, "environment"), "spec.harness.environment")


def record_environment(record: Record, default: Environment | None) -> Environment | None:
    """The record's own environment (metadata ``environment``), else ``default``."""
    value = record.metadata.get(ENVIRONMENT_KEY)
    if value is None:
        return default
    try:
        return environment_from_mapping(from_value(value), f"record {record.id[:100]!r}: metadata.environment")
    except BadInputError as exc:  # this record cannot run; the others still do
        raise PromptError(str(exc)) from None


def any_environment(records: Sequence[Record], harness: HarnessSpec | None) -> bool:
    return (harness is not None and harness.HasField("environment")) or any(
        ENVIRONMENT_KEY in record.metadata for record in records)


async def in_environment(record: Record, environment: Environment, opener: SandboxOpener, project: str,
                         act: Callable[[EnvironmentSession], Awaitable[None]]) -> None:
    """Prepare the environment, ``act`` in its sandbox (filling ``record``), check, stamp the verdict, destroy."""
    async with prepared(environment, opener, project, run_id=record.provenance.run_id) as session:
        await act(session)
        stamp(record, session.isolation, await run_checker(environment, session), snapshot=session.snapshot)
