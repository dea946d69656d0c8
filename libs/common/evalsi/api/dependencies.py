"""What the handlers need from the rest of the system, as the narrow interfaces they use.

The real implementations (``evalsi.stores``, ``evalsi.bus``, ``evalsi.runs.spec``) are assembled in the
service's ``main``; tests pass in-memory ones.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from evalsi.bus.v1alpha1.bus_pb2 import RunControl
from evalsi.stores.metadata import StoredPolicy
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest, EvaluateResponse
from evalsi.v1alpha1.policy_pb2 import OnlineEvalPolicy
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import EvalRun, Run
from evalsi.v1alpha1.run_service_pb2 import RunEvent
from evalsi.v1alpha1.score_pb2 import EvaluationResult


class MetadataStore(Protocol):
    """Runs and their results, partitioned by project."""

    async def create_run(self, run: Run) -> None: ...

    async def get_run(self, project: str, run_id: str) -> Run | None: ...

    async def update_run(self, run: Run, *, only_from: Sequence[int] = ()) -> bool: ...

    async def list_runs(
        self,
        project: str,
        *,
        state: int = 0,
        name_contains: str = "",
        labels: Mapping[str, str] = ...,
        page_size: int = 50,
        page_token: str = "",
    ) -> tuple[list[Run], str]: ...

    async def list_results(
        self, project: str, run_id: str, *, evaluator: str = "", page_size: int = 100, page_token: str = ""
    ) -> tuple[list[EvaluationResult], str]: ...

    def iter_results(
        self, project: str, run_id: str, *, batch_size: int = 5000
    ) -> AsyncIterator[list[EvaluationResult]]: ...


class TraceStore(Protocol):
    """The traces evalsi-ingest stored (``evalsi.ingest.SqliteTraceStore``), partitioned by project."""

    async def list_traces(
        self,
        project: str,
        *,
        limit: int = 50,
        page_token: str = "",
        service: str | None = None,
        session_id: str | None = None,
        since_ns: int | None = None,
        until_ns: int | None = None,
        has_error: bool | None = None,
    ) -> Any: ...

    async def get_summary(self, project: str, trace_id: str) -> Any: ...

    async def get_trace(self, project: str, trace_id: str) -> Record | None: ...

    async def list_scores(self, project: str, *, trace_id: str | None = None) -> list[Any]: ...

    async def list_feedback(self, project: str, *, trace_id: str | None = None,
                            session_id: str | None = None) -> list[Any]: ...

    async def put_feedback(self, project: str, feedback: Sequence[Any]) -> None: ...


# Asks the policies to look at a completed trace again (a TraceCompleted with reason "feedback").
Retrigger = Callable[[str, str, int], Awaitable[None]]


class PolicyStore(Protocol):
    """Online policies by (project, name), as ``evalsi.stores.SqlMetadataStore`` keeps them."""

    async def put_policy(self, project: str, policy: OnlineEvalPolicy) -> tuple[StoredPolicy, bool]: ...

    async def get_policy(self, project: str, name: str) -> StoredPolicy | None: ...

    async def list_policies(self, project: str | None = None) -> list[StoredPolicy]: ...

    async def delete_policy(self, project: str, name: str) -> bool: ...


class ScoreStore(Protocol):
    """The online scores stored with the traces (``evalsi.ingest`` trace stores; rows are ``OnlineScore``)."""

    async def list_scores(
        self,
        project: str,
        *,
        trace_id: str | None = None,
        policy: str | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> list[Any]: ...


class ObjectStore(Protocol):
    """Content-addressed blobs."""

    async def put(self, data: bytes) -> str: ...

    async def get(self, key: str) -> bytes: ...


class DatasetLike(Protocol):
    @property
    def records(self) -> Sequence[Record]: ...

    @property
    def version(self) -> str: ...


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
    """A run's dry-run text: its plan and projection (evalsi.runs.dry_run.served_dry_run_text, registry bound)."""

    def __call__(self, document: EvalRun, records: Sequence[Record], *, project: str, dataset: str) -> str: ...
# The records of the spec's dataset, read from the configured datasets directory.
LoadRecords = Callable[[EvalRun], DatasetLike]
