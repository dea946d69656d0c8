"""How cascade stages get evaluated: by the worker pools over the bus (the service), or in this process.

Both turn ``EvaluationResult``s into ``StageResult``s the same way: scored → its scores, skipped → the reason,
an evaluator exception → ``error`` (stored, counted apart, never a score). An infrastructure failure (no
worker answered, a provider failed after its retries) raises ``InfraError``: the completed trace is tried again
later, never scored as a model failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from nats.aio.client import Client as NATS

from evalsi.bus import ObjectStore, request, subjects
from evalsi.errors import DeadlineExceeded, InfraError
from evalsi.evaluators import EvalContext
from evalsi.evaluators.runner import RunnerOptions, run_evaluators
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest, EvaluateResponse
from evalsi.v1alpha1.evaluator_pb2 import JudgeSpec
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import (
    ERROR_KIND_INFRA,
    OUTCOME_ERROR,
    OUTCOME_SCORED,
    OUTCOME_SKIPPED,
    EvaluationResult,
)

from .cascade import ERROR, SCORED, SKIPPED, Stage, StageResult
from .engine import StageEvaluator


def stage_results(stages: Sequence[Stage], results: Sequence[EvaluationResult]) -> list[StageResult]:
    """One StageResult per stage from the results of evaluating one record; raises InfraError on infra errors."""
    by_alias = {result.evaluator: result for result in results}
    out = []
    for stage in stages:
        result = by_alias.get(stage.alias)
        if result is None:
            raise InfraError(f"stage {stage.alias}: the worker answered without its result")
        if result.outcome == OUTCOME_SCORED:
            out.append(StageResult(stage.alias, SCORED, tuple(result.scores)))
        elif result.outcome == OUTCOME_SKIPPED:
            out.append(StageResult(stage.alias, SKIPPED, reason=result.reason))
        elif result.outcome == OUTCOME_ERROR and result.error_kind == ERROR_KIND_INFRA:
            raise InfraError(f"stage {stage.alias}: {result.reason or 'infrastructure error'}")
        else:
            out.append(StageResult(stage.alias, ERROR, reason=result.reason or "the evaluator failed"))
    return out


def bus_stage_evaluator(nc: NATS, *, judges: Mapping[str, JudgeSpec] | None = None,
                        timeout_s: float = 60.0, store: ObjectStore | None = None) -> StageEvaluator:
    """Stages go to the pool of their evaluator (``evaluate.<pool>``, request/reply), pools in parallel.
    ``store`` carries a trace's record over the bus's payload limit (a long agent trajectory)."""
    judge_specs = dict(judges or {})

    async def evaluate(project: str, record: Record, stages: Sequence[Stage]) -> Sequence[StageResult]:
        by_pool: dict[str, list[Stage]] = {}
        for stage in stages:
            pool = stage.bound.evaluator.pool
            by_pool.setdefault(pool if pool in subjects.POOLS else "cpu", []).append(stage)

        async def ask(pool: str, group: list[Stage]) -> list[StageResult]:
            req = EvaluateRequest(project=project, records=[record], judges=judge_specs)
            req.evaluators.extend(stage.bound.to_ref() for stage in group)
            try:
                response = await request(nc, subjects.evaluate(pool), req, EvaluateResponse, timeout_s, store=store)
            except DeadlineExceeded as exc:  # the worker stopped at the deadline: the trace is tried again later
                raise InfraError(str(exc)) from exc
            return stage_results(group, response.results)

        answers = await asyncio.gather(*(ask(pool, group) for pool, group in by_pool.items()))
        return [result for answer in answers for result in answer]

    return evaluate


def local_stage_evaluator(context: EvalContext | None = None) -> StageEvaluator:
    """Stages evaluated in this process (embedded use, tests): the same runner the workers use."""

    async def evaluate(project: str, record: Record, stages: Sequence[Stage]) -> Sequence[StageResult]:
        ctx = context or EvalContext(project=project)
        results = await run_evaluators([record], [stage.bound for stage in stages], lambda _: ctx,
                                       options=RunnerOptions(concurrency=max(1, len(stages))))
        return stage_results(stages, results)

    return evaluate
