"""Inside a plugin process: evaluating one batch, and one dataset reduction, with ordinary ``@evaluator`` code.

Outcomes follow the runner's rules (``SkipRecord`` skips, ``InfraError`` is an infra error, any other exception
the evaluator's error), so a plugin's evaluator behaves as it would in-process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evalsi.errors import BadInputError, SkipRecord
from evalsi.evaluators import BoundEvaluator, EvalContext, Evaluator, normalize_scores
from evalsi.evaluators._slots import fail, store_plain
from evalsi.plugin.v1alpha1 import plugin_pb2
from evalsi.records import struct_to_dict
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import EvaluationResult

# The host's batches are bounded by its max_batch; this bounds what a plugin accepts from any caller.
MAX_BATCH_RECORDS = 4096


def bind(evaluators: Mapping[str, Evaluator], ref: str, params: Any, scope: str) -> BoundEvaluator:
    """The evaluator named ``name@version`` with its params validated; a wrong name or scope is bad input."""
    ev = evaluators.get(ref)
    if ev is None:
        raise BadInputError(f"this plugin hosts no evaluator {ref!r}; it hosts {', '.join(sorted(evaluators))}")
    if (ev.scope == "dataset") != (scope == "dataset"):
        rpc = "Reduce" if ev.scope == "dataset" else "Evaluate"
        raise BadInputError(f"evaluator {ref} has scope {ev.scope}; call it with {rpc}")
    return ev.bind(struct_to_dict(params))


async def _one(bound: BoundEvaluator, record: Record, ctx: EvalContext) -> EvaluationResult:
    result = EvaluationResult(record_id=record.id)
    ev = bound.evaluator
    args: tuple[Any, ...] = (record, ctx) if ev.wants_context else (record,)
    try:
        if ev.is_async:
            returned = await ev.fn(*args, **bound.params)
        else:
            # Sync evaluators may block (a model, a subprocess): off the loop, so judge answers keep flowing.
            returned = await asyncio.to_thread(ev.fn, *args, **bound.params)
        store_plain(result, bound, returned)
    except Exception as exc:
        fail(result, exc)
    return result


def evaluate_batch(
    evaluators: Mapping[str, Evaluator], batch: plugin_pb2.Batch, context: Callable[[str], EvalContext]
) -> plugin_pb2.BatchResults:
    """One result per record, in order. ``context(record_id)`` is the EvalContext for that record (its judge)."""
    answer = plugin_pb2.BatchResults(batch_id=batch.batch_id)
    if len(batch.records) > MAX_BATCH_RECORDS:
        raise BadInputError(f"a batch holds at most {MAX_BATCH_RECORDS} records, got {len(batch.records)}")
    bound = bind(evaluators, batch.evaluator, batch.params, "record")

    async def run() -> list[EvaluationResult]:
        return await asyncio.gather(*(_one(bound, record, context(record.id)) for record in batch.records))

    answer.results.extend(asyncio.run(run()))
    return answer


def reduce(evaluators: Mapping[str, Evaluator], request: plugin_pb2.ReduceRequest) -> plugin_pb2.ReduceResponse:
    """Map each record with the evaluator's mapper (a ``SkipRecord`` leaves it out), then reduce once."""
    bound = bind(evaluators, request.evaluator, request.params, "dataset")
    ev = bound.evaluator
    assert ev.mapper is not None  # @evaluator refuses a dataset scope without one
    values: list[Any] = []
    try:
        for record in request.records:
            try:
                values.append(ev.mapper(record, **bound.params))
            except SkipRecord:
                continue
        if not values:
            return plugin_pb2.ReduceResponse(skipped="no record could be mapped")
        args: tuple[Any, ...] = (values, EvalContext()) if ev.wants_context else (values,)
        scores: Sequence[Any] = normalize_scores(ev, ev.fn(*args, **bound.params))
    except Exception as exc:
        return plugin_pb2.ReduceResponse(error=f"{type(exc).__name__}: {exc}")
    return plugin_pb2.ReduceResponse(scores=scores)
