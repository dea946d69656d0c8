"""What a worker does with one task from the bus: generate outputs or run evaluators over its records.

Pure of transport: ``execute_task`` takes a Task and returns a TaskResult; the worker service owns the bus.
The evaluators run through the same runner as the embedded mode, so a record scores identically wherever
it is evaluated.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from evalsi.bus.v1alpha1.bus_pb2 import (
    STAGE_EVALUATE,
    STAGE_GENERATE,
    STAGE_REDUCE,
    TASK_STATUS_DONE,
    Task,
    TaskRecords,
    TaskResult,
    TaskStatus,
)
from evalsi.connections import Connections
from evalsi.datasets.held import HeldRecords
from evalsi.errors import BadInputError
from evalsi.evaluators import BoundEvaluator, EvalContext, Registry
from evalsi.evaluators.runner import (
    ColumnLists,
    Columns,
    Results,
    RunnerOptions,
    append_results,
    infra_errors_in,
    run_evaluators,
)
from evalsi.judges import RetryPolicy
from evalsi.judges.panel import JudgeSet, judge_config_from_spec
from evalsi.limits import DEFAULT_CALL_TIMEOUT_S
from evalsi.projects import DEFAULT_PROJECT
from evalsi.records import from_value, to_value
from evalsi.runs.evaluate_request import BoundLists, answer_evaluate, check_evaluate_request, runner_options
from evalsi.runs.outcome import TARGET_FAILURE_KEY
from evalsi.sandbox.access import LadderOpener, SandboxAccess, SandboxOpener, sandbox_request
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest, EvaluateResponse
from evalsi.v1alpha1.evaluator_pb2 import EvaluatorRef
from evalsi.v1alpha1.record_pb2 import Record, Usage
from evalsi.v1alpha1.run_pb2 import SandboxSpec
from evalsi.v1alpha1.score_pb2 import (
    ERROR_KIND_INFRA,
    OUTCOME_CANCELLED,
    OUTCOME_ERROR,
    OUTCOME_SKIPPED,
    EvaluationResult,
    SummaryOptions,
)

if TYPE_CHECKING:  # imported where used: the target connectors are heavy and evaluation tasks never need them
    from evalsi.targets.models import TargetFailure

FetchObject = Callable[[str], Awaitable[bytes]]
# Hears each answered target call's usage with its task, as the call returns (an in-process run's budget meter).
TaskUsageCallback = Callable[[Task, Usage], None]
# The other result sets a comparative evaluator compares a task's records with (evaluate(compare_to=...)).
Counterparts = Callable[[Task, Sequence[Record]], Sequence[Sequence[Record]]]


@dataclass
class Executor:
    """The long-lived parts a worker shares across tasks: evaluators, judges (limits, cache, sessions)."""

    registry: Registry
    judges: JudgeSet
    concurrency: int = 16
    # Seconds one evaluator call may take before it is abandoned and reported as an evaluator error
    # (evalsi.evaluators.runner; evalsi-worker --call-timeout). None: no limit.
    call_timeout_s: float | None = DEFAULT_CALL_TIMEOUT_S
    fetch: FetchObject | None = None
    worker: str = socket.gethostname()
    # A service's own judges: and agents: configuration. When set, judges and targets are resolved by name
    # against it for the task's project, and no endpoint or credential a message carries is ever used; None
    # (tests of the embedded engine) takes the message's specs as they are.
    connections: Connections | None = None
    # The waits between a target's retries (None: the connector's own; tests of in-process runs shorten them).
    retry: RetryPolicy | None = None
    on_usage: TaskUsageCallback | None = None
    # Where comparative evaluators find the records they compare with; None: nowhere (they are refused).
    counterparts: Counterparts | None = None
    # Where code evaluators (pool ``sandbox``) open sandboxes: evalsi-sandboxd on a server's sandbox pool; None, the
    # in-process ladder (embedded), made on first use.
    sandbox: SandboxOpener | None = None
    # Whether a run's sandbox may name a host path as its root when ``sandbox`` is None (the in-process ladder):
    # no on a worker serving other people's runs without sandboxd; yes embedded (InProcessExecutor: the caller's own
    # machine).
    caller_roots: bool = False
    # The evaluators of recent tasks, resolved and bound once: every task of a run names the same ones.
    _bound: BoundLists = field(init=False, repr=False)
    # Harness environments' sandboxes: ``sandbox``, keeping prepared environments between a run's trials
    # (evalsi.harness.environment_snapshots.SharedSetups), made on first use.
    _setups: SandboxOpener | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        self._bound = BoundLists(self.registry)

    def resolve(self, refs: Sequence[EvaluatorRef]) -> list[BoundEvaluator]:
        """``resolve_evaluators`` over this executor's registry, remembered for the next task naming the same refs."""
        return self._bound.resolve(refs)

    def _contexts(self, bound: Sequence[BoundEvaluator], specs: dict, project: str,
                  sandbox: SandboxSpec | None = None) -> Callable:
        from evalsi.connection_rules import judge_config

        contexts: dict[str, EvalContext] = {}
        access = self._sandbox_access(sandbox, project) if any(b.evaluator.pool == "sandbox" for b in bound) else None
        for b in bound:
            judge = None
            if "judge" in b.evaluator.requires and self.connections is not None:
                config = judge_config(self.connections, b.judge, specs.get(b.judge), project, f"judges.{b.judge}")
                judge = self.judges.client_for(config)
            elif "judge" in b.evaluator.requires and b.judge in specs:
                judge = self.judges.client_for(judge_config_from_spec(b.judge, specs[b.judge]))
            contexts[b.alias] = EvalContext(judge=judge, project=project, sandbox=access)
        return lambda b: contexts[b.alias]

    def _opener(self) -> SandboxOpener:
        if self.sandbox is None:
            self.sandbox = LadderOpener(caller_roots=self.caller_roots)
        return self.sandbox

    def _environment_opener(self) -> SandboxOpener:
        from evalsi.harness.environment_snapshots import SharedSetups

        if self._setups is None:
            self._setups = SharedSetups(self._opener())
        return self._setups

    def _sandbox_access(self, sandbox: SandboxSpec | None, project: str) -> SandboxAccess:
        opener = self._opener()
        return SandboxAccess(sandbox_request(sandbox, base=opener.base), opener, project)

    async def records_of(self, task: Task) -> Sequence[Record]:
        if not task.records_ref:
            return list(task.records)
        if self.fetch is None:
            raise BadInputError(f"task {task.key} refers to records by reference but no object store is configured")
        holder = TaskRecords()
        holder.ParseFromString(await self.fetch(task.records_ref))
        return list(holder.records)

    async def evaluate(
        self,
        records: Sequence[Record],
        refs: Sequence[EvaluatorRef],
        judges: dict,
        project: str,
        *,
        options: RunnerOptions | None = None,
        compare_with: Sequence[Sequence[Record]] = (),
        stop: asyncio.Event | None = None,
        into: Results | None = None,
        columns: Columns | None = None,
        usage: Usage | None = None,
        sandbox: SandboxSpec | None = None,
    ) -> list[EvaluationResult]:
        """The results of ``refs`` over ``records`` (appended to ``into`` when given, or as ``columns``; their
        scores' cost to ``usage``)."""
        bound = self.resolve(refs)
        return await run_evaluators(
            records,
            bound,
            self._contexts(bound, judges, project, sandbox),
            options=options or RunnerOptions(concurrency=self.concurrency, call_timeout_s=self.call_timeout_s),
            compare_with=compare_with,
            cancel=stop,
            into=into,
            columns=columns,
            usage=usage,
        )

    async def execute(self, task: Task, *, final_attempt: bool = True, stop: asyncio.Event | None = None) -> TaskResult:
        """Run one task; a bad task (unknown evaluator, bad params) raises BadInputError, which is permanent.

        Once ``stop`` is set, calls in flight finish and no new one starts: the records not yet generated or
        evaluated end cancelled in the result (an in-process run being cancelled keeps the work it paid for).

        Unless this is the task's last attempt, evaluations failing on infrastructure (a judge provider down
        after its own retries) raise RetryTask so the whole task runs again later; answers already given
        come back from the judge cache. On the last attempt they are reported as infrastructure errors.
        """
        out = result_for(task, TASK_STATUS_DONE, self.worker)
        records = await self.records_of(task)
        if task.stage == STAGE_GENERATE:
            from evalsi.connection_rules import ServerEndpoints
            from evalsi.targets.generation import generate
            from evalsi.targets.identity import generation_kind
            from evalsi.targets.models import TargetClient, failed_generation

            client = None
            endpoints = ServerEndpoints(self.connections, task.project) if self.connections is not None else None
            try:
                if generation_kind(task.target, task.harness) == "model":
                    # The judges' limiter: a target model's rpm/tpm is shared by every task and worker like a judge's.
                    client = TargetClient(
                        task.target.model, limiter=self.judges.limiter, retry=self.retry, endpoints=endpoints
                    )
                # Agents and the built-in harness run here exactly as embedded (targets.agents), on the harness pool.
                generation = await generate(
                    records,
                    task.target,
                    trial=task.trial,
                    seed=task.seed,
                    client=client,
                    run_id=task.run_id,
                    concurrency=self.concurrency,
                    harness=task.harness,
                    retry=self.retry,
                    cancel=stop,
                    on_usage=self._usage_of(task),
                    endpoints=endpoints,
                    # Harness environments (§11) of agent runs: sandboxd on a server, else the in-process ladder.
                    sandbox=self._environment_opener() if generation_kind(task.target, task.harness) != "model"
                    else None,
                    project=task.project,
                )
            except BadInputError as exc:
                # The API validated the spec; what fails here is this worker's environment (an agent or tool module
                # it cannot import). Each record is an infrastructure error, so the run ends saying why instead of
                # waiting forever on the evaluations of a dead-lettered generation.
                generation = failed_generation(records, trial=task.trial, kind="infra", reason=f"target: {exc}")
            finally:
                if client is not None:
                    await client.aclose()
            for index, failure in generation.failures.items():
                # Travels with the record to its evaluation task, which reports it instead of evaluating.
                generation.records[index].metadata[TARGET_FAILURE_KEY].CopyFrom(
                    to_value({"kind": failure.kind, "reason": failure.reason})
                )
            out.records.extend(generation.records)
            out.usage.CopyFrom(generation.usage)
            return out
        if task.stage not in (STAGE_EVALUATE, STAGE_REDUCE):
            raise BadInputError(f"task {task.key}: unknown stage {task.stage}")
        options = self._options(task.summary)  # task.seed is the target's, not the bootstrap's
        failed, evaluable = _split_failed(records)
        # An evaluation task's results are written as the columns it travels as (runs.result_columns), with no
        # message made for a cheap evaluator's verdict; a reduction's, and results labelled with their cluster, as
        # messages (few, or each one written to again).
        columns = ColumnLists() if task.stage == STAGE_EVALUATE and not task.summary.cluster_by else None
        results: list[EvaluationResult] = []
        usage = Usage()
        if evaluable or task.stage != STAGE_REDUCE:  # nothing to reduce over: the failed records' results say why
            others = self.counterparts(task, evaluable) if self.counterparts is not None else ()
            # Written straight into the task's result: appending them afterwards would copy every one.
            into = out.results if columns is None else None
            results = await self.evaluate(evaluable, task.evaluators, dict(task.judges), task.project, options=options,
                                          compare_with=others, stop=stop, into=into, columns=columns, usage=usage,
                                          sandbox=task.sandbox if task.HasField("sandbox") else None)
        if not final_attempt:  # on the last attempt they are reported as they are
            infra = _infra_errors(results) if columns is None else infra_errors_in(columns)
            if infra:
                raise RetryTask(f"{infra} evaluations failed on infrastructure")
        if failed:
            failures = _failure_results(failed, self.resolve(task.evaluators))
            if columns is None:
                out.results.extend(failures)
            else:
                append_results(columns, failures)
        if task.summary.cluster_by:
            label_clusters(out.results, records, task.summary.cluster_by)
        out.usage.CopyFrom(usage)
        if columns is not None:
            self.hand_over(out, columns)
        return out

    def hand_over(self, out: TaskResult, columns: ColumnLists) -> None:
        """Put an evaluation task's result columns where its result's reader finds them: into the message that
        goes on the bus."""
        columns.copy_to(out.columns)

    def _usage_of(self, task: Task) -> Callable[[Usage], None] | None:
        on_usage = self.on_usage
        if on_usage is None:
            return None
        return lambda usage: on_usage(task, usage)

    async def evaluate_request(self, request: EvaluateRequest) -> EvaluateResponse:
        """A synchronous Evaluate: small batches, answered over request/reply, summaries included.

        Cancelled as a whole at the request's deadline (evalsi.bus.requests); each call has its own too."""
        check_evaluate_request(request)
        bound = self.resolve(request.evaluators)  # callers repeat their evaluator lists as runs' tasks do
        contexts = self._contexts(bound, dict(request.judges), request.project or DEFAULT_PROJECT)
        return await answer_evaluate(request, bound, contexts, self._options(request.summary))

    def _options(self, summary: SummaryOptions) -> RunnerOptions:
        return runner_options(summary, concurrency=self.concurrency, call_timeout_s=self.call_timeout_s)


class RetryTask(Exception):
    """Evaluations of the task failed on infrastructure; running the whole task again may succeed."""


def _infra_errors(results: Sequence[EvaluationResult]) -> int:
    return sum(1 for r in results if r.outcome == OUTCOME_ERROR and r.error_kind == ERROR_KIND_INFRA)


def result_for(task: Task, status: TaskStatus, worker: str) -> TaskResult:
    """An empty result of ``task`` with its identity filled in."""
    return TaskResult(
        key=task.key,
        run_id=task.run_id,
        project=task.project,
        shard=task.shard,
        stage=task.stage,
        trial=task.trial,
        status=status,
        worker=worker,
    )


def _split_failed(records: Sequence[Record]) -> tuple[Sequence[Record], Sequence[Record]]:
    """(records the target produced nothing for, records to evaluate), in one pass."""
    if isinstance(records, HeldRecords) and records.columns is not None:
        return [], records  # records of text rows carry no metadata, so no target's failure
    failed: list[Record] = []
    evaluable: list[Record] = []
    for record in records:
        (failed if TARGET_FAILURE_KEY in record.metadata else evaluable).append(record)
    return failed, evaluable


def _failure_results(records: Sequence[Record], bound: Sequence[BoundEvaluator]) -> list[EvaluationResult]:
    """Results for records the target produced no output for: infra errors, skips or cancellations."""
    from evalsi.targets.models import TargetFailure

    out: list[EvaluationResult] = []
    for record in records:
        marker = from_value(record.metadata[TARGET_FAILURE_KEY])
        failure = TargetFailure(marker.get("kind", "infra"), marker.get("reason", "the target failed"))
        out.extend(failure_result(record, b, failure) for b in bound)
    return out


def failure_result(record: Record, bound: BoundEvaluator, failure: TargetFailure) -> EvaluationResult:
    """The result of an evaluator on a record the target produced nothing for."""
    result = EvaluationResult(
        record_id=record.id, evaluator=bound.alias, evaluator_ref=bound.evaluator.ref, trial=record.provenance.trial
    )
    result.reason = failure.reason
    if failure.kind == "infra":
        result.outcome, result.error_kind = OUTCOME_ERROR, ERROR_KIND_INFRA
    elif failure.kind == "skipped":
        result.outcome = OUTCOME_SKIPPED
    else:
        result.outcome = OUTCOME_CANCELLED
    return result


def label_clusters(results: Sequence[EvaluationResult], records: Sequence[Record], cluster_by: str) -> None:
    """Each result carries its record's cluster value, so a comparison of two runs can cluster by it without the
    records (neither a saved result nor the stored results hold them)."""
    from evalsi.runs.summary import cluster_keys

    keys = cluster_keys(records, cluster_by)
    for result in results:
        cluster = keys.get(result.record_id)
        if cluster is not None:
            result.cluster = cluster
