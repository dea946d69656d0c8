"""In-memory stand-ins for the API's dependencies, and servers built on them.

The real stores and bus run the same handlers in the lead's end-to-end tests; these fakes keep only
the documented contract (signatures, project partitioning, paging by opaque token).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from evalsi.api import (
    ApiMetrics,
    ApiServer,
    CatalogHandlers,
    EvaluationHandlers,
    HandlerLimits,
    MonitorHandlers,
    Readiness,
    RunHandlers,
    ServerConfig,
    build_table,
    load_run_dataset,
)
from evalsi.bus.v1alpha1.bus_pb2 import RunControl
from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.runs.dry_run import served_dry_run
from evalsi.runs.plan import planned_task_count
from evalsi.stores import StoredPolicy, policy_hash
from evalsi.traces import OnlineScore
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest, EvaluateResponse
from evalsi.v1alpha1.policy_pb2 import OnlineEvalPolicy
from evalsi.v1alpha1.run_pb2 import EvalRun, Run
from evalsi.v1alpha1.run_service_pb2 import RunEvent
from evalsi.v1alpha1.score_pb2 import OUTCOME_SCORED, EvaluationResult, Score


def _copy(message: Any) -> Any:
    out = type(message)()
    out.CopyFrom(message)
    return out


class MemoryStore:
    """MetadataStore: runs and results by project, paged with offset tokens; policies by (project, name)."""

    def __init__(self) -> None:
        self.runs: dict[tuple[str, str], Run] = {}
        self.results: dict[tuple[str, str], list[EvaluationResult]] = defaultdict(list)
        self.policies: dict[tuple[str, str], StoredPolicy] = {}

    async def put_policy(self, project: str, policy: OnlineEvalPolicy) -> tuple[StoredPolicy, bool]:
        stored = _copy(policy)
        stored.metadata.project = project
        key = (project, policy.metadata.name)
        current = self.policies.get(key)
        digest = policy_hash(stored)
        if current is not None and current.spec_hash == digest:
            return current, False
        generation = current.generation + 1 if current is not None else 1
        self.policies[key] = StoredPolicy(project, key[1], stored, generation, digest, time.time())
        return self.policies[key], True

    async def get_policy(self, project: str, name: str) -> StoredPolicy | None:
        return self.policies.get((project, name))

    async def list_policies(self, project: str | None = None) -> list[StoredPolicy]:
        return [p for key, p in sorted(self.policies.items()) if project is None or key[0] == project]

    async def delete_policy(self, project: str, name: str) -> bool:
        return self.policies.pop((project, name), None) is not None

    async def create_run(self, run: Run) -> None:
        self.runs[(run.project, run.id)] = _copy(run)

    async def get_run(self, project: str, run_id: str) -> Run | None:
        run = self.runs.get((project, run_id))
        return _copy(run) if run is not None else None

    async def update_run(self, run: Run, *, only_from: Sequence[int] = ()) -> bool:
        stored = self.runs.get((run.project, run.id))
        if only_from and stored is not None and stored.state not in only_from:
            return False
        self.runs[(run.project, run.id)] = _copy(run)
        return True

    async def run_project(self, run_id: str) -> str | None:
        return next((p for (p, i) in self.runs if i == run_id), None)

    async def list_runs(
        self,
        project: str,
        *,
        state: int = 0,
        name_contains: str = "",
        labels: Mapping[str, str] = {},
        page_size: int = 50,
        page_token: str = "",
        all_projects: bool = False,
        created_after_us: int | None = None,
        created_before_us: int | None = None,
    ) -> tuple[list[Run], str]:
        runs = [
            run
            for (p, _), run in sorted(self.runs.items())
            if (all_projects or p == project)
            and (not state or run.state == state)
            and name_contains in run.name
            and all(run.labels.get(k) == v for k, v in labels.items())
            and (created_after_us is None or run.create_time.ToMicroseconds() >= created_after_us)
            and (created_before_us is None or run.create_time.ToMicroseconds() < created_before_us)
        ]
        return _page(runs, page_size, page_token)

    async def list_results(
        self, project: str, run_id: str, *, evaluator: str = "", page_size: int = 100, page_token: str = ""
    ) -> tuple[list[EvaluationResult], str]:
        results = [r for r in self.results[(project, run_id)] if not evaluator or r.evaluator == evaluator]
        return _page(results, page_size, page_token)

    async def iter_results(
        self, project: str, run_id: str, *, batch_size: int = 5000
    ) -> AsyncIterator[list[EvaluationResult]]:
        results = self.results[(project, run_id)]
        for start in range(0, len(results), batch_size):
            yield [_copy(r) for r in results[start : start + batch_size]]


def _page(items: list[Any], page_size: int, token: str) -> tuple[list[Any], str]:
    start = int(token) if token else 0
    end = start + page_size
    return [_copy(item) for item in items[start:end]], (str(end) if end < len(items) else "")


class MemoryScores:
    """The trace store's online scores (``list_scores``), by project, oldest first."""

    def __init__(self) -> None:
        self.scores: list[tuple[str, OnlineScore]] = []

    def add(self, project: str, *scores: OnlineScore) -> None:
        self.scores.extend((project, score) for score in scores)

    async def list_scores(
        self,
        project: str,
        *,
        trace_id: str | None = None,
        policy: str | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> list[OnlineScore]:
        found = [
            s
            for p, s in self.scores
            if p == project
            and (trace_id is None or s.trace_id == trace_id)
            and (policy is None or s.policy == policy)
            and (since is None or s.scored_at >= since)
            and (until is None or s.scored_at < until)
        ]
        return sorted(found, key=lambda s: (s.scored_at, s.trace_id, s.metric))


class MemoryObjects:
    """ObjectStore: content-addressed bytes."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}

    async def put(self, data: bytes) -> str:
        key = "sha256/" + hashlib.sha256(data).hexdigest()
        self.blobs[key] = data
        return key

    async def get(self, key: str) -> bytes:
        return self.blobs[key]


class MemoryBus:
    """control, evaluate and watch, as a worker and the schedulers would answer them."""

    def __init__(self) -> None:
        self.controls: list[RunControl] = []
        self.evaluated: list[EvaluateRequest] = []
        self.timeouts: list[float | None] = []
        self._watchers: dict[str, list[asyncio.Queue[RunEvent]]] = defaultdict(list)
        self.subscribed = asyncio.Event()
        self.evaluate_delay: dict[str, float] = {}

    async def control(self, message: RunControl) -> None:
        self.controls.append(_copy(message))

    async def evaluate(self, request: EvaluateRequest, timeout_s: float | None = None) -> EvaluateResponse:
        self.evaluated.append(_copy(request))
        self.timeouts.append(timeout_s)
        delay = self.evaluate_delay.get(request.request_id)
        if delay:
            await asyncio.sleep(delay)
        response = EvaluateResponse()
        for record in request.records:
            for ref in request.evaluators:
                passed = record.output.text == record.reference.text
                response.results.append(
                    EvaluationResult(
                        record_id=record.id,
                        evaluator=ref.alias or ref.ref.split("/")[-1],
                        evaluator_ref=ref.ref,
                        outcome=OUTCOME_SCORED,
                        scores=[Score(passed=passed)],
                    )
                )
        return response

    async def watch(self, run_id: str) -> AsyncIterator[RunEvent]:
        queue: asyncio.Queue[RunEvent] = asyncio.Queue()
        self._watchers[run_id].append(queue)
        self.subscribed.set()
        try:
            while True:
                yield await queue.get()
        finally:
            self._watchers[run_id].remove(queue)

    def publish(self, event: RunEvent) -> None:
        for queue in self._watchers[event.run_id]:
            queue.put_nowait(_copy(event))

    def watchers(self, run_id: str) -> int:
        return len(self._watchers[run_id])


def validate_run(run: EvalRun, *, registry: Registry) -> None:
    """A small stand-in for evalsi.runs.spec.validate_eval_run: the checks these tests rely on."""
    if not run.spec.evaluators:
        raise BadInputError("spec.evaluators: at least one evaluator is required")
    for index, ref in enumerate(run.spec.evaluators):
        try:
            registry.resolve(ref.ref)
        except BadInputError as exc:
            raise BadInputError(f"spec.evaluators[{index}].ref: {exc}") from None


class Api:
    """The handlers over the fakes, and (after ``start``) a real server on free loopback ports."""

    def __init__(self, registry: Registry, datasets_dir: Path, limits: HandlerLimits, *, objects: Any = None) -> None:
        """``objects``: a real object store where a test needs more than content-addressed bytes (stored
        datasets keep a named index)."""
        self.store = MemoryStore()
        self.objects = MemoryObjects() if objects is None else objects
        self.bus = MemoryBus()
        self.registry = registry
        self.evaluation = EvaluationHandlers(self.bus.evaluate, registry=registry, limits=limits)
        self.runs = RunHandlers(
            store=self.store,
            objects=self.objects,
            control=self.bus.control,
            watch=self.bus.watch,
            validate_run=partial(validate_run, registry=registry),
            load_records=partial(load_run_dataset, datasets_dir=datasets_dir),
            limits=limits,
            count_tasks=partial(planned_task_count, registry=registry),
            describe_plan=partial(served_dry_run, registry=registry),
        )
        self.catalog = CatalogHandlers(registry)
        self.scores = MemoryScores()
        # The monitor's "now" (GetPolicyStats' last N windows), set by tests.
        self.now = 1_700_000_000.0
        self.monitor = MonitorHandlers(
            self.store, self.scores, registry=registry, limits=limits, clock=lambda: self.now
        )
        self.table = build_table(evaluation=self.evaluation, runs=self.runs, catalog=self.catalog, monitor=self.monitor)
        self.readiness = Readiness(["store"])
        self.readiness.set_ready("store")
        self.metrics = ApiMetrics(process_metrics=False)
        self.server: ApiServer | None = None

    async def start(self, **config: Any) -> ApiServer:
        settings = {"http_port": 0, "grpc_port": 0, "grace_period_s": 1.0, **config}
        self.server = ApiServer(
            self.table, ServerConfig(**settings), readiness=self.readiness, metrics=self.metrics
        )
        await self.server.start()
        return self.server

    @property
    def http(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.http_port}"

    @property
    def grpc_target(self) -> str:
        assert self.server is not None
        return f"127.0.0.1:{self.server.grpc_port}"
