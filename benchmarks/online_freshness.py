"""Online freshness: from a trace's completion to its stored score, for non-judge evaluators, at a steady rate.

    python benchmarks/online_freshness.py [--rate 20] [--seconds 30] [--grace 1.0]

Starts a stack (bundled NATS, evalsi-api, evalsi-ingest publishing completed traces, evalsi-policy, one cpu
evalsi-worker; SQLite trace store), applies a policy of three cheap evaluators on every trace (contains, a
cascade stage on length, json-valid), then posts one 3-span GenAI trace per request over OTLP/HTTP at
``--rate`` traces per second. A trace completes ``--grace`` seconds after its root span arrives; ingest stamps
the completion in the trace store (``completed_at``) and the policy service stamps each stored score
(``scored_at``), both on this machine's clock. Freshness is ``scored_at - completed_at`` of each trace's last
stored score. Also shown: the whole delay from sending the trace (grace included).

Target (DESIGN.md): p95 <= 5 s at 20 traces/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import time
from pathlib import Path

import aiohttp
import numpy as np
from _stack import BenchStack
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

import evalsi
from evalsi.service.config import WorkerConfig

TARGET_P95_S = 5.0
POLICY = {
    "apiVersion": "evals.si/v1alpha1", "kind": "OnlineEvalPolicy",
    "metadata": {"name": "freshness", "project": "bench"},
    "spec": {
        "sampling": {"rate": 1.0},
        "cascade": [
            {"ref": "builtin/contains", "alias": "polite", "params": {"values": ["thanks"]}},
            {"ref": "builtin/length", "when": "score('polite') < 0.5", "params": {"unit": "words", "max": 40}},
            {"ref": "builtin/json-valid"},
        ],
        "window": "1m",
    },
}


def _kv(key: str, value: str | int) -> KeyValue:
    any_value = AnyValue(int_value=value) if isinstance(value, int) else AnyValue(string_value=value)
    return KeyValue(key=key, value=any_value)


def _trace_body(index: int) -> tuple[bytes, str]:
    trace_id = os.urandom(16)
    now = time.time_ns()
    answer = "thanks, done" if index % 2 else "no refund is possible for this order"
    root = Span(trace_id=trace_id, span_id=os.urandom(8), name="invoke_agent", start_time_unix_nano=now - 2_000_000,
                end_time_unix_nano=now, attributes=[_kv("gen_ai.operation.name", "invoke_agent")])
    chat = Span(trace_id=trace_id, span_id=os.urandom(8), parent_span_id=root.span_id, name="chat",
                start_time_unix_nano=now - 1_500_000, end_time_unix_nano=now - 500_000, attributes=[
                    _kv("gen_ai.operation.name", "chat"), _kv("gen_ai.request.model", "m"),
                    _kv("gen_ai.usage.input_tokens", 12), _kv("gen_ai.usage.output_tokens", 5),
                    _kv("gen_ai.output.messages", json.dumps(
                        [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]))])
    tool = Span(trace_id=trace_id, span_id=os.urandom(8), parent_span_id=root.span_id, name="execute_tool",
                start_time_unix_nano=now - 400_000, end_time_unix_nano=now - 100_000,
                attributes=[_kv("gen_ai.operation.name", "execute_tool"), _kv("gen_ai.tool.name", "lookup")])
    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=Resource(attributes=[_kv("service.name", "bench-agent"), _kv("evalsi.project", "bench")]),
        scope_spans=[ScopeSpans(spans=[chat, tool, root])])])
    return request.SerializeToString(), trace_id.hex()


async def _send(url: str, rate: float, seconds: float) -> dict[str, float]:
    sent: dict[str, float] = {}
    total = int(rate * seconds)
    start = time.monotonic()
    async with aiohttp.ClientSession() as session:
        for index in range(total):
            await asyncio.sleep(max(0.0, start + index / rate - time.monotonic()))
            body, trace_id = _trace_body(index)
            async with session.post(url, data=body, headers={"Content-Type": "application/x-protobuf"}) as response:
                if response.status != 200:
                    raise RuntimeError(f"ingest answered {response.status}: {await response.text()}")
            sent[trace_id] = time.time()
    achieved = total / (time.monotonic() - start)
    print(f"sent {total} traces at {achieved:.1f}/s (asked {rate:.1f}/s)")
    return sent


def _wait_in_force(log: Path, policy: str, timeout_s: float) -> None:
    """Until the policy service logs a set of policies in force that names ``policy`` (it reloads every second)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        lines = [line for line in text.splitlines() if "policies in force:" in line]
        if lines and policy in lines[-1]:
            return
        time.sleep(0.1)
    raise RuntimeError(f"the policy service did not put {policy} in force within {timeout_s:.0f} s (log: {log})")


def _freshness(db: str, expected: int, timeout_s: float) -> list[tuple[str, float, float]]:
    deadline = time.monotonic() + timeout_s
    while True:
        with sqlite3.connect(db, timeout=30) as conn:
            rows = conn.execute(
                "SELECT t.trace_id, t.completed_at, MAX(s.scored_at) FROM traces t JOIN online_scores s "
                "ON s.project_id = t.project_id AND s.trace_id = t.trace_id WHERE t.project_id = 'bench' "
                "AND t.completed_at IS NOT NULL GROUP BY t.trace_id").fetchall()
        if len(rows) >= expected or time.monotonic() > deadline:
            return rows
        time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=20.0, help="traces per second")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long to send")
    parser.add_argument("--grace", type=float, default=1.0, help="ingest's grace period after the root span")
    args = parser.parse_args()

    stack = BenchStack(workers=(WorkerConfig("cpu", 1, 16),), ingest_grace_s=args.grace)
    stack.start()
    try:
        with evalsi.Client(stack.http, project="bench") as client:
            client.policies.apply(POLICY)
        _wait_in_force(stack.supervisor.child("policy").log_path, "bench/freshness", timeout_s=30.0)
        otlp = f"http://127.0.0.1:{stack.config.ingest.http_port}/v1/traces"
        sent = asyncio.run(_send(otlp, args.rate, args.seconds))
        db = stack.supervisor.state_dir / "traces.db"
        rows = _freshness(str(db), len(sent), timeout_s=60.0)
    finally:
        stack.stop()

    if len(rows) < len(sent):
        print(f"only {len(rows)} of {len(sent)} traces were scored within 60 s")
    fresh = np.array([scored - completed for _, completed, scored in rows])
    whole = np.array([scored - sent[trace_id] for trace_id, _, scored in rows if trace_id in sent])
    p50, p95, worst = np.percentile(fresh, 50), np.percentile(fresh, 95), fresh.max()
    print(f"traces scored: {len(rows)} of {len(sent)} ({args.rate:.0f} traces/s for {args.seconds:.0f} s, "
          f"3 non-judge evaluators, grace {args.grace:.1f} s)")
    print(f"completion -> stored score: p50 {p50:.3f} s  p95 {p95:.3f} s  max {worst:.3f} s   "
          f"(target p95 <= {TARGET_P95_S:.0f} s: {'met' if p95 <= TARGET_P95_S else 'MISSED'})")
    print(f"sent -> stored score (grace included): p50 {np.percentile(whole, 50):.3f} s  "
          f"p95 {np.percentile(whole, 95):.3f} s")


if __name__ == "__main__":
    main()
