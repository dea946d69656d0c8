"""Evaluate overhead through the API: one record, exact-match, sequential calls.

    python benchmarks/evaluate_latency.py [--calls 500] [--warmup 50] [--client raw|evalsi]

Starts a stack (bundled NATS, evalsi-api, evalsi-scheduler, one cpu evalsi-worker; SQLite and a local
object directory) and times N sequential Evaluate calls of one record with exact-match, over gRPC and
then over HTTP/JSON, after a warm-up. exact-match is declared cheap, so the api answers it itself
(evalsi.api.local_evaluation); one more gRPC line times an evaluator that is not (builtin/contains), which goes
client -> api -> NATS request/reply -> worker -> back.

Clients: ``raw`` (default) is the least client overhead: a gRPC multicallable built once on one channel,
and one keep-alive ``http.client`` connection posting a JSON body serialized once. ``evalsi`` uses
``evalsi.Client`` (which builds the gRPC multicallable per call, and over HTTP serializes JSON per call
and opens a new connection per call), to show what the SDK adds.

For reference it also times ListEvaluators over gRPC (the api alone, no bus, no worker).

Beside each line it prints the CPU each process spent per call (user + system, from /proc, all threads), which
stays comparable when a busy machine makes the wall-clock figures noisy, and the load average.

``--compare TREE`` is a paired A/B for a busy machine: a second stack runs the services from another checkout of
this repository (``git worktree add /tmp/before <rev>``; its sources first on the children's ``PYTHONPATH``), and
blocks of ``--block`` calls alternate between the two stacks (over ``--transport``), so both see the same load;
it prints the median over blocks of each stack's p50, p95 and CPU per call.

Targets (DESIGN.md, raised by issue 10 from p50 <= 5 ms, p95 <= 15 ms; this 2-core machine): p50 <= 2 ms,
p95 <= 5 ms. ``--evaluator contains`` makes every line (and ``--compare``) use the worker's path.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from _stack import BenchStack
from google.protobuf import json_format

from evalsi.records import make_record
from evalsi.service.config import WorkerConfig
from evalsi.v1alpha1.catalog_service_pb2 import ListEvaluatorsRequest, ListEvaluatorsResponse
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest, EvaluateResponse
from evalsi.v1alpha1.evaluator_pb2 import EvaluatorRef

TARGET_P50_MS = 2.0
TARGET_P95_MS = 5.0
EVALUATE = "/evalsi.v1alpha1.EvaluationService/Evaluate"
LIST_EVALUATORS = "/evalsi.v1alpha1.CatalogService/ListEvaluators"


# The evaluators timed: exact-match is answered by the api (declared cheap), contains by a worker (not declared so).
EVALUATORS = {
    "exact-match": EvaluatorRef(ref="exact-match"),
    "contains": json_format.ParseDict({"ref": "contains", "params": {"values": ["Paris"]}}, EvaluatorRef()),
}


def _request(evaluator: str = "exact-match") -> EvaluateRequest:
    request = EvaluateRequest(evaluators=[EVALUATORS[evaluator]])
    request.records.append(
        make_record(id="r1", input="What is the capital of France?", output="Paris", reference="Paris")
    )
    return request


def _check(response: EvaluateResponse) -> None:
    result = response.results[0]
    if len(response.results) != 1 or not result.scores or not result.scores[0].passed:
        raise RuntimeError(f"unexpected Evaluate answer: {response}")


def _raw_grpc(
    target: str, evaluator: str = "exact-match"
) -> tuple[Callable[[], EvaluateResponse], Callable[[], object], Callable[[], None]]:
    import grpc

    channel = grpc.insecure_channel(target)
    evaluate = channel.unary_unary(
        EVALUATE,
        request_serializer=EvaluateRequest.SerializeToString,
        response_deserializer=EvaluateResponse.FromString,
    )
    listing = channel.unary_unary(
        LIST_EVALUATORS,
        request_serializer=ListEvaluatorsRequest.SerializeToString,
        response_deserializer=ListEvaluatorsResponse.FromString,
    )
    request, empty = _request(evaluator), ListEvaluatorsRequest()
    return (lambda: evaluate(request, timeout=30)), (lambda: listing(empty, timeout=30)), channel.close


def _raw_http(port: int, evaluator: str = "exact-match") -> tuple[Callable[[], EvaluateResponse], Callable[[], None]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = json_format.MessageToJson(_request(evaluator)).encode()
    headers = {"content-type": "application/json"}

    def call() -> EvaluateResponse:
        connection.request("POST", "/v1alpha1/evaluate", body=body, headers=headers)
        response = connection.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {data[:300]!r}")
        return json_format.Parse(data, EvaluateResponse(), ignore_unknown_fields=True)

    return call, connection.close


def _sdk(url: str, evaluator: str = "exact-match") -> tuple[Callable[[], EvaluateResponse], Callable[[], None]]:
    import evalsi

    client = evalsi.Client(url, timeout=30)
    request = _request(evaluator)
    return (lambda: client.evaluate(request)), client.close


def _warm(call: Callable[[], EvaluateResponse], n: int, deadline_s: float = 60.0) -> None:
    """``n`` successful calls; the first ones may fail while the worker is still subscribing."""
    deadline = time.monotonic() + deadline_s
    done = 0
    while done < n:
        try:
            _check(call())
            done += 1
        except Exception:
            if done or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _time(call: Callable[[], object], n: int, check: bool = True) -> np.ndarray:
    samples = np.empty(n)
    for i in range(n):
        started = time.perf_counter()
        response = call()
        samples[i] = time.perf_counter() - started
        if check:
            _check(response)  # type: ignore[arg-type]
    return samples * 1000.0


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process, all its threads (fields 14 and 15 of /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU per call of every process on the path: the client (this process), nats-server, the api and the worker."""

    def __init__(self, stack: BenchStack) -> None:
        nats_pid = stack.supervisor.nats.pid if stack.supervisor.nats is not None else None
        self._pids = {"api": stack.pid("api"), "worker": stack.pid("worker-cpu-0")}
        if nats_pid is not None:
            self._pids["nats"] = nats_pid

    def _sample(self) -> dict[str, float]:
        return {"client": time.process_time(), **{name: _cpu_seconds(pid) for name, pid in self._pids.items()}}

    def measure(self, call: Callable[[], object], n: int, check: bool = True) -> tuple[np.ndarray, dict[str, float]]:
        """Latencies in ms of ``n`` calls, and each process's CPU ms per call over them."""
        before = self._sample()
        ms = _time(call, n, check)
        after = self._sample()
        return ms, {name: (after[name] - before[name]) * 1000.0 / n for name in before}


def _cpu_line(cpu: dict[str, float]) -> str:
    return "    CPU ms/call: " + ", ".join(f"{name} {value:.2f}" for name, value in cpu.items())


def _line(label: str, ms: np.ndarray, targets: bool = True) -> str:
    p50, p95, p99 = np.percentile(ms, [50, 95, 99])
    text = f"{label:<44} n {len(ms):>4}  p50 {p50:6.2f} ms  p95 {p95:6.2f} ms  p99 {p99:6.2f} ms"
    text += f"  max {ms.max():6.1f} ms"
    if targets:
        ok = p50 <= TARGET_P50_MS and p95 <= TARGET_P95_MS
        text += f"   (targets p50 <= {TARGET_P50_MS:g}, p95 <= {TARGET_P95_MS:g}: {'meets' if ok else 'MISSES'})"
    return text


_SOURCE_DIRS = ("libs/common", *(f"services/{name}" for name in ("api", "worker", "scheduler", "ingest", "policy",
                                                                    "harness")))


@contextlib.contextmanager
def _stack_of(tree: Path | None) -> Iterator[BenchStack]:
    """A stack whose services run this checkout's code, or ``tree``'s (its sources first on their PYTHONPATH)."""
    saved = os.environ.get("PYTHONPATH")
    if tree is not None:
        os.environ["PYTHONPATH"] = os.pathsep.join(str(tree / d) for d in _SOURCE_DIRS)
    try:
        stack = BenchStack(workers=(WorkerConfig("cpu", 1, 16),)).__enter__()
    finally:  # the children have their environment: this process's goes back as it was
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    try:
        yield stack
    finally:
        stack.__exit__(None, None, None)


def compare(tree: Path, transport: str, blocks: int, block: int, warmup: int, evaluator: str) -> None:
    """Blocks of calls alternating between a stack of ``tree`` and one of this checkout (order swapped every block)."""
    with _stack_of(tree) as other, _stack_of(None) as this:
        print(f"paired: {tree} vs this checkout, {blocks} blocks of {block} {transport} calls each ({evaluator}), "
              "alternating")
        stacks = {str(tree): other, "this checkout": this}
        calls, closers, meters = {}, [], {}
        for name, stack in stacks.items():
            if transport == "grpc":
                call, _, close = _raw_grpc(stack.grpc_target, evaluator)
            else:
                call, close = _raw_http(stack.config.api.http_port, evaluator)
            _warm(call, warmup)
            calls[name], meters[name] = call, CpuMeter(stack)
            closers.append(close)
        rows: dict[str, list[tuple[float, float, dict[str, float]]]] = {name: [] for name in stacks}
        try:
            for index in range(blocks):
                for name in list(stacks)[:: 1 if index % 2 == 0 else -1]:
                    ms, cpu = meters[name].measure(calls[name], block)
                    p50, p95 = np.percentile(ms, [50, 95])
                    rows[name].append((float(p50), float(p95), cpu))
        finally:
            for close in closers:
                close()
        for name, row in rows.items():
            cpu_text = ", ".join(f"{k} {statistics.median(r[2][k] for r in row):.2f}" for k in row[0][2])
            print(f"{name}: median p50 {statistics.median(r[0] for r in row):.2f} ms, "
                  f"p95 {statistics.median(r[1] for r in row):.2f} ms; CPU ms/call {cpu_text}")
        print("load average (1, 5, 15 min): " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--client", choices=("raw", "evalsi"), default="raw")
    parser.add_argument("--compare", type=Path, metavar="TREE", help="paired A/B against another checkout")
    parser.add_argument("--transport", choices=("grpc", "http"), default="grpc", help="with --compare")
    parser.add_argument("--blocks", type=int, default=12, help="with --compare: blocks per stack")
    parser.add_argument("--block", type=int, default=150, help="with --compare: calls per block")
    parser.add_argument("--evaluator", choices=sorted(EVALUATORS), default="exact-match",
                        help="exact-match: answered by the api; contains: by a worker")
    args = parser.parse_args()
    if args.compare is not None:
        if not (args.compare / "libs/common/evalsi").is_dir():
            parser.error(f"--compare: {args.compare} is not a checkout of this repository (no libs/common/evalsi)")
        compare(args.compare.resolve(), args.transport, args.blocks, args.block, args.warmup, args.evaluator)
        return

    with BenchStack(workers=(WorkerConfig("cpu", 1, 16),)) as stack:
        print(f"stack: api, scheduler, 1 cpu worker, bundled NATS; SQLite, local objects; client {args.client}")
        if args.client == "raw":
            grpc_call, list_call, close_grpc = _raw_grpc(stack.grpc_target, args.evaluator)
            http_call, close_http = _raw_http(stack.config.api.http_port, args.evaluator)
        else:
            grpc_call, close_grpc = _sdk(stack.grpc, args.evaluator)
            http_call, close_http = _sdk(stack.http, args.evaluator)
            _, list_call, close_list = _raw_grpc(stack.grpc_target)
        pooled_call, _, close_pooled = _raw_grpc(stack.grpc_target, "contains")
        meter = CpuMeter(stack)
        try:
            _warm(grpc_call, args.warmup)
            grpc_ms, grpc_cpu = meter.measure(grpc_call, args.calls)
            _warm(http_call, args.warmup)
            http_ms, http_cpu = meter.measure(http_call, args.calls)
            _warm(pooled_call, args.warmup)
            pooled_ms, pooled_cpu = meter.measure(pooled_call, args.calls)
            for _ in range(args.warmup):
                list_call()
            list_ms, list_cpu = meter.measure(list_call, args.calls, check=False)
        finally:
            close_grpc()
            close_http()
            close_pooled()
            if args.client != "raw":
                close_list()
        print(_line(f"Evaluate, 1 record, gRPC ({args.evaluator})", grpc_ms))
        print(_cpu_line(grpc_cpu))
        print(_line(f"Evaluate, 1 record, HTTP/JSON ({args.evaluator})", http_ms))
        print(_cpu_line(http_cpu))
        print(_line("Evaluate, 1 record, gRPC (contains)", pooled_ms) + "   (through a worker)")
        print(_cpu_line(pooled_cpu))
        print(_line("reference: ListEvaluators, gRPC", list_ms, targets=False) + "   (api only, no bus)")
        print(_cpu_line(list_cpu))
        print("load average (1, 5, 15 min): " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
