"""The metadata and results store: the interface every service codes against, and its page tokens.

Runs, per-record results, the tasks of a run, scheduler leases and online policies live here. One SQL implementation
(``evalsi.stores.sql``) serves SQLite (standalone) and Postgres (compose, Kubernetes).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from evalsi.edge_checks import text_problem
from evalsi.errors import BadInputError
from evalsi.projects import DEFAULT_PROJECT
from evalsi.v1alpha1.policy_pb2 import OnlineEvalPolicy
from evalsi.v1alpha1.run_pb2 import Run
from evalsi.v1alpha1.score_pb2 import EvaluationResult

TaskState = Literal["pending", "done", "failed", "cancelled"]
# A result as stored: evaluator alias, record id, trial, outcome, the serialized EvaluationResult.
ResultRow = tuple[str, str, int, int, bytes]
TASK_STATES: tuple[str, ...] = ("pending", "done", "failed", "cancelled")


@dataclass(frozen=True)
class TaskRow:
    """One task of a run (a batch of records for one stage, shard and trial), keyed by (run_id, key)."""

    run_id: str
    key: str
    stage: int
    shard: int
    trial: int
    state: str  # one of TASK_STATES
    attempts: int = 0
    output_ref: str = ""
    error: str = ""


@dataclass(frozen=True)
class TaskEnd:
    """How a task ended, as its result says: ``done``, ``failed`` or ``cancelled``, why, and its usage (input
    tokens, output tokens, USD)."""

    key: str
    state: str
    error: str = ""
    usage: tuple[int, int, float] = (0, 0, 0.0)


@dataclass(frozen=True)
class StoredPolicy:
    """An online policy as stored: ``generation`` counts the applies that changed it, from 1."""

    project: str
    name: str
    policy: OnlineEvalPolicy
    generation: int
    spec_hash: str
    updated_at: float  # unix seconds


def policy_hash(policy: OnlineEvalPolicy) -> str:
    """SHA-256 of the deterministic serialization (map keys sorted), so equal documents hash alike."""
    return hashlib.sha256(policy.SerializeToString(deterministic=True)).hexdigest()


@dataclass(frozen=True)
class StoredCase:
    """An agent case as stored (docs/cases.md): its YAML document exactly as imported, and where it came from.

    ``path`` is the file relative to the imported directory, ``position`` the document's index in that file
    and ``line`` its first line there, so an export writes the corpus back and errors name the original line.
    ``created_at``/``updated_at`` are unix seconds the store sets; on the way in they are ignored.
    """

    tenant: str
    case_id: str
    agent: str
    path: str
    position: int
    line: int
    yaml: str
    yaml_hash: str = ""
    created_at: float = 0.0
    updated_at: float = 0.0


@dataclass(frozen=True)
class CaseImport:
    """What ``put_cases`` did, per case id: written new, replaced, unchanged (same text and place), kept."""

    created: tuple[str, ...] = ()
    replaced: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()  # existing and left alone (keep_existing)


def case_hash(text: str) -> str:
    """SHA-256 of a case's YAML text: the content hash the store keeps beside it."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class RunStore(Protocol):
    """What a run driver needs (``evalsi.runs.ports``): runs, their tasks, results, usage and leases. Every write
    is idempotent or compare-and-set."""

    # Whether the database answers now: a consumer holds its messages while it does not.
    async def ping(self) -> bool: ...

    async def get_run(self, project: str, run_id: str) -> Run | None: ...

    async def update_run(self, run: Run, *, only_from: Sequence[int] = ()) -> bool:
        """Store ``run``; with ``only_from``, only while the stored state is one of those (False otherwise), so a
        writer holding an older copy never undoes a state change made meanwhile (a cancel, a resume)."""
        ...

    async def runs_in_states(self, states: Sequence[int]) -> list[tuple[str, str]]: ...

    # Results, upserted by (run_id, record_id, trial, evaluator alias).
    async def upsert_results(self, project: str, run_id: str, results: Sequence[EvaluationResult]) -> None: ...

    async def upsert_result_rows(self, project: str, run_id: str, rows: Sequence[ResultRow]) -> None:
        """``upsert_results`` of results already serialized, each with its key and outcome."""
        ...

    def iter_results(
        self, project: str, run_id: str, *, batch_size: int = 5000
    ) -> AsyncIterator[list[EvaluationResult]]: ...

    async def count_results(self, project: str, run_id: str) -> dict[int, int]: ...

    # Tasks of a run, keyed (run_id, key).
    async def add_tasks(self, project: str, tasks: Sequence[TaskRow]) -> int: ...

    async def end_tasks(self, run_id: str, ends: Sequence[TaskEnd]) -> set[str]:
        """Move each task to its end state if it is pending, or cancelled when it ends done (work that finished
        after a cancel still counts); the keys that moved. Of several ends of one key, the first is applied."""
        ...

    async def set_task_state(
        self,
        run_id: str,
        key: str,
        state: str,
        *,
        output_ref: str = "",
        error: str = "",
        only_from: Sequence[str] = ("pending",),
        attempts: int | None = None,
        usage: tuple[int, int, float] | None = None,
    ) -> bool: ...

    async def list_tasks(self, run_id: str, *, states: Sequence[str] = (), stage: int = 0) -> list[TaskRow]: ...

    async def task_counts(self, run_id: str) -> dict[str, int]: ...

    async def task_usage(self, run_id: str) -> tuple[int, int, float]: ...

    # Leases: run ownership between scheduler replicas, timed by the database's clock.
    async def acquire_lease(self, name: str, owner: str, ttl_s: float) -> bool: ...

    async def release_lease(self, name: str, owner: str) -> None: ...


class PolicyStore(Protocol):
    """Online policies by (project, name); the policy's metadata.project is the project it is stored under."""

    async def put_policy(self, project: str, policy: OnlineEvalPolicy) -> tuple[StoredPolicy, bool]: ...

    async def get_policy(self, project: str, name: str) -> StoredPolicy | None: ...

    async def list_policies(self, project: str | None = None) -> list[StoredPolicy]: ...

    async def delete_policy(self, project: str, name: str) -> bool: ...


class CaseStore(Protocol):
    """Agent cases by (project, tenant, case id). A tenant sees only its own: another tenant's case reads as absent."""

    async def put_cases(
        self, project: str, cases: Sequence[StoredCase], *, keep_existing: bool = False
    ) -> CaseImport: ...

    async def get_case(self, project: str, tenant: str, case_id: str) -> StoredCase | None: ...

    async def list_cases(self, project: str, tenant: str, *, agent: str = "") -> list[StoredCase]: ...


@runtime_checkable
class MetadataStore(RunStore, PolicyStore, CaseStore, Protocol):
    """Runs, results, tasks, leases, online policies and agent cases: every role above, and the API's reads.

    Every row carries ``project_id`` and a reserved, empty ``tenant_id``, except a case's, which holds the
    case's tenant (``platform`` by default), enforced like a project boundary.
    """

    dialect: str  # "sqlite" | "postgres"

    async def close(self) -> None: ...

    # Runs: the whole Run (without ``results``) stored serialized, with indexed columns beside it.
    async def create_run(self, run: Run) -> None: ...

    async def list_runs(
        self,
        project: str,
        *,
        state: int = 0,
        name_contains: str = "",
        labels: Mapping[str, str] | None = None,
        page_size: int = 50,
        page_token: str = "",
        all_projects: bool = False,
        created_after_us: int | None = None,
        created_before_us: int | None = None,
    ) -> tuple[list[Run], str]:
        """Newest first; ``all_projects`` ignores ``project`` (the api grants it to loopback-only servers);
        ``created_after_us`` (inclusive) and ``created_before_us`` (exclusive) bound the creation time, in
        microseconds since the epoch."""
        ...

    async def run_project(self, run_id: str) -> str | None:
        """Which project holds ``run_id``, or None; for the api's "it is in project ..." on a loopback server."""
        ...

    async def list_results(
        self, project: str, run_id: str, *, evaluator: str = "", page_size: int = 100, page_token: str = ""
    ) -> tuple[list[EvaluationResult], str]: ...

    async def delete_results(self, project: str, run_id: str, *, outcomes: Sequence[int]) -> int: ...

    async def lease_owner(self, name: str) -> str | None: ...


def project_or_default(project: str) -> str:
    """The project a row belongs to: ``default`` when none is given (DESIGN.md, Conventions)."""
    return project or DEFAULT_PROJECT


def query_fingerprint(*parts: object) -> str:
    """A short hash of a query's filters, so a page token cannot be replayed against another query."""
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def encode_page_token(cursor: Sequence[Any], fingerprint: str) -> str:
    """An opaque token for the page after ``cursor`` (the sort key of the last row returned)."""
    raw = json.dumps({"c": list(cursor), "q": fingerprint}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_page_token(token: str, fingerprint: str, *, types: Sequence[type]) -> list[Any] | None:
    """The cursor inside ``token`` (None for the first page); BadInputError when it is not one of ours.

    ``types`` are the types of the cursor's values, in order (the sort key of the query).
    """
    if not token:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        body = json.loads(raw)
        cursor = body["c"]
        query = body["q"]
    except (binascii.Error, ValueError, TypeError, KeyError) as exc:
        raise BadInputError(f"page_token {token!r} is not a token this store returned") from exc
    if (
        not isinstance(cursor, list)
        or len(cursor) != len(types)
        or not all(type(v) is t for v, t in zip(cursor, types, strict=True))
        or any(isinstance(v, str) and text_problem(v) for v in cursor)  # forged: text the store cannot take
    ):
        raise BadInputError(f"page_token {token!r} is not a token this store returned")
    if query != fingerprint:
        raise BadInputError(
            f"page_token {token!r} belongs to a different query; repeat the filters of the call that returned it"
        )
    return cursor


def check_page_size(page_size: int, *, limit: int = 10_000) -> int:
    if not 1 <= page_size <= limit:
        raise BadInputError(f"page_size {page_size} is out of range; accepted: 1 to {limit}")
    return page_size


def check_task_states(states: Sequence[str], *, what: str) -> tuple[str, ...]:
    if isinstance(states, str):
        states = (states,)
    bad = [s for s in states if s not in TASK_STATES]
    if bad:
        raise BadInputError(f"{what}: unknown task state {bad[0]!r}; accepted: {', '.join(TASK_STATES)}")
    return tuple(states)
