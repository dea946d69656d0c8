"""``evalsi-ingest --processes N``: a trace whose spans reach different processes is completed once, by its owner."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import pytest
from ingest_helpers import make_span, resource_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from evalsi.ingest import AssemblingSink, CompletionConfig, TraceAssembler
from evalsi.ingest.mappers import map_resource_spans
from evalsi.ingest.pipeline import partition_of
from evalsi.ingest.processes import ProcessMember
from evalsi.stores.traces import SqliteTraceStore
from evalsi.traces import MappedSpan


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Stored:
    async def consume(self, project: str, spans: Sequence[MappedSpan]) -> None:
        pass


def _trace_spans(n: int) -> tuple[MappedSpan, MappedSpan]:
    trace_id = n.to_bytes(16, "big")
    root = make_span(name="root", span_id=1, trace_id=trace_id)
    child = make_span(name="child", span_id=2, parent=1, trace_id=trace_id)
    mapped = map_resource_spans(resource_spans([root, child])).spans
    return mapped[0], mapped[1]


async def test_notices_reach_the_owner_so_each_trace_completes_once() -> None:
    left, right = socket.socketpair()
    clock = _Clock()
    members = [ProcessMember(0, 2, {1: left}), ProcessMember(1, 2, {0: right})]
    assemblers = [TraceAssembler(CompletionConfig(grace_s=1, max_wait_s=2), clock) for _ in members]
    sinks = [AssemblingSink(_Stored(), assembler, partitioning=member.partitioning, notices=member)
             for member, assembler in zip(members, assemblers, strict=True)]
    for member, assembler in zip(members, assemblers, strict=True):
        await member.start(assembler)
    try:
        traces = [_trace_spans(n) for n in range(1, 41)]
        for n, (root, child) in enumerate(traces):  # the root to one process, the child to the other
            await sinks[n % 2].consume("p", [root])
            await sinks[(n + 1) % 2].consume("p", [child])
    finally:
        await asyncio.gather(*(member.stop() for member in members))  # every notice sent is read first
    owners = {root.trace_id: partition_of(root.trace_id, 2) for root, _ in traces}
    assert set(owners.values()) == {0, 1}
    clock.now = 10.0  # past grace and max-wait: whatever is tracked anywhere completes now
    completed = [(i, trace.trace_id, trace.root_seen) for i, assembler in enumerate(assemblers)
                 for trace in assembler.pop_completed()]
    assert sorted(trace_id for _, trace_id, _ in completed) == sorted(owners)  # each once
    assert all(owners[trace_id] == i and root_seen for i, trace_id, root_seen in completed), (completed, owners)


def _post(endpoint: str, request: ExportTraceServiceRequest) -> None:
    # urllib opens a new connection per request, so the kernel spreads them over the processes.
    post = urllib.request.Request(endpoint, data=request.SerializeToString(),
                                  headers={"Content-Type": "application/x-protobuf"})
    with urllib.request.urlopen(post, timeout=10) as response:
        assert response.status == 200


async def test_processes_share_the_port_and_complete_each_trace_once(tmp_path: Path) -> None:
    db = tmp_path / "traces.db"
    process = subprocess.Popen(
        [sys.executable, "-m", "evalsi_ingest.main", "--processes", "2", "--http-port", "0", "--grpc-port", "0",
         "--traces-url", f"sqlite:///{db}", "--grace", "1", "--max-wait", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ),
    )
    traces = range(1, 31)
    try:
        line = process.stdout.readline() if process.stdout else ""
        if not line:
            pytest.fail(f"evalsi-ingest did not start: {process.stderr.read() if process.stderr else ''}")
        listening = json.loads(line)
        assert listening["processes"] == 2
        endpoint = listening["otlp_http"] + "/v1/traces"
        resource = {"service.name": "svc", "evalsi.project": "procs"}
        for n in traces:  # each trace in two requests, so its halves land on either process
            trace_id = n.to_bytes(16, "big")
            _post(endpoint, ExportTraceServiceRequest(resource_spans=[
                resource_spans([make_span(name="root", span_id=1, trace_id=trace_id)], resource)]))
            _post(endpoint, ExportTraceServiceRequest(resource_spans=[
                resource_spans([make_span(name="child", span_id=2, parent=1, trace_id=trace_id)], resource)]))
        store = await SqliteTraceStore.open(db)
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
    store = await SqliteTraceStore.open(db)
    try:
        summaries = (await store.list_traces("procs", limit=100)).traces
    finally:
        await store.close()
    assert len(summaries) == len(traces)
    assert all(s.span_count == 2 and s.completions == 1 for s in summaries), summaries
