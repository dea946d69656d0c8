"""A harness environment run served: `evalsi serve`'s stack (bundled NATS, api, scheduler, workers and
evalsi-sandboxd on bubblewrap) runs examples/agents/env-fix on the harness pool, whose worker opens the record's
sandbox on sandboxd (not in its own process); the scripted model fixes the file and the checker passes, as
embedded."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

import evalsi
from evalsi.runs.spec import load_eval_run
from evalsi.sandbox.client import SANDBOXD_ENV
from evalsi.service.supervisor import metrics_url
from evalsi.testing.stack import Stack
from evalsi.testing.threaded import ThreadedProvider
from evalsi.v1alpha1.run_pb2 import RUN_STATE_SUCCEEDED

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agents" / "env-fix"


def test_a_served_environment_run_works_in_a_sandboxd_sandbox(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLE))
    from fix_model import reply

    run = load_eval_run(EXAMPLE / "env-fix.yaml")
    run.spec.dataset.path = str(EXAMPLE / run.spec.dataset.path)  # the server reads absolute paths only
    model = run.spec.target.model
    model.ClearField("connector")
    model.ClearField("base_url")
    model.connection = "coder"  # on a server, endpoints are the server's connections
    with ThreadedProvider(reply) as provider:
        stack = Stack(tmp_path / "stack", datasets_dir=ROOT / "examples",
                      judges={"coder": {"base_url": provider.base_url, "model": "fake-coder"}}).start()
        try:
            children = {child.name: child for child in stack.supervisor.children}
            assert children["worker-harness-0"].env[SANDBOXD_ENV].startswith("unix:")
            with evalsi.Client(stack.grpc, project="quickstart") as client:
                served = client.runs.create(run).wait()
                results = list(client.runs.results(served.id))
            log = children["sandboxd"].log_path.read_text(errors="replace")
            url = metrics_url(children["sandboxd"])
            assert url, children["sandboxd"].argv
            with urllib.request.urlopen(url, timeout=10) as page:
                alive = [line for line in page.read().decode().splitlines()
                         if line.startswith("evalsi_sandboxd_sandboxes ")]
        finally:
            logs = stack.logs()
            stack.stop()
    assert served.state == RUN_STATE_SUCCEEDED, ([r.reason for r in results], served.message, logs)
    assert all(gate.passed for gate in served.gates)
    assert [(r.scores[0].passed, r.scores[0].explanation) for r in results] == [(True, "3/3 cases pass")]
    # The agent's tools and the checker acted in a sandboxd sandbox of the run's project, destroyed afterwards.
    created = [json.loads(line) for line in log.splitlines() if '"sandbox created"' in line]
    assert [(entry["project"], entry["driver"]) for entry in created] == [("quickstart", "bwrap")]
    assert alive == ["evalsi_sandboxd_sandboxes 0.0"]  # destroyed once checked
    assert len(provider.requests) == 4  # read, write, run the tests, answer
