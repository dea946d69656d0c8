"""Watch ingest throughput: OTLP/HTTP protobuf batches → normalized, redacted, stored, until queryable.

    python benchmarks/ingest_throughput.py [--spans 200000] [--batch 2000] [--concurrency 4] [--store both]
        [--processes 2]

An OTLP/HTTP receiver (``OtlpHttpReceiver`` on a free loopback port) feeds the ingest handler: each
request is decoded, mapped to canonical steps (GenAI semantic conventions), redacted with one rule (``email``),
stored, and observed by the trace assembler. Clients post pre-serialized ``ExportTraceServiceRequest`` bodies
(``application/x-protobuf``) over loopback with ``--concurrency`` requests in flight. Traces have 5 spans (an agent
root, two chats with token usage and content holding an e-mail address, a tool call, a retrieval). The clock runs
from the first request until the last trace is queryable: its summary reports all its spans and its spans are
readable (what GetTrace returns). A second figure runs until ListTraces lists it, which in ClickHouse waits for the
store's next summary pass (at most 0.5 s apart).

Each store is measured three ways: the receiver in this process (one process, one core at most: mapping and
redaction are Python); the store alone (the same spans mapped beforehand, consumed again); and a replica of
``--processes`` processes, ``evalsi-ingest --processes N`` started as a child on its own database, the processes
sharing the port (DESIGN.md: "a process per core where one is not enough").

ClickHouse: a throwaway ``ClickHouseServer`` (Debian's 18.16 here); SQLite: a file in a temporary directory.
For the replica into ClickHouse it also prints the server's statements (``system.events``: inserts, selects, rows
merged): a statement costs the server a nearly fixed amount of CPU, so their count is a figure the machine's load
does not move. ``--ingest-log-level info`` has each ingest process's store log its own counts when it closes.
Target (issue 10): at least 30,000 spans/s into ClickHouse for a replica of 2 processes (the default).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from evalsi.ingest import (
    TRACES_PATH,
    AssemblingSink,
    ExportHandler,
    OtlpHttpReceiver,
    Redactor,
    TraceAssembler,
    map_resource_spans,
    start_http_receiver,
)
from evalsi.ingest.redaction import parse_rule
from evalsi.stores.traces import open_trace_store
from evalsi.testing.services import ClickHouseServer

TARGET_CLICKHOUSE = 30_000  # issue 10: a 2-process replica into ClickHouse
SPANS_PER_TRACE = 5
PROJECT = "bench"


def _kv(key: str, value: Any) -> KeyValue:
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=str(value)))


def _trace(n: int, base_ns: int) -> list[Span]:
    trace_id = n.to_bytes(16, "big")
    start = base_ns + n * 1_000_000

    def span(i: int, parent: int, name: str, attrs: dict[str, Any]) -> Span:
        return Span(trace_id=trace_id, span_id=(n * 8 + i).to_bytes(8, "big"),
                    parent_span_id=(n * 8 + parent).to_bytes(8, "big") if parent else b"", name=name,
                    start_time_unix_nano=start + i * 1000, end_time_unix_nano=start + 900_000 - i,
                    attributes=[_kv(k, v) for k, v in attrs.items()])

    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": 42,
            "gen_ai.usage.output_tokens": 7,
            "gen_ai.input.messages": f'[{{"role":"user","content":"mail user{n}@example.com about order {n}"}}]',
            "gen_ai.output.messages": '[{"role":"assistant","content":"Done, the mail is sent."}]'}
    return [
        span(1, 0, "invoke_agent support", {"gen_ai.operation.name": "invoke_agent", "session.id": f"s{n % 97}"}),
        span(2, 1, "chat gpt-4o-mini", chat),
        span(3, 1, "execute_tool send_mail", {"gen_ai.operation.name": "execute_tool",
                                              "gen_ai.tool.name": "send_mail",
                                              "gen_ai.tool.call.arguments": f'{{"to":"user{n}@example.com"}}'}),
        span(4, 1, "retrieve", {"gen_ai.operation.name": "retrieve", "retrieval.query": "refund policy"}),
        span(5, 1, "chat gpt-4o-mini", chat),
    ]


def build_bodies(spans: int, batch: int) -> tuple[list[bytes], int]:
    """Serialized requests with ``batch`` spans each (whole traces); returns the bodies and the last trace number."""
    traces = spans // SPANS_PER_TRACE
    per_request = max(1, batch // SPANS_PER_TRACE)
    resource = Resource(attributes=[_kv("service.name", "support-agent"), _kv("evalsi.project", PROJECT)])
    base = time.time_ns()
    bodies = []
    for first in range(1, traces + 1, per_request):
        group = [s for n in range(first, min(first + per_request, traces + 1)) for s in _trace(n, base)]
        request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(
            resource=resource, scope_spans=[ScopeSpans(spans=group)])])
        bodies.append(request.SerializeToString())
    return bodies, traces


def process_cpu() -> dict[int, tuple[str, float]]:
    """CPU seconds (user + system, all threads) of this process and each of its descendants, by pid, with a label:
    on a shared machine wall time says little, CPU time per span says what the code costs."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    found: dict[int, tuple[str, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state, ppid, ... utime (12th), stime
        parents[int(entry)] = int(fields[1])
        # This process first: its own command line names the store ("--store clickhouse").
        label = ("benchmark (clients, reads)" if int(entry) == os.getpid() else "ingest" if "evalsi_ingest" in command
                 else "clickhouse-server" if "clickhouse" in command else command.split(" ")[0])
        found[int(entry)] = (label, (int(fields[11]) + int(fields[12])) / tick)
    mine = {os.getpid()}
    while True:
        more = {pid for pid, parent in parents.items() if parent in mine} - mine
        if not more:
            return {pid: found[pid] for pid in mine}
        mine |= more


def cpu_used(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> list[tuple[str, int, float]]:
    """(label, pid, CPU seconds) of every process between two ``process_cpu`` readings, the busiest first."""
    used = [(label, pid, seconds - before.get(pid, (label, 0.0))[1]) for pid, (label, seconds) in after.items()]
    return sorted(used, key=lambda item: -item[2])


async def _send_until_queryable(endpoint: str, store: Any, bodies: list[bytes], last_trace: int,
                                concurrency: int) -> tuple[float, float, list[tuple[str, int, float]]]:
    """Post every body (``concurrency`` in flight); seconds from the first post until the last trace is readable
    (GetTrace: its summary and all its spans), and until it is listed (ListTraces, which waits for the store's
    summary pass in ClickHouse); and the CPU each process used until it was readable."""
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    last_id = last_trace.to_bytes(16, "big").hex()
    # A connection per request: SO_REUSEPORT spreads connections, so a replica of several processes shares the load
    # by request rather than by whichever of the few long-lived connections each process happened to get.
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session:
        async def client() -> None:
            while not queue.empty():
                body = queue.get_nowait()
                async with session.post(endpoint, data=body,
                                        headers={"Content-Type": "application/x-protobuf"}) as response:
                    if response.status != 200:
                        raise RuntimeError(f"ingest answered {response.status}: {await response.text()}")

        cpu_before = process_cpu()
        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(concurrency)))
        while True:  # until the last span is queryable
            summary = await store.get_summary(PROJECT, last_id)
            if summary is not None and summary.span_count == SPANS_PER_TRACE:
                record = await store.get_trace(PROJECT, last_id)
                if record is not None and len(record.trajectory.steps) == SPANS_PER_TRACE:
                    break
            await asyncio.sleep(0.001)
        elapsed = time.perf_counter() - started
        cpu = cpu_used(cpu_before, process_cpu())
        while True:  # the last trace has the latest start: listed first once its summary is written
            page = await store.list_traces(PROJECT, limit=1)
            if page.traces and page.traces[0].trace_id == last_id and page.traces[0].span_count == SPANS_PER_TRACE:
                break
            await asyncio.sleep(0.005)
        listed = time.perf_counter() - started
    record = await store.get_trace(PROJECT, last_id)
    assert record is not None and "example.com" not in str(record), "the email rule did not redact"
    return elapsed, listed, cpu


Measured = tuple[float, float, list[tuple[str, int, float]]]  # readable and listed seconds, CPU per process


async def measure(url: str, bodies: list[bytes], last_trace: int, concurrency: int) -> tuple[Measured, float]:
    """One process: the receiver in this process. Returns (readable, listed, CPU) and the store alone's seconds."""
    store = await open_trace_store(url)
    redactor = Redactor({"*": (parse_rule("email", "bench"),)})
    handler = ExportHandler(AssemblingSink(store, TraceAssembler()), redactor=redactor)
    runner, port = await start_http_receiver(OtlpHttpReceiver(handler), "127.0.0.1", 0)
    try:
        measured = await _send_until_queryable(f"http://127.0.0.1:{port}{TRACES_PATH}", store, bodies,
                                               last_trace, concurrency)
        # The store alone: the same spans, mapped beforehand, consumed again under a second project.
        mapped = []
        for body in bodies:
            request = ExportTraceServiceRequest.FromString(body)
            mapped.append([span for rs in request.resource_spans for span in map_resource_spans(rs).spans])
        store_started = time.perf_counter()
        for batch in mapped:
            await store.consume(PROJECT + "-store", batch)
        return measured, time.perf_counter() - store_started
    finally:
        await runner.cleanup()
        await store.close()


async def measure_processes(url: str, bodies: list[bytes], last_trace: int, concurrency: int,
                            processes: int, log_level: str = "warning") -> Measured:
    """A replica of ``processes`` processes: ``evalsi-ingest --processes N`` as a child, on its own store."""
    with tempfile.TemporaryDirectory() as tmp:
        rules = Path(tmp) / "redact.json"
        rules.write_text(json.dumps({"*": ["email"]}))
        child = subprocess.Popen(
            [sys.executable, "-m", "evalsi_ingest.main", "--processes", str(processes), "--http-port", "0",
             "--grpc-port", "0", "--traces-url", url, "--redact", str(rules), "--log-level", log_level],
            stdout=subprocess.PIPE, text=True)
        try:
            line = child.stdout.readline() if child.stdout else ""
            if not line:
                raise RuntimeError("evalsi-ingest did not start")
            endpoint = json.loads(line)["otlp_http"] + TRACES_PATH
            store = await open_trace_store(url)
            try:
                return await _send_until_queryable(endpoint, store, bodies, last_trace, concurrency)
            finally:
                await store.close()
        finally:
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                child.kill()
                raise


_SERVER_EVENTS = ("InsertQuery", "InsertedRows", "SelectQuery", "Merge", "MergedRows")


def server_events(url: str) -> dict[str, int]:
    """The ClickHouse server's cumulative statement counters (``system.events``): a statement's cost to the server
    is mostly fixed (an insert writes a part of some forty files), so how many there were says as much as the CPU."""
    from clickhouse_driver import Client

    from evalsi.stores.traces.clickhouse import parse_clickhouse_url

    host, port, _ = parse_clickhouse_url(url)
    client = Client(host, port=port)
    try:
        return {name: value for name, value in client.execute("SELECT event, value FROM system.events")
                if name in _SERVER_EVENTS}
    finally:
        client.disconnect()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=2_000, help="spans per OTLP request")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--store", choices=("both", "clickhouse", "sqlite"), default="both")
    parser.add_argument("--processes", type=int, default=2,
                        help="processes of the measured replica (evalsi-ingest --processes); 1: in-process only")
    parser.add_argument("--ingest-log-level", default="warning",
                        help="the replica's --log-level (info: each store logs the statements it sent at close)")
    parser.add_argument("--replica-only", action="store_true",
                        help="measure only the replica (not the receiver in this process, nor the store alone)")
    args = parser.parse_args()
    bodies, last_trace = build_bodies(args.spans, args.batch)
    total = last_trace * SPANS_PER_TRACE
    print(f"{total} spans in {len(bodies)} OTLP/HTTP protobuf requests of {args.batch} spans, "
          f"{args.concurrency} in flight; e-mail redaction on; {os.cpu_count()} cores")

    def report(name: str, what: str, elapsed: float, listed: float | None = None,
               cpu: list[tuple[str, int, float]] | None = None) -> None:
        rate = total / elapsed
        if name == "clickhouse" and not what.startswith("store"):
            target = f"target >= {TARGET_CLICKHOUSE:,} spans/s: {'met' if rate >= TARGET_CLICKHOUSE else 'MISSED'}"
        else:
            target = "no target" if name == "sqlite" else "the store's own ceiling"
        print(f"{name:10s} {what:58s} {total} spans in {elapsed:6.2f} s = {rate:8,.0f} spans/s  ({target})",
              flush=True)
        if listed is not None:
            print(f"{'':10s} {'  ... until listed (ListTraces)':58s} {total} spans in {listed:6.2f} s = "
                  f"{total / listed:8,.0f} spans/s", flush=True)
        for label, pid, seconds in cpu or ():
            if seconds >= 0.05:
                print(f"{'':10s}   CPU {label} (pid {pid}): {seconds:6.2f} s = {seconds / total * 1e6:5.1f} us a span")
        if cpu:
            ingest = sum(seconds for label, _, seconds in cpu if label == "ingest")
            every = sum(seconds for _, _, seconds in cpu)
            print(f"{'':10s}   CPU of the ingest processes {ingest / total * 1e6:5.1f} us a span, of every process "
                  f"{every / total * 1e6:5.1f} (at {TARGET_CLICKHOUSE:,} spans/s, {os.cpu_count()} cores give "
                  f"{(os.cpu_count() or 1) / TARGET_CLICKHOUSE * 1e6:.0f})")
            print(f"{'':10s}   load average {' / '.join(f'{load:.1f}' for load in os.getloadavg())}", flush=True)

    for name in ("clickhouse", "sqlite"):
        if args.store not in ("both", name):
            continue
        with contextlib.ExitStack() as stack:
            if name == "clickhouse":
                server = stack.enter_context(ClickHouseServer())
                url_for: Callable[[str], str] = server.url_for
            else:
                tmp = stack.enter_context(tempfile.TemporaryDirectory())
                url_for = lambda database, tmp=tmp: f"sqlite:///{tmp}/{database}.db"  # noqa: E731
            if not args.replica_only:
                (elapsed, listed, cpu), alone = asyncio.run(
                    measure(url_for("bench"), bodies, last_trace, args.concurrency))
                report(name, "1 process (receiver in the benchmark's process)", elapsed, listed, cpu)
                report(name, "store alone (pre-mapped consume, no receiver)", alone)
            if args.processes > 1:
                url = url_for("bench_processes")
                before = server_events(url) if name == "clickhouse" else {}
                elapsed, listed, cpu = asyncio.run(measure_processes(url, bodies, last_trace, args.concurrency,
                                                                     args.processes, args.ingest_log_level))
                report(name, f"replica of {args.processes} processes (evalsi-ingest --processes {args.processes})",
                       elapsed, listed, cpu)
                if before:  # until the replica stopped (its last summaries included) and the benchmark's reads
                    after = server_events(url)
                    print(f"{'':10s}   server statements: " + ", ".join(
                        f"{key} {after.get(key, 0) - before.get(key, 0):,}" for key in _SERVER_EVENTS), flush=True)


if __name__ == "__main__":
    main()
