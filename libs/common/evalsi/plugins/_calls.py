"""Inside a plugin process: evaluating one batch, and one dataset reduction, with ordinary ``@evaluator`` code.

Outcomes follow the runner's rules (``SkipRecord`` skips, ``InfraError`` is an infra error, any other exception
the evaluator's error), so a plugin's evaluator behaves as it would in-process.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from google.protobuf import json_format

from evalsi.errors import BadInputError, SkipRecord
from evalsi.evaluators import BoundEvaluator, EvalContext, Evaluator, normalize_scores
from evalsi.evaluators._slots import fail, store_plain
from evalsi.plugin.v1alpha1 import plugin_pb2
from evalsi.records import struct_to_dict
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import EvaluationResult

# The host's batches are bounded by its max_batch; this bounds what a plugin accepts from any caller.
MAX_BATCH_RECORDS = 4096
_SKIPPED = object()  # a record its mapper skipped: kept in place so the host's positions still line up


def bind(evaluators: Mapping[str, Evaluator], ref: str, params: Any, scope: str = "") -> BoundEvaluator:
    """The evaluator named ``name@version`` with its params validated; a wrong name or scope (when given) is bad
    input."""
    ev = evaluators.get(ref)
    if ev is None:
        raise BadInputError(f"this plugin hosts no evaluator {ref!r}; it hosts {', '.join(sorted(evaluators))}")
    if scope and (ev.scope == "dataset") != (scope == "dataset"):
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


class MappedDatasets:
    """The mapped values of the last few datasets a host sent (by evaluator, params and the host's dataset id), so
    a bootstrap's resamples name positions instead of sending every record again."""

    def __init__(self, keep: int = 4) -> None:
        self._keep = keep
        self._lock = threading.Lock()
        self._values: OrderedDict[tuple[str, str, str], list[Any]] = OrderedDict()

    def get(self, key: tuple[str, str, str]) -> list[Any] | None:
        with self._lock:
            return self._values.get(key)

    def put(self, key: tuple[str, str, str], values: list[Any]) -> None:
        with self._lock:
            self._values[key] = values
            while len(self._values) > self._keep:
                self._values.popitem(last=False)


def _map(bound: BoundEvaluator, records: Sequence[Record]) -> list[Any]:
    """Each record's mapped value, ``_SKIPPED`` where the mapper raised SkipRecord."""
    mapper = bound.evaluator.mapper
    assert mapper is not None  # @evaluator refuses a dataset scope without one
    mapped: list[Any] = []
    for record in records:
        try:
            mapped.append(mapper(record, **bound.params))
        except SkipRecord:
            mapped.append(_SKIPPED)
    return mapped


def reduce(evaluators: Mapping[str, Evaluator], request: plugin_pb2.ReduceRequest,
           datasets: MappedDatasets) -> plugin_pb2.ReduceResponse:
    """Map each record with the evaluator's mapper (a ``SkipRecord`` leaves it out), or take the values mapped for
    the named dataset, at ``indices`` when given; then reduce once."""
    bound = bind(evaluators, request.evaluator, request.params, "dataset")
    ev = bound.evaluator
    key = (request.evaluator, json_format.MessageToJson(request.params, sort_keys=True), request.dataset)
    try:
        if request.records or not request.dataset:
            mapped = _map(bound, request.records)
            if request.dataset:
                datasets.put(key, mapped)
        else:
            kept = datasets.get(key)
            if kept is None:
                return plugin_pb2.ReduceResponse(unknown_dataset=True)
            mapped = kept
        if request.indices:
            if max(request.indices) >= len(mapped):
                raise BadInputError(f"index {max(request.indices)} is past the dataset's {len(mapped)} records")
            mapped = [mapped[i] for i in request.indices]
        values = [value for value in mapped if value is not _SKIPPED]
        if not values:
            return plugin_pb2.ReduceResponse(skipped="no record could be mapped")
        args: tuple[Any, ...] = (values, EvalContext()) if ev.wants_context else (values,)
        scores: Sequence[Any] = normalize_scores(ev, ev.fn(*args, **bound.params))
    except Exception as exc:
        return plugin_pb2.ReduceResponse(error=f"{type(exc).__name__}: {exc}")
    return plugin_pb2.ReduceResponse(scores=scores)
