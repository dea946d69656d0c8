"""Agent targets and the built-in harness on the server: generation runs on the harness worker pool, through
the same code as embedded, and the served runs' summaries and gates equal the embedded runs'."""

from __future__ import annotations

import asyncio
import os
import urllib.request
from pathlib import Path

import pytest

import evalsi
from evalsi.cases.testing import ScriptedAgent, ThreadedAgent
from evalsi.runs.embedded import run_embedded
from evalsi.runs.spec import load_eval_run
from evalsi.service.supervisor import metrics_url
from evalsi.testing.stack import Stack
from evalsi.testing.threaded import ThreadedProvider
from evalsi.v1alpha1.run_pb2 import RUN_STATE_SUCCEEDED, EvalRun

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "agents"


def summaries_of(run: object) -> dict[str, tuple]:
    """n, mean, interval, skipped and errors of every metric but latency (a timing, different every run)."""
    return {
        s.metric: (s.n, round(s.mean, 9) if s.HasField("mean") else None, round(s.ci.low, 9), round(s.ci.high, 9),
                   s.skipped, s.errors)
        for s in run.summaries  # type: ignore[attr-defined]
        if not s.metric.startswith("latency")
    }


def spec(name: str) -> EvalRun:
    run = load_eval_run(EXAMPLES / name)
    run.spec.dataset.path = str(EXAMPLES / run.spec.dataset.path)  # the server reads absolute paths only
    return run


def test_agent_and_harness_runs_on_the_server_equal_the_embedded_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The harness worker imports the spec's tool (weather_tools) like the embedded run does: from its path.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(EXAMPLES), os.environ.get("PYTHONPATH")])))
    monkeypatch.syspath_prepend(str(EXAMPLES))
    from weather_model import reply

    with ThreadedProvider(reply) as model, ThreadedAgent(
        ScriptedAgent.from_file(str(EXAMPLES / "weather-agent.yaml"))
    ) as agent:
        harness_run = spec("agent-harness.yaml")
        harness_run.spec.target.model.base_url = model.base_url
        agent_run = spec("agent-http.yaml")
        agent_run.spec.target.agent.http.url = agent.base_url
        embedded = [asyncio.run(run_embedded(run)).run for run in (harness_run, agent_run)]
        calls_embedded = len(model.requests)
        # On the server the specs name the endpoints the server configures, never an address of their own.
        served_harness, served_agent = EvalRun(), EvalRun()
        served_harness.CopyFrom(harness_run)
        served_harness.spec.target.model.ClearField("connector")
        served_harness.spec.target.model.ClearField("base_url")
        served_harness.spec.target.model.connection = "weather-model"
        served_agent.CopyFrom(agent_run)
        served_agent.spec.target.agent.connection = "weather"
        stack = Stack(tmp_path, datasets_dir=ROOT / "examples",
                      judges={"weather-model": {"base_url": model.base_url, "model": "fake-model"}},
                      agents={"weather": {"protocol": "http", "url": agent.base_url, "agent": "weather",
                                          "timeout_s": 30}},
                      harness_tools=["weather_tools:get_weather"]).start()
        try:
            with evalsi.Client(stack.grpc) as client:
                served = [client.runs.create(run).wait() for run in (served_harness, served_agent)]
            with urllib.request.urlopen(metrics_url(stack.supervisor.child("worker-harness-0")), timeout=10) as page:
                metrics = page.read().decode()
        finally:
            logs = stack.logs()
            stack.stop()
    for local, remote in zip(embedded, served, strict=True):
        assert remote.state == RUN_STATE_SUCCEEDED, remote.message + logs
        assert summaries_of(remote) == summaries_of(local)
        assert [(g.expression, g.passed) for g in remote.gates] == [(g.expression, g.passed) for g in local.gates]
    # The manifests name the connections; the embedded runs' name the addresses.
    assert served[0].manifest.target == ("evalsi-harness(maxSteps=5, tools=[py:weather_tools:get_weather]) on "
                                         "connection:weather-model:fake-model")
    assert served[1].manifest.target == "agent:connection:weather"
    assert embedded[1].manifest.target == f"agent:http:{agent.base_url} (agent weather)"
    assert list(served[1].manifest.unpinned) == ["target: agent:connection:weather is a running deployment and "
                                                 "cannot be pinned"]
    assert len(model.requests) == 2 * calls_embedded  # the server ran every task, once
    # Generation ran on the harness pool: two trials of each run, one generate task (stage 1) each.
    assert 'evalsi_worker_tasks_total{pool="harness",stage="1",status="1"} 4.0' in metrics
