"""A served evalsi-worker with --plugins-dir answers Evaluate requests on the bus with the plugin's evaluators."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from google.protobuf import json_format

from evalsi import bus
from evalsi.bus.natsserver import NatsServer
from evalsi.errors import EvalsiError
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest, EvaluateResponse
from evalsi.v1alpha1.score_pb2 import OUTCOME_SCORED, OUTCOME_SKIPPED

REQUEST = {
    "records": [{"id": "a", "output": {"text": "it is ok"}}, {"id": "b", "output": {"text": "no"}}, {"id": "c"}],
    "evaluators": [{"ref": "acme/has-word"}],
}


async def _ask(url: str, deadline_s: float) -> EvaluateResponse:
    """The worker's answer, asking again until it serves (it starts its plugin first)."""
    connection = await bus.connect(url, name="test-client")
    request = json_format.ParseDict(REQUEST, EvaluateRequest())
    try:
        until = time.monotonic() + deadline_s
        while True:
            try:
                return await bus.request(connection.nc, bus.subjects.evaluate("cpu"), request, EvaluateResponse, 5.0)
            except (EvalsiError, TimeoutError):
                if time.monotonic() > until:
                    raise
                await asyncio.sleep(0.3)
    finally:
        await connection.close()


async def test_worker_serves_plugin_evaluators(plugins_dir: Path, venv_cache: Path, tmp_path: Path) -> None:
    with NatsServer() as nats, open(tmp_path / "worker.log", "wb") as worker_log:
        env = {**os.environ, "EVALSI_PLUGINS_CACHE": str(venv_cache)}
        worker = subprocess.Popen(
            [sys.executable, "-m", "evalsi_worker.main", "--nats", nats.url, "--pool", "cpu", "--metrics-port", "0",
             "--plugins-dir", str(plugins_dir)],
            env=env, stdout=subprocess.DEVNULL, stderr=worker_log,
        )
        try:
            response = await _ask(nats.url, 120.0)
        finally:
            worker.send_signal(signal.SIGTERM)
            code = worker.wait(30)
    log = (tmp_path / "worker.log").read_text()
    by_id = {r.record_id: r for r in response.results}
    assert by_id["a"].outcome == OUTCOME_SCORED and by_id["a"].scores[0].passed, log
    assert by_id["b"].outcome == OUTCOME_SCORED and not by_id["b"].scores[0].passed
    assert by_id["c"].outcome == OUTCOME_SKIPPED and by_id["c"].reason == "missing output"
    assert by_id["a"].evaluator_ref == "acme/has-word@1.0.0"
    assert str(venv_cache) in by_id["a"].scores[0].explanation  # scored in the plugin's venv
    assert code == 0, log
    plugin_pid = int(by_id["a"].scores[0].explanation.split("|")[1])
    assert not Path(f"/proc/{plugin_pid}").exists()  # the worker stopped its plugin on SIGTERM
