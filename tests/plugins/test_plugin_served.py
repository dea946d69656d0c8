"""`evalsi serve` with EVALSI_PLUGINS_DIR: the api knows the plugin's evaluators (described at its start) and a
worker runs them, so POST /v1alpha1/evaluate scores with a plugin as with any evaluator."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from evalsi.ports import free_ports

EVALSI = str(Path(sys.executable).parent / "evalsi")
READY_TIMEOUT_S = 180.0  # every service, and the plugin started by three of them, on two shared cores


def _wait_ready(log: Path, process: subprocess.Popen[bytes]) -> None:
    end = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < end:
        text = log.read_text(errors="replace")
        if process.poll() is not None:
            raise AssertionError(f"evalsi serve exited ({process.returncode}):\n{text[-4000:]}")
        if any(line.startswith("ready in") for line in text.splitlines()):
            return
        time.sleep(0.3)
    raise AssertionError(f"evalsi serve not ready in {READY_TIMEOUT_S:.0f} s:\n{log.read_text()[-4000:]}")


def _run_on_server(tmp_path: Path, http: int) -> dict[str, Any]:
    """An EvalRun naming a record-scope and a dataset-scope plugin evaluator, run through the scheduler."""
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(row) + "\n" for row in [
        {"id": "a", "output": "it is ok"}, {"id": "b", "output": "no"}, {"id": "c", "output": "okay"}]))
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({
        "apiVersion": "evals.si/v1alpha1", "kind": "EvalRun", "metadata": {"name": "plugin-run"},
        "spec": {"target": {"outputs": {}}, "dataset": {"path": "data.jsonl"},
                 "evaluators": [{"ref": "acme/has-word"}, {"ref": "acme/mean-length"}],
                 "summary": {"bootstrapResamples": 100}},
    }))
    done = subprocess.run([EVALSI, "run", "-f", str(tmp_path / "run.yaml"), "--server", f"http://127.0.0.1:{http}",
                           "-o", str(tmp_path / "result.json")], capture_output=True, text=True, timeout=180,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return cast(dict[str, Any], json.loads((tmp_path / "result.json").read_text()))


def test_served_evaluate_uses_a_plugin(plugins_dir: Path, venv_cache: Path, tmp_path: Path) -> None:
    http, grpc_port = free_ports(2)
    config = tmp_path / "evalsi.yaml"
    config.write_text(yaml.safe_dump({
        "metadata": {"url": f"sqlite:///{tmp_path / 'evalsi.db'}"},
        "objects": {"url": str(tmp_path / "objects")},
        "api": {"http_port": http, "grpc_port": grpc_port},
        "workers": [{"pool": "cpu", "replicas": 1, "concurrency": 2}],
    }))
    env = {**os.environ, "EVALSI_PLUGINS_DIR": str(plugins_dir), "EVALSI_PLUGINS_CACHE": str(venv_cache)}
    log = tmp_path / "serve.log"
    with open(log, "wb") as console:
        process = subprocess.Popen(
            [EVALSI, "serve", "--config", str(config), "--state-dir", str(tmp_path / "state")],
            cwd=tmp_path, env=env, stdout=console, stderr=subprocess.STDOUT,
        )
    try:
        _wait_ready(log, process)
        body = {"records": [{"id": "a", "output": {"text": "it is ok"}}, {"id": "b", "output": {"text": "no"}}],
                "evaluators": [{"ref": "acme/has-word", "params": {"word": "ok"}}]}
        request = urllib.request.Request(f"http://127.0.0.1:{http}/v1alpha1/evaluate", json.dumps(body).encode(),
                                         {"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            response = json.load(answer)
        run = _run_on_server(tmp_path, http)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    by_id = {r["recordId"]: r for r in response["results"]}
    assert by_id["a"]["outcome"] == "OUTCOME_SCORED" and by_id["a"]["scores"][0]["passed"] is True
    assert by_id["b"]["scores"][0]["passed"] is False
    assert by_id["a"]["evaluatorRef"] == "acme/has-word@1.0.0"
    assert str(venv_cache) in by_id["a"]["scores"][0]["explanation"]  # scored in the plugin's own venv
    summary = next(s for s in response["summaries"] if s["metric"] == "has-word")
    assert summary["n"] == "2" and summary["mean"] == 0.5
    metrics = {s["metric"]: s for s in run["summaries"]}
    assert metrics["has-word"]["n"] == "3" and metrics["has-word"]["mean"] == pytest.approx(2 / 3)
    assert metrics["mean-length"]["mean"] == pytest.approx(14 / 3)  # (8 + 2 + 4) / 3, reduced by the plugin on a worker
    assert process.returncode == 0, log.read_text()[-4000:]
