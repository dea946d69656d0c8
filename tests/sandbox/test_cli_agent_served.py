"""A bring-your-own CLI agent served under the operator's policy (evalsi.yaml `cli_agents:`): `evalsi serve`'s
stack (bundled NATS, api, scheduler, a cpu and a sandbox worker, evalsi-sandboxd on bubblewrap) runs a shell
script the environment ships, on the sandbox pool, inside a sandboxd sandbox on the runtime image; the checker
passes and builtin/task-success scores it. Specs outside the policy (a command it does not list, the host's root,
another project) are refused at submit with 400 naming the field and the setting, and nothing runs."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from google.protobuf import json_format
from sandboxd_process import require_bwrap

import evalsi
from evalsi.sandbox.client import SANDBOXD_ENV
from evalsi.service.config import WorkerConfig
from evalsi.testing.stack import Stack
from evalsi.v1alpha1.run_pb2 import RUN_STATE_SUCCEEDED, EvalRun

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agents" / "env-fix"
# The agent: a script shipped in the environment's files, run by the image's sh (busybox in the runtime image).
AGENT = "sed -i 's/a - b/a + b/' calc.py\necho \"fixed: $(head -c 20 .evalsi/task.txt)\"\n"
POLICY = {"commands": ["sh"], "min_isolation": "namespaced", "max_timeout_s": 60, "projects": ["quickstart"]}


def _spec(**changes: Any) -> dict[str, Any]:
    document = yaml.safe_load((EXAMPLE / "cli-agent.yaml").read_text())
    spec = document["spec"]
    spec["dataset"]["path"] = str(EXAMPLE / spec["dataset"]["path"])  # the server reads absolute paths only
    spec["target"]["agent"]["cli"] = {"command": ["sh", "agent.sh"], "timeout": "30s"}
    spec["harness"]["environment"]["files"]["agent.sh"] = AGENT
    for path, value in changes.items():
        *parents, last = path.split(".")
        node = document
        for key in parents:
            node = node[key]
        node[last] = value
    return document


def _refusal(stack: Stack, document: dict[str, Any], project: str = "quickstart") -> tuple[int, str]:
    """CreateRun over HTTP: the status and the error's message."""
    body = json.dumps({"run": document, "project": project}).encode()
    request = urllib.request.Request(f"{stack.http}/v1alpha1/runs", data=body, method="POST",
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_an_allowed_cli_agent_runs_in_sandboxd_and_the_others_are_refused_at_submit(tmp_path: Path) -> None:
    require_bwrap()
    stack = Stack(tmp_path / "stack", datasets_dir=ROOT / "examples", cli_agents=POLICY,
                  workers=[WorkerConfig("cpu", 1, 8), WorkerConfig("sandbox", 1, 4)],
                  sandbox={"ladder": ["bwrap"]}).start()
    try:
        children = {child.name: child for child in stack.supervisor.children}
        assert children["worker-sandbox-0"].env[SANDBOXD_ENV].startswith("unix:")
        refused = {
            "command": _refusal(stack, _spec(**{"spec.target.agent.cli": {"command": ["python3", "-c", "1"]}})),
            "root": _refusal(stack, _spec(**{"spec.harness.environment.root": {"image": "/"}})),
            "project": _refusal(stack, _spec(), project="other"),
        }
        with evalsi.Client(stack.grpc, project="quickstart") as client:
            served = client.runs.create(json_format.ParseDict(_spec(), EvalRun())).wait()
            results = list(client.runs.results(served.id))
        log = children["sandboxd"].log_path.read_text(errors="replace")
    finally:
        logs = stack.logs()
        stack.stop()
    assert served.state == RUN_STATE_SUCCEEDED, ([r.reason for r in results], served.message, logs)
    assert [(r.evaluator, r.scores[0].passed) for r in results] == [("task-success", True)]
    assert served.manifest.target == "agent:cli:sh agent.sh"
    # It ran in sandboxd (on the sandbox pool's worker), in the run's project, on bubblewrap; only this run did.
    created = [json.loads(line) for line in log.splitlines() if '"sandbox created"' in line]
    assert [(entry["project"], entry["driver"]) for entry in created] == [("quickstart", "bwrap")]
    assert [(i.driver, i.enforcement) for i in served.manifest.isolation] == [("bwrap", "full")]
    assert any(line.startswith("root: runtime image ") for line in served.manifest.isolation[0].enforced)
    assert refused["command"][0] == 400 and (
        "spec.target.agent.cli.command[0]: 'python3' is not a command the server's evalsi.yaml cli_agents.commands "
        "allows; accepted: sh") in refused["command"][1]
    assert refused["root"][0] == 400 and (
        "spec.harness.environment.root: a CLI agent never runs on the host's root (evalsi.yaml cli_agents)"
        in refused["root"][1])
    assert refused["project"][0] == 400 and (
        "project 'other' may not run CLI agents; the server's evalsi.yaml cli_agents.projects allows: quickstart"
        in refused["project"][1])

