"""The ``evalsi-ingest`` process: flags, both listeners on free ports, a real exporter, SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from test_receivers_sdk import genai_trace, send

from evalsi.stores.traces import SqliteTraceStore

ROOT = Path(__file__).resolve().parents[2]


def _eventually_scraped(port: int, line: str, timeout_s: float = 15.0) -> str:
    """The /metrics text once it holds ``line`` (the completion loop ticks every half second)."""
    import time
    import urllib.request

    deadline = time.monotonic() + timeout_s
    text = ""
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
        if line in text:
            return text
        time.sleep(0.2)
    raise AssertionError(f"/metrics never showed {line!r}:\n{text}")


def _env() -> dict[str, str]:
    return dict(os.environ)


def test_bad_flags_exit_2() -> None:
    from evalsi_ingest.main import main

    assert main(["--host", "0.0.0.0"]) == 2
    assert main(["--host", "127.0.0.1.example.com"]) == 2  # a name that merely starts like a loopback address
    assert main(["--http-port", "5000", "--grpc-port", "5000"]) == 2
    assert main(["--grace", "10", "--max-wait", "1"]) == 2
    assert main(["--default-project", "a b"]) == 2


async def test_process_serves_both_and_stops_cleanly(tmp_path: Path) -> None:
    from evalsi.testing.services import free_port

    db = tmp_path / "traces.db"
    metrics_port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "evalsi_ingest.main", "--http-port", "0", "--grpc-port", "0",
         "--traces-url", f"sqlite:///{db}", "--grace", "0", "--metrics-port", str(metrics_port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
    )
    try:
        line = process.stdout.readline() if process.stdout else ""
        if not line:
            pytest.fail(f"evalsi-ingest did not start: {process.stderr.read() if process.stderr else ''}")
        listening = json.loads(line)
        assert listening["event"] == "listening" and listening["otlp_grpc"].startswith("127.0.0.1:")
        exporter = OTLPSpanExporter(endpoint=listening["otlp_http"] + "/v1/traces", timeout=5)
        send(exporter, genai_trace, {"service.name": "travel-agent", "evalsi.project": "proc"})
        metrics = _eventually_scraped(metrics_port, 'evalsi_ingest_traces_completed_total{process="0"} 1.0')
        assert 'evalsi_ingest_spans_total{outcome="accepted",process="0"} 4.0' in metrics
        assert 'evalsi_ingest_spans_total{outcome="rejected",process="0"} 0.0' in metrics
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=20)
    assert process.returncode == 0, stderr
    store = await SqliteTraceStore.open(db)
    try:
        (summary,) = (await store.list_traces("proc")).traces
        assert summary.span_count == 4 and summary.completed_at is not None  # completed on the way out at least
    finally:
        await store.close()
