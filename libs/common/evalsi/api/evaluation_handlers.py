"""EvaluationService: Evaluate (one request, or a stream of them) answered by a worker over the bus, or by the api
itself when every evaluator is cheap and the request small (``evalsi.api.local_evaluation``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from google.protobuf import struct_pb2

from evalsi.api.config import HandlerLimits
from evalsi.api.context import CallContext
from evalsi.api.dependencies import (
    Evaluate,
)
from evalsi.api.file_params import refuse_file_params
from evalsi.api.handlers_common import (
    bus_call,
    required,
)
from evalsi.api.live_packs import LivePacks
from evalsi.api.local_evaluation import LocalEvaluation
from evalsi.api.metrics import ApiMetrics
from evalsi.api.pack_checks import refuse_unallowed
from evalsi.connection_rules import evaluate_problems, refuse
from evalsi.connections import Connections
from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.limits import check_resamples
from evalsi.records import from_value
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest, EvaluateResponse


class EvaluationHandlers:
    """Score: synchronous evaluation of small batches, answered by a worker (or here, by ``local``)."""

    def __init__(
        self, evaluate: Evaluate, *, registry: Registry | None = None, limits: HandlerLimits | None = None,
        connections: Connections | None = None, local: LocalEvaluation | None = None, metrics: ApiMetrics | None = None,
        packs: LivePacks | None = None,
    ) -> None:
        """``connections``: the judges the server offers (evalsi.yaml judges:); none when not given. ``local``
        answers the requests it takes without the bus; None sends every request to the workers. ``metrics``
        counts which path each request took."""
        self._evaluate = evaluate
        self._registry = registry
        self._limits = limits or HandlerLimits()
        self._connections = connections or Connections()
        # Which packs each project may name: evalsi.yaml's evaluators: and what the API stored (docs/packs.md).
        self._packs = packs or LivePacks(self._connections.packs)
        self._local = local
        routed = (metrics or ApiMetrics(process_metrics=False)).evaluate_routed
        self._to_api, self._to_worker = routed.labels("api"), routed.labels("worker")

    async def evaluate(self, request: EvaluateRequest, ctx: CallContext) -> EvaluateResponse:
        return await self._evaluate_one(request, ctx.project, ctx)

    async def evaluate_stream(
        self, requests: AsyncIterator[EvaluateRequest], ctx: CallContext
    ) -> AsyncIterator[EvaluateResponse]:
        """One response per request, in request order; up to ``stream_window`` evaluated at once."""
        window: asyncio.Queue[Any] = asyncio.Queue(maxsize=self._limits.stream_window)
        done = object()

        async def feed() -> None:
            try:
                index = 0
                async for request in requests:
                    project = ctx.resolve_project(request.project)
                    if not request.request_id:  # one id per request, so each answer can be traced
                        request.request_id = f"{ctx.request_id}-{index}"
                    index += 1
                    task = asyncio.ensure_future(self._evaluate_one(request, project, ctx))
                    try:
                        await window.put(task)
                    except asyncio.CancelledError:
                        task.cancel()
                        raise
            except Exception as exc:  # a malformed message or bad project ends the stream after what came before
                await window.put(exc)
                return
            await window.put(done)

        feeder = asyncio.create_task(feed())
        try:
            while (item := await window.get()) is not done:
                if isinstance(item, Exception):
                    raise item
                yield await item
        finally:
            feeder.cancel()
            while not window.empty():
                item = window.get_nowait()
                if isinstance(item, asyncio.Future):
                    item.cancel()
                    with contextlib.suppress(BaseException):
                        await item

    async def _evaluate_one(self, request: EvaluateRequest, project: str, ctx: CallContext) -> EvaluateResponse:
        self.check(request)
        if self._registry is not None:  # evaluators only of packs the project is allowed (naming is the opt-in)
            refuse_unallowed(self._packs.current(), self._registry, project,
                             ((f"evaluators[{i}].ref", ref.ref) for i, ref in enumerate(request.evaluators)))
        # Judges only by the names of the server's connections granted to the project, never an address or key.
        refuse(evaluate_problems(self._connections, request, project, self._registry))
        request.project = project
        if not request.request_id:
            request.request_id = ctx.request_id
        # Cheap evaluators over a small request: the worker's answer, without the round trip.
        if self._local is not None and (bound := self._local.bound_for(request)) is not None:
            self._to_api.inc()
            return await self._local.answer(request, bound, ctx.time_remaining())
        self._to_worker.inc()
        # The worker works under the caller's deadline and stops when it passes (evalsi.bus.requests).
        response = await bus_call("evaluate", self._evaluate(request, ctx.time_remaining()))
        if not response.request_id:
            response.request_id = request.request_id
        return response

    def check(self, request: EvaluateRequest) -> None:
        """Refuse a request a worker could only fail on, naming the field."""
        if not request.records:
            raise BadInputError("records: at least one record is required")
        limit = self._limits.max_sync_records
        if len(request.records) > limit:
            raise BadInputError(
                f"records: {len(request.records)} records exceed the limit of {limit} per synchronous call; "
                "send smaller batches, or create a run"
            )
        if not request.evaluators:
            raise BadInputError("evaluators: at least one evaluator is required (`evalsi catalog list` shows them)")
        check_resamples(request.summary.bootstrap_resamples, "summary.bootstrap_resamples")
        confidence = request.summary.confidence
        if confidence and not 0 < confidence < 1:  # NaN included
            raise BadInputError(f"summary.confidence: must be between 0 and 1 (e.g. 0.95), got {confidence}")
        refuse_file_params((f"evaluators[{i}]", ref.params) for i, ref in enumerate(request.evaluators))
        aliases: dict[str, int] = {}
        for index, ref in enumerate(request.evaluators):
            where = f"evaluators[{index}]"
            required(ref.ref, f"{where}.ref", "an evaluator reference (such as builtin/exact-match)")
            alias = ref.alias
            if self._registry is not None:
                try:
                    evaluator = self._registry.resolve(ref.ref)
                except BadInputError as exc:
                    raise BadInputError(f"{where}.ref: {exc}") from None
                params = from_value(struct_pb2.Value(struct_value=ref.params)) if ref.HasField("params") else {}
                try:
                    evaluator.bind(params)
                except BadInputError as exc:
                    raise BadInputError(f"{where}.params: {exc}") from None
                alias = alias or evaluator.short_name
            if ref.judge and request.judges and ref.judge not in request.judges:
                raise BadInputError(
                    f"{where}.judge: no judge named {ref.judge!r}; judges given: {', '.join(sorted(request.judges))}"
                )
            if alias and alias in aliases:
                raise BadInputError(
                    f"{where}.alias: {alias!r} is also evaluators[{aliases[alias]}]'s; give one of them another alias"
                )
            aliases[alias] = index
