"""Evaluate answered in the api's own process when every evaluator is cheap and the request small.

Through a worker, one Evaluate hops api -> nats-server -> worker -> nats-server -> api, and on this kind of
machine every hop is a wake-up costing more than a cheap evaluator's whole call (docs/benchmarks.md). So a
request whose evaluators all declare themselves cheap (``@evaluator(cheap=True)``: synchronous, bounded by the
input's size, no I/O; no judge, and on the plain cpu pool) is answered here, by the same engine a worker runs
(``evalsi.runs.evaluate_request``), and the answer is the worker's, field by field. Everything else (judges,
code, agents, plugins) goes to the worker pools as before.

The api's event loop must stay responsive to every other caller, so the request's size bounds the time spent
here: past ``max_bytes`` of request or ``max_evaluations`` (records x evaluators), or with a bootstrap interval
(resampling is CPU that grows with the resamples asked for), it goes to a pool. The runner yields the loop
between its slices of cheap calls, and the call's deadline cancels the answer as a worker's responder would.
"""

from __future__ import annotations

import asyncio

from evalsi.errors import DeadlineExceeded
from evalsi.evaluators import BoundEvaluator, EvalContext, Evaluator, Registry
from evalsi.limits import DEFAULT_CALL_TIMEOUT_S
from evalsi.projects import DEFAULT_PROJECT
from evalsi.runs.evaluate_request import BoundLists, answer_evaluate, check_evaluate_request, runner_options
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest, EvaluateResponse

# Bytes of one request answered here (records, evaluators, options; protobuf size), and its records x evaluators.
# The largest such requests hold the loop about 2 ms of CPU (docs/benchmarks.md), as long as a worker's round trip.
DEFAULT_MAX_BYTES = 32 * 1024
DEFAULT_MAX_EVALUATIONS = 32


def runs_in_process(evaluator: Evaluator) -> bool:
    """Whether the evaluator's own declaration lets the api call it: cheap (bounded, microseconds, no I/O), no
    judge to reach, and placed on the plain ``cpu`` pool (another pool is a placement it must keep: a sandbox's
    isolation, a GPU, a harness)."""
    return evaluator.cheap and evaluator.pool == "cpu" and "judge" not in evaluator.requires


class LocalEvaluation:
    """Answers the Evaluate requests that qualify (``bound_for``) without the bus."""

    def __init__(
        self,
        registry: Registry,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_evaluations: int = DEFAULT_MAX_EVALUATIONS,
        timeout_s: float | None = None,
        call_timeout_s: float | None = DEFAULT_CALL_TIMEOUT_S,
    ) -> None:
        """``timeout_s``: the longest an answer may take when the caller's deadline is later or absent (the api's
        ``--evaluate-timeout``, as a worker gets); ``call_timeout_s``: each evaluator call's, as a worker's."""
        self._registry = registry
        self._bound = BoundLists(registry)
        self._max_bytes = max_bytes
        self._max_evaluations = max_evaluations
        self._timeout_s = timeout_s
        self._call_timeout_s = call_timeout_s

    def bound_for(self, request: EvaluateRequest) -> list[BoundEvaluator] | None:
        """The request's evaluators bound, when it is answered here; None when it goes to a worker pool.

        Call it after the request was checked (``EvaluationHandlers.check``): the refs resolve and bind."""
        if len(request.records) * len(request.evaluators) > self._max_evaluations:
            return None
        if request.summary.interval == "bootstrap":
            return None
        for ref in request.evaluators:
            if not runs_in_process(self._registry.resolve(ref.ref)):
                return None
        if request.ByteSize() > self._max_bytes:  # last: the size is computed over the whole message
            return None
        return self._bound.resolve(request.evaluators)

    async def answer(
        self, request: EvaluateRequest, bound: list[BoundEvaluator], remaining_s: float | None
    ) -> EvaluateResponse:
        """The answer a worker would give, within ``remaining_s`` (the caller's deadline; None: none given)."""
        check_evaluate_request(request)
        timeout = self._timeout_s if remaining_s is None else min(remaining_s, self._timeout_s or remaining_s)
        if timeout is not None and not timeout > 0:
            raise DeadlineExceeded("evaluate: the deadline passed before the evaluation started")
        # Cheap evaluators never reach a judge: one judge-less context of the request's project serves them all.
        context = EvalContext(project=request.project or DEFAULT_PROJECT)
        # Concurrency bounds async calls only, and cheap evaluators are synchronous.
        options = runner_options(request.summary, concurrency=1, call_timeout_s=self._call_timeout_s)
        try:
            async with asyncio.timeout(timeout) as deadline:
                return await answer_evaluate(request, bound, lambda _bound: context, options)
        except TimeoutError:
            if deadline.expired():
                raise DeadlineExceeded(f"evaluate: stopped at the request's deadline of {timeout:g}s") from None
            raise
