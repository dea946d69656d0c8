"""The plugin SDK: ``serve(pack_or_evaluators, socket_path)`` hosts ordinary ``@evaluator``s over the plugin protocol.

A plugin process serves EvaluatorPluginService and grpc.health.v1 on a Unix socket that only its user can reach
(the socket 0600, in a directory that must be 0700). Judge calls travel back to the host on the Evaluate stream: a
plugin holds no provider credentials; ``ctx.judge.complete(messages)`` inside a plugin is answered by the run's
judge, with the run's cache, rate limits and cost accounting.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import queue
import signal
import stat
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from evalsi.errors import BadInputError, InfraError
from evalsi.evaluators import EvalContext, Evaluator, Pack
from evalsi.judges.connectors import Completion
from evalsi.plugin.v1alpha1 import plugin_pb2, plugin_pb2_grpc
from evalsi.plugins._calls import MappedDatasets, bind, evaluate_batch, reduce
from evalsi.v1alpha1.score_pb2 import ERROR_KIND_EVALUATOR, OUTCOME_ERROR

PROTOCOL = 1
SDK = "evalsi-plugin-sdk/1"
SERVICE = "evalsi.plugin.v1alpha1.EvaluatorPluginService"
# Bounds on one message either way; the host sets the same (its manifest's limits.max_message_mb).
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# Batches one Evaluate stream evaluates at once.
_STREAM_CONCURRENCY = 4


class _StreamJudge:
    """``ctx.judge`` inside a plugin: each ``complete`` is a JudgeRequest on the stream, answered by the host."""

    def __init__(self, stream: _Stream, batch_id: int, record_id: str) -> None:
        self._stream, self._batch_id, self._record_id = stream, batch_id, record_id

    async def complete(self, messages: Sequence[Any], *, template_hash: str = "") -> Completion:
        answer = await asyncio.wrap_future(self._stream.ask(self._batch_id, self._record_id, messages, template_hash))
        if answer.error:
            raise InfraError(f"judge: {answer.error}")
        return Completion(text=answer.text, input_tokens=answer.input_tokens, output_tokens=answer.output_tokens,
                          model=answer.model, cached=answer.cached)


class _Stream:
    """One Evaluate stream: batches evaluated on a small pool, judge answers routed to the calls awaiting them."""

    def __init__(self, evaluators: dict[str, Evaluator]) -> None:
        self._evaluators = evaluators
        self.out: queue.Queue[plugin_pb2.EvaluateResponse | None] = queue.Queue()
        self._pending: dict[int, futures.Future[plugin_pb2.JudgeAnswer]] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def ask(self, batch_id: int, record_id: str, messages: Sequence[Any], template_hash: str
            ) -> futures.Future[plugin_pb2.JudgeAnswer]:
        future: futures.Future[plugin_pb2.JudgeAnswer] = futures.Future()
        with self._lock:
            request_id = next(self._ids)
            self._pending[request_id] = future
        request = plugin_pb2.JudgeRequest(request_id=request_id, batch_id=batch_id, record_id=record_id,
                                          template_hash=template_hash)
        for message in messages:
            request.messages.add(role=str(message["role"]), content=str(message["content"]))
        self.out.put(plugin_pb2.EvaluateResponse(judge_request=request))
        return future

    def _answer(self, answer: plugin_pb2.JudgeAnswer) -> None:
        with self._lock:
            future = self._pending.pop(answer.request_id, None)
        if future is not None:
            future.set_result(answer)

    def _batch(self, batch: plugin_pb2.Batch) -> None:
        def context(record_id: str) -> EvalContext:
            judge: Any = _StreamJudge(self, batch.batch_id, record_id)
            return EvalContext(judge=judge, judges={"default": judge})

        try:
            answer = evaluate_batch(self._evaluators, batch, context)
        except Exception as exc:  # an evaluator this plugin lacks, params it refuses: each record's error
            answer = plugin_pb2.BatchResults(batch_id=batch.batch_id)
            for record in batch.records:
                answer.results.add(record_id=record.id, outcome=OUTCOME_ERROR, error_kind=ERROR_KIND_EVALUATOR,
                                   reason=f"plugin: {exc}")
        self.out.put(plugin_pb2.EvaluateResponse(results=answer))

    def read(self, requests: Iterable[plugin_pb2.EvaluateRequest]) -> None:
        """Take the host's messages until it closes its side, then end the stream once every batch is answered."""
        with futures.ThreadPoolExecutor(_STREAM_CONCURRENCY, thread_name_prefix="evalsi-plugin-batch") as pool:
            running: list[futures.Future[None]] = []
            try:
                for request in requests:
                    if request.HasField("batch"):
                        running.append(pool.submit(self._batch, request.batch))
                    elif request.HasField("judge_answer"):
                        self._answer(request.judge_answer)
                for done in running:
                    done.result()
            except grpc.RpcError:  # the host's side went away (cancelled, deadline): nothing left to answer
                pass
            finally:
                self.out.put(None)


class PluginServicer(plugin_pb2_grpc.EvaluatorPluginServiceServicer):
    def __init__(self, evaluators: Sequence[Evaluator]) -> None:
        self._evaluators = {ev.ref: ev for ev in evaluators}
        self._datasets = MappedDatasets()

    def Describe(self, request: plugin_pb2.DescribeRequest, context: grpc.ServicerContext
                 ) -> plugin_pb2.DescribeResponse:
        manifests = [ev.manifest() for ev in self._evaluators.values()]
        return plugin_pb2.DescribeResponse(evaluators=manifests, protocol=PROTOCOL, sdk=SDK)

    def Evaluate(self, request_iterator: Iterator[plugin_pb2.EvaluateRequest], context: grpc.ServicerContext
                 ) -> Iterator[plugin_pb2.EvaluateResponse]:
        stream = _Stream(self._evaluators)
        reader = threading.Thread(target=stream.read, args=(request_iterator,), daemon=True,
                                  name="evalsi-plugin-stream")
        reader.start()
        while (response := stream.out.get()) is not None:
            yield response
        reader.join()

    def Reduce(self, request: plugin_pb2.ReduceRequest, context: grpc.ServicerContext) -> plugin_pb2.ReduceResponse:
        try:
            return reduce(self._evaluators, request, self._datasets)
        except BadInputError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            raise  # abort raises; this line is for the type checker

    def CheckParams(self, request: plugin_pb2.CheckParamsRequest, context: grpc.ServicerContext
                    ) -> plugin_pb2.CheckParamsResponse:
        try:
            bind(self._evaluators, request.evaluator, request.params)
        except BadInputError as exc:
            return plugin_pb2.CheckParamsResponse(error=str(exc))
        return plugin_pb2.CheckParamsResponse()


def evaluators_of(target: Pack | Evaluator | Iterable[Evaluator]) -> list[Evaluator]:
    """What a plugin's entry point names: a Pack, one Evaluator, or a sequence of them."""
    if isinstance(target, Pack):
        return list(target.evaluators)
    if isinstance(target, Evaluator):
        return [target]
    evaluators = list(target)
    bad = [type(ev).__name__ for ev in evaluators if not isinstance(ev, Evaluator)]
    if bad or not evaluators:
        raise BadInputError("a plugin serves a Pack, an Evaluator or a non-empty list of Evaluators; got "
                            + (", ".join(bad) if bad else "an empty list"))
    return evaluators


def _check_private_dir(socket_path: Path) -> None:
    directory = socket_path.parent
    mode = stat.S_IMODE(directory.stat().st_mode)
    if mode & 0o077:
        raise BadInputError(f"the plugin socket's directory {directory} must be private (0700), is {mode:04o}")


def start_server(target: Pack | Evaluator | Iterable[Evaluator], socket_path: str | Path, *,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> grpc.Server:
    """Bind and start the plugin's server; the caller stops it. ``serve`` is this plus waiting for SIGTERM."""
    path = Path(socket_path)
    _check_private_dir(path)
    options = [("grpc.max_receive_message_length", max_message_bytes),
               ("grpc.max_send_message_length", max_message_bytes)]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="evalsi-plugin"),
                         options=options)
    plugin_pb2_grpc.add_EvaluatorPluginServiceServicer_to_server(PluginServicer(evaluators_of(target)), server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    previous = os.umask(0o177)  # the socket is created 0600: no window in which another user could connect
    try:
        server.add_insecure_port(f"unix:{path}")
        server.start()
    finally:
        os.umask(previous)
    for name in ("", SERVICE):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return server


def serve(target: Pack | Evaluator | Iterable[Evaluator], socket_path: str | Path, *,
          max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
    """Serve until SIGTERM or SIGINT, then finish the calls in flight (up to 5 s) and return."""
    server = start_server(target, socket_path, max_message_bytes=max_message_bytes)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    stop.wait()
    server.stop(grace=5).wait()
