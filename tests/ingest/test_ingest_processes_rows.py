"""``evalsi-ingest --processes N`` on ClickHouse: the owner of a trace sums it from the summary rows the other
processes send it, so each trace has one summary writer and none is read back at completion; the summaries are
the ones a single store would write."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from ingest_helpers import make_span, resource_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from evalsi.ingest import AssemblingSink, Completer, CompletionConfig, TraceAssembler
from evalsi.ingest.mappers import map_resource_spans
from evalsi.ingest.pipeline import partition_of
from evalsi.ingest.processes import ProcessMember
from evalsi.stores.traces import ClickHouseTraceStore
from evalsi.stores.traces.summaries import span_row
from evalsi.testing.services import ClickHouseServer
from evalsi.traces import MappedSpan

_databases = itertools.count(1)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _trace(n: int) -> list[MappedSpan]:
    """A root and two children with token usage, so the sums have something to add."""
    trace_id = n.to_bytes(16, "big")
    chat = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": n, "gen_ai.usage.output_tokens": 2}
    spans = [make_span(name="root", span_id=1, trace_id=trace_id, start=100, end=900),
             make_span(chat, name="chat", span_id=2, parent=1, trace_id=trace_id, start=200, end=300 + n),
             make_span(chat, name="chat", span_id=3, parent=1, trace_id=trace_id, start=400, end=500)]
    return map_resource_spans(resource_spans(spans, {"service.name": "svc"})).spans


async def test_the_owner_sums_rows_sent_by_the_other_process_and_reads_nothing_back(
        clickhouse_server: ClickHouseServer) -> None:
    url = clickhouse_server.url_for(f"rows_{next(_databases)}")
    stores = [await ClickHouseTraceStore.open(url), await ClickHouseTraceStore.open(url)]
    left, right = socket.socketpair()
    clock = _Clock()
    members = [ProcessMember(0, 2, {1: left}), ProcessMember(1, 2, {0: right})]
    assemblers = [TraceAssembler(CompletionConfig(grace_s=1, max_wait_s=2), clock) for _ in members]
    sinks = [AssemblingSink(store, assembler, partitioning=member.partitioning, notices=member)
             for store, member, assembler in zip(stores, members, assemblers, strict=True)]
    assert all(sink.rows for sink in sinks)
    for member, assembler, store in zip(members, assemblers, stores, strict=True):
        await member.start(assembler, store)
    traces = [_trace(n) for n in range(1, 31)]
    try:
        for n, spans in enumerate(traces):  # the root to one process, the children to the other
            await sinks[n % 2].consume("p", spans[:1])
            await sinks[(n + 1) % 2].consume("p", spans[1:])
    finally:
        await asyncio.gather(*(member.stop() for member in members))  # every notice sent is read first
    try:
        clock.now = 10.0
        completed = [await Completer(assembler, store).tick() for assembler, store in zip(assemblers, stores,
                                                                                          strict=True)]
        owners = {spans[0].trace_id: partition_of(spans[0].trace_id, 2) for spans in traces}
        assert sorted(t.trace_id for done in completed for t in done) == sorted(owners)  # each once
        assert all(owners[t.trace_id] == i and t.local for i, done in enumerate(completed) for t in done)
        assert [store.writes.traces_read_back for store in stores] == [0, 0]  # the rows were all it needed
        for spans in traces:
            summary = await stores[0].get_summary("p", spans[0].trace_id)
            assert summary is not None
            tokens = sum(row[9] for row in map(span_row, spans))
            assert (summary.span_count, summary.completions, summary.root_span_id) == (3, 1, spans[0].span_id)
            assert (summary.start_ns, summary.end_ns, summary.input_tokens, summary.output_tokens) == (
                spans[0].start_ns, max(span.end_ns for span in spans), tokens, 4)
    finally:
        for store in stores:
            await store.close()


def _post(endpoint: str, request: ExportTraceServiceRequest) -> None:
    post = urllib.request.Request(endpoint, data=request.SerializeToString(),
                                  headers={"Content-Type": "application/x-protobuf"})
    with urllib.request.urlopen(post, timeout=10) as response:  # a new connection each: spread over the processes
        assert response.status == 200


async def test_processes_on_clickhouse_complete_each_trace_once_from_rows(clickhouse_server: ClickHouseServer) -> None:
    url = clickhouse_server.url_for(f"rows_{next(_databases)}")
    process = subprocess.Popen(
        [sys.executable, "-m", "evalsi_ingest.main", "--processes", "2", "--http-port", "0", "--grpc-port", "0",
         "--traces-url", url, "--grace", "1", "--max-wait", "2", "--log-level", "info"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    traces = range(1, 31)
    try:
        line = process.stdout.readline() if process.stdout else ""
        if not line:
            pytest.fail(f"evalsi-ingest did not start: {process.stderr.read() if process.stderr else ''}")
        endpoint = json.loads(line)["otlp_http"] + "/v1/traces"
        resource = {"service.name": "svc", "evalsi.project": "procs"}
        for n in traces:  # each trace in two requests, so its halves land on either process
            trace_id = n.to_bytes(16, "big")
            _post(endpoint, ExportTraceServiceRequest(resource_spans=[
                resource_spans([make_span(name="root", span_id=1, trace_id=trace_id)], resource)]))
            _post(endpoint, ExportTraceServiceRequest(resource_spans=[
                resource_spans([make_span(name="child", span_id=2, parent=1, trace_id=trace_id)], resource)]))
        store = await ClickHouseTraceStore.open(url)
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                page = await store.list_traces("procs", limit=100, completed=True)
                if len(page.traces) == len(traces):
                    break
                await asyncio.sleep(0.2)
        finally:
            await store.close()
        await asyncio.sleep(2.5)  # past --max-wait, when a process tracking a trace it does not own would complete it
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    store = await ClickHouseTraceStore.open(url)
    try:
        summaries = (await store.list_traces("procs", limit=100)).traces
    finally:
        await store.close()
    assert len(summaries) == len(traces)
    assert all(s.span_count == 2 and s.completions == 1 and s.root_span_id for s in summaries), summaries
    # Each process's store logs its counts at close: no trace was read back to be summed.
    counts = [line for line in stderr.splitlines() if "WriteCounts(" in line and "bench" not in line]
    assert len(counts) >= 2 and all("traces_read_back=0" in line for line in counts), counts
