"""What the handlers need from the rest of the system, as the narrow interfaces they use.

The real implementations (``evalsi.stores``, ``evalsi.bus``, ``evalsi.runs.spec``) are assembled in the
service's ``main``; tests pass in-memory ones. The stores are not here: each store's protocol is declared once,
beside the store (``evalsi.stores``), and the handlers import it from there.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, Protocol

from evalsi.bus.v1alpha1.bus_pb2 import RunControl
from evalsi.datasets import RecordStream
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest, EvaluateResponse
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import EvalRun
from evalsi.v1alpha1.run_service_pb2 import RunEvent

# Asks the policies to look at a completed trace again (a TraceCompleted with reason "feedback").
Retrigger = Callable[[str, str, int], Awaitable[None]]


# Publishes evalsi.bus.v1alpha1.RunControl for the schedulers.
Control = Callable[[RunControl], Awaitable[None]]
# A worker's answer to one synchronous evaluation (NATS request/reply), within the caller's remaining seconds
# (None: the caller set no deadline, the server's own applies).
Evaluate = Callable[[EvaluateRequest, float | None], Awaitable[EvaluateResponse]]
# The run's events from the bus, from now on.
Watch = Callable[[str], AsyncIterator[RunEvent]]
# Raises BadInputError naming the field path (evalsi.runs.spec.validate_eval_run with its registry bound).
ValidateRun = Callable[[EvalRun], None]
# The number of tasks a run's plan has, given its document and its number of records.
CountTasks = Callable[[EvalRun, int], int]


class DescribePlan(Protocol):
    """A run's dry-run text and JSON document: its plan and projection (evalsi.runs.dry_run.served_dry_run,
    registry bound)."""

    def __call__(
        self, document: EvalRun, records: Iterable[Record], *, project: str, dataset: str
    ) -> tuple[str, dict[str, Any]]: ...
# The spec's dataset file under the configured datasets directory, opened as a stream of records.
LoadRecords = Callable[[EvalRun], RecordStream]
