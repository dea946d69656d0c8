"""A synchronous Evaluate answered from its bound evaluators: the one engine behind both places that answer it.

A worker's request/reply responder answers through ``Executor.evaluate_request``; the api answers a small request
of cheap evaluators itself (``evalsi.api.local_evaluation``). Both check, bind, run and summarize here, so the two
answers agree field by field (a test holds them to it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from evalsi.datasets import records_from_rows
from evalsi.errors import BadInputError
from evalsi.evaluators import BoundEvaluator, EvalContext, Registry
from evalsi.evaluators.runner import RunnerOptions, run_evaluators
from evalsi.limits import check_resamples
from evalsi.runs.binding import resolve_evaluators
from evalsi.runs.outcome import bootstrap_seed
from evalsi.stats.defaults import DEFAULT_BOOTSTRAP_RESAMPLES, DEFAULT_CONFIDENCE
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest, EvaluateResponse
from evalsi.v1alpha1.evaluator_pb2 import EvaluatorRef
from evalsi.v1alpha1.score_pb2 import SummaryOptions

# The context each bound evaluator is called with (its judge client, the project).
ContextOf = Callable[[BoundEvaluator], EvalContext]
# How many distinct evaluator lists a cache remembers bound (a worker serves a few runs at a time).
_BOUND_CACHE_SIZE = 64


class BoundLists:
    """Evaluator lists resolved and bound once: a run's tasks, and a client's Evaluate calls, repeat the same ones."""

    def __init__(self, registry: Registry, size: int = _BOUND_CACHE_SIZE) -> None:
        self._registry = registry
        self._size = size
        self._bound: dict[tuple[bytes, ...], list[BoundEvaluator]] = {}

    def resolve(self, refs: Sequence[EvaluatorRef]) -> list[BoundEvaluator]:
        """``resolve_evaluators`` over the registry, remembered for the next call naming the same refs."""
        key = tuple(ref.SerializeToString(deterministic=True) for ref in refs)
        bound = self._bound.get(key)
        if bound is None:
            bound = resolve_evaluators(list(refs), self._registry)
            if len(self._bound) >= self._size:
                self._bound.clear()
            self._bound[key] = bound
        return list(bound)


def check_evaluate_request(request: EvaluateRequest) -> None:
    """What every answerer refuses, whoever sent the request (the api checks more, naming more fields)."""
    if not request.records:
        raise BadInputError("records: at least one record is required")
    if not request.evaluators:
        raise BadInputError("evaluators: at least one evaluator is required")
    check_resamples(request.summary.bootstrap_resamples, "summary.bootstrap_resamples")


def runner_options(summary: SummaryOptions, *, concurrency: int, call_timeout_s: float | None) -> RunnerOptions:
    """The runner's options for a task or an Evaluate: dataset-scope bootstraps follow the request's summary."""
    return RunnerOptions(
        concurrency=concurrency,
        confidence=summary.confidence or DEFAULT_CONFIDENCE,
        seed=bootstrap_seed(summary),
        bootstrap_resamples=summary.bootstrap_resamples or DEFAULT_BOOTSTRAP_RESAMPLES,
        call_timeout_s=call_timeout_s,
    )


async def answer_evaluate(
    request: EvaluateRequest, bound: Sequence[BoundEvaluator], context_of: ContextOf, options: RunnerOptions
) -> EvaluateResponse:
    """The results of ``bound`` over the request's records, with their summaries.

    The caller bounds the time: a worker's responder cancels this at the request's deadline, the api likewise.
    """
    from evalsi.runs.summary import summarize_results  # numpy: loaded by the first answer, not by an import

    # The dataset rules: a record is its own sample unless ids repeat or provenance.trial is given, so
    # id-less records get content ids rather than pooling as trials of one sample "" (pass@k, no interval).
    records = records_from_rows(request.records, source="records").records
    response = EvaluateResponse(request_id=request.request_id)
    results = await run_evaluators(records, bound, context_of, options=options, into=response.results)
    response.summaries.extend(summarize_results(results, bound, records=records, options=request.summary))
    return response
