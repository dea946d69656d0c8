"""The host side of a subprocess plugin: batches, deadlines, judge answers, and a supervised process.

Calls from any event loop or thread are queued per (evaluator, params, judge) and sent as batches of at most
``limits.max_batch`` records, one batch in flight at a time, each on its own Evaluate stream under the per-call
deadline. A plugin that dies mid-batch is restarted and the batch retried once on the fresh process (the dead
attempt's answers, if any, are dropped whole, so nothing counts twice); a second death, a deadline or a malformed
answer is an infrastructure error for those records, naming the plugin and carrying its stderr's tail.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import queue
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf import struct_pb2

from evalsi.errors import InfraError
from evalsi.plugin.v1alpha1 import plugin_pb2
from evalsi.plugins.manifest import PluginManifest
from evalsi.plugins.process import PluginProcess
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import OUTCOME_ERROR, OUTCOME_SCORED, OUTCOME_SKIPPED, EvaluationResult

if TYPE_CHECKING:
    from evalsi.judges import JudgeClient

_OUTCOMES = (OUTCOME_SCORED, OUTCOME_SKIPPED, OUTCOME_ERROR)
# Judge requests one batch may make per record: a plugin looping on its judge is stopped, not billed forever.
MAX_JUDGE_CALLS_PER_RECORD = 32
_CHECKS_KEPT = 1024  # answers of CheckParams kept, by evaluator and params: binding the same again asks nothing


class _Crashed(Exception):
    """The process died (or its socket went away) during a call: worth one retry on a fresh process."""


class _Malformed(Exception):
    """The plugin answered something this protocol does not allow."""


@dataclass
class _Pending:
    record: Record
    judge: JudgeClient | None
    loop: asyncio.AbstractEventLoop | None
    future: futures.Future[EvaluationResult]


def _struct(params: Mapping[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(dict(params))
    return struct


def _check_results(batch: plugin_pb2.Batch, answer: plugin_pb2.BatchResults) -> list[EvaluationResult]:
    if answer.batch_id != batch.batch_id:
        raise _Malformed(f"results for batch {answer.batch_id}, expected batch {batch.batch_id}")
    if len(answer.results) != len(batch.records):
        raise _Malformed(f"{len(answer.results)} results for a batch of {len(batch.records)} records")
    for index, (record, result) in enumerate(zip(batch.records, answer.results, strict=True)):
        if result.record_id != record.id:
            raise _Malformed(f"result {index} is for record {result.record_id!r}, expected {record.id!r}")
        if result.outcome not in _OUTCOMES:
            raise _Malformed(f"result {index} (record {record.id!r}) has outcome {result.outcome}, expected "
                             "SCORED, SKIPPED or ERROR")
    return list(answer.results)


def _settle(future: futures.Future[EvaluationResult], *, result: EvaluationResult | None = None,
            exception: BaseException | None = None) -> None:
    """Answer a call unless its caller cancelled it meanwhile (then the answer has nowhere to go)."""
    if not future.set_running_or_notify_cancel():
        return
    if exception is not None:
        future.set_exception(exception)
    else:
        future.set_result(result)  # type: ignore[arg-type]


class PluginHost:
    """One plugin's process and the calls to it; ``start`` makes a fresh process (at first, and after a death)."""

    def __init__(self, manifest: PluginManifest, start: Callable[[], PluginProcess]) -> None:
        self.manifest = manifest
        self._start = start
        self._process = start()
        self.restarts = 0
        self._process_lock = threading.Lock()
        self._waiting: dict[tuple[str, str, int], list[_Pending]] = {}
        self._cond = threading.Condition()
        self._closed = False
        self._batch_ids = itertools.count(1)
        self._checked: dict[tuple[str, str], str] = {}
        self._thread = threading.Thread(target=self._dispatch, daemon=True, name=f"evalsi-plugin-{manifest.name}")
        self._thread.start()

    @property
    def described(self) -> plugin_pb2.DescribeResponse:
        return self._process.describe

    @property
    def pid(self) -> int:
        return self._process.pid

    async def evaluate(self, ref: str, params: Mapping[str, Any], record: Record,
                       judge: JudgeClient | None) -> EvaluationResult:
        """The plugin's result for one record (batched with other calls waiting for the same evaluator)."""
        future: futures.Future[EvaluationResult] = futures.Future()
        key = (ref, json.dumps(params, sort_keys=True, default=str), id(judge))
        with self._cond:
            if self._closed:
                raise self._closed_error()
            self._waiting.setdefault(key, []).append(
                _Pending(record, judge, asyncio.get_running_loop() if judge is not None else None, future))
            self._cond.notify()
        return await asyncio.wrap_future(future)

    def reduce(self, ref: str, params: Mapping[str, Any], records: Sequence[Record], *, dataset: str = "",
               indices: Sequence[int] = ()) -> plugin_pb2.ReduceResponse:
        """A dataset-scope evaluator's scores over ``records`` (or the plugin's kept ``dataset``), at ``indices``
        when given; retried once on a fresh process if it died."""
        if self._closed:
            raise self._closed_error()
        request = plugin_pb2.ReduceRequest(evaluator=ref, params=_struct(params), records=records, dataset=dataset,
                                           indices=indices)

        def call(process: PluginProcess) -> plugin_pb2.ReduceResponse:
            try:
                return process.stub.Reduce(request, timeout=self.manifest.timeout_s)
            except grpc.RpcError as exc:
                raise self._rpc_failure(process, exc, "Reduce") from None

        return self._with_retry(call, f"Reduce of {len(records) or len(indices)} records")

    def check_params(self, ref: str, params: Mapping[str, Any]) -> str:
        """Why the plugin's evaluator refuses ``params`` ("" when it accepts them), asked as the plugin binds them.
        "" without asking where the plugin does not run in this process (only described: the worker that runs it
        asks) or does not implement the check (its records then say what is wrong, one by one). A short call on a
        Unix socket, made once per binding."""
        if self._closed:
            return ""
        # A check depends on the evaluator and the params only: a policy re-read, a run's tasks or an SDK loop that
        # binds the same params again (synchronously, maybe on an event loop) does not wait on the plugin again.
        key = (ref, json.dumps(params, sort_keys=True, default=str))
        known = self._checked.get(key)
        if known is not None:
            return known
        request = plugin_pb2.CheckParamsRequest(evaluator=ref, params=_struct(params))

        def call(process: PluginProcess) -> plugin_pb2.CheckParamsResponse:
            try:
                return process.stub.CheckParams(request, timeout=self.manifest.timeout_s)
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                    return plugin_pb2.CheckParamsResponse()
                raise self._rpc_failure(process, exc, "CheckParams") from None

        answer: plugin_pb2.CheckParamsResponse = self._with_retry(call, f"CheckParams of {ref}")
        if len(self._checked) >= _CHECKS_KEPT:
            self._checked.clear()
        self._checked[key] = answer.error
        return answer.error

    def _closed_error(self) -> InfraError:
        return InfraError(f"plugin {self.manifest.name} is not running in this process (closed, or only described "
                          "here: workers run plugins)")

    def close(self) -> None:
        with self._cond:
            self._closed = True
            waiting = [p for pending in self._waiting.values() for p in pending]
            self._waiting.clear()
            self._cond.notify_all()
        for pending in waiting:
            _settle(pending.future, exception=self._closed_error())
        self._thread.join(self.manifest.timeout_s + 5)
        with self._process_lock:
            self._process.stop()

    # -- the dispatcher thread ------------------------------------------------------------------------------------

    def _dispatch(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                key = next(iter(self._waiting))
                pending = self._waiting[key]
                taken, rest = pending[: self.manifest.max_batch], pending[self.manifest.max_batch:]
                if rest:
                    self._waiting[key] = rest
                    self._waiting[key] = self._waiting.pop(key)  # to the back: other evaluators take their turn
                else:
                    del self._waiting[key]
            # A call whose caller gave up (its deadline, a cancelled run) is not sent.
            taken = [p for p in taken if not p.future.cancelled()]
            if taken:
                self._send(key[0], json.loads(key[1]), taken)

    def _send(self, ref: str, params: dict[str, Any], taken: list[_Pending]) -> None:
        batch = plugin_pb2.Batch(batch_id=next(self._batch_ids), evaluator=ref, params=_struct(params),
                                 records=[p.record for p in taken])
        try:
            results = self._with_retry(lambda process: self._evaluate(process, batch, taken),
                                       f"a batch of {len(taken)} records")
        except Exception as exc:
            for pending in taken:
                _settle(pending.future, exception=exc)
            return
        for pending, result in zip(taken, results, strict=True):
            _settle(pending.future, result=result)

    def _with_retry(self, call: Callable[[PluginProcess], Any], what: str) -> Any:
        for attempt in (1, 2):
            process = self._current()
            try:
                return call(process)
            except _Crashed as exc:
                self._replace(process)
                if attempt == 2:
                    raise InfraError(f"plugin {self.manifest.name} died on {what} twice (retried once on a fresh "
                                     f"process): {exc}") from None
            except _Malformed as exc:
                raise process.failure(f"answered a malformed message for {what}: {exc}") from None
        raise AssertionError("unreachable")

    def _current(self) -> PluginProcess:
        with self._process_lock:
            return self._process

    def _replace(self, dead: PluginProcess) -> None:
        """A fresh process for the one that failed (unless another call replaced it already)."""
        with self._process_lock:
            if self._process is not dead:
                return
            dead.stop()
            self._process = self._start()
            self.restarts += 1

    def _rpc_failure(self, process: PluginProcess, exc: grpc.RpcError, what: str) -> Exception:
        code = exc.code()
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            # A hung plugin holds its batch's threads: it is replaced, and the batch is not retried (a second
            # deadline would double the wait for an answer that is not coming).
            failure = process.failure(f"{what} did not answer within {self.manifest.timeout_s:g}s (limits.timeout)")
            self._replace(process)
            return failure
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            return process.failure(f"{what}: a message over {self.manifest.max_message_bytes >> 20} MiB "
                                   f"(limits.max_message_mb): {exc.details()}")
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED) or not process.alive():
            return _Crashed(process.failure(f"{what}: {code.name} {exc.details()}"))
        if code == grpc.StatusCode.INTERNAL and "deserializ" in (exc.details() or ""):
            return _Malformed(exc.details())
        return process.failure(f"{what}: {code.name} {exc.details()}")

    def _evaluate(self, process: PluginProcess, batch: plugin_pb2.Batch, taken: list[_Pending]
                  ) -> list[EvaluationResult]:
        requests: queue.Queue[plugin_pb2.EvaluateRequest | None] = queue.Queue()
        requests.put(plugin_pb2.EvaluateRequest(batch=batch))

        def outgoing() -> Iterator[plugin_pb2.EvaluateRequest]:
            while (request := requests.get()) is not None:
                yield request

        judge_calls = 0
        call = process.stub.Evaluate(outgoing(), timeout=self.manifest.timeout_s)
        try:
            for response in call:
                if response.HasField("judge_request"):
                    judge_calls += 1
                    if judge_calls > MAX_JUDGE_CALLS_PER_RECORD * len(taken):
                        raise _Malformed(f"over {MAX_JUDGE_CALLS_PER_RECORD} judge calls a record")
                    requests.put(plugin_pb2.EvaluateRequest(judge_answer=self._judge(taken[0], response.judge_request)))
                elif response.HasField("results"):
                    return _check_results(batch, response.results)
                else:
                    raise _Malformed("an EvaluateResponse with neither results nor a judge request")
            if not process.alive():
                raise _Crashed(process.failure("the Evaluate stream ended without results"))
            raise _Malformed("the Evaluate stream ended without the batch's results")
        except grpc.RpcError as exc:
            raise self._rpc_failure(process, exc, "Evaluate") from None
        finally:
            requests.put(None)
            call.cancel()

    def _judge(self, pending: _Pending, request: plugin_pb2.JudgeRequest) -> plugin_pb2.JudgeAnswer:
        """Answer a plugin's judge call with the run's judge, on the event loop the record's caller runs on."""
        answer = plugin_pb2.JudgeAnswer(request_id=request.request_id)
        if pending.judge is None or pending.loop is None:
            answer.error = "no judge is configured for this evaluator"
            return answer
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        coroutine = pending.judge.complete(messages, template_hash=request.template_hash)
        try:
            completion = asyncio.run_coroutine_threadsafe(coroutine, pending.loop).result(self.manifest.timeout_s)
        except Exception as exc:
            answer.error = f"{type(exc).__name__}: {exc}"
            return answer
        answer.text, answer.model, answer.cached = completion.text, completion.model, completion.cached
        answer.input_tokens, answer.output_tokens = completion.input_tokens, completion.output_tokens
        return answer
