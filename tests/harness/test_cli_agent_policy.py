"""The server's CLI agent policy (evalsi.yaml `cli_agents:`): how it is read, what a served spec's CLI agent may ask
(each refusal naming the field and the setting), what the worker enforces again, and that a CLI agent target counts
as running code for the caller's permissions. Pure: no sandbox, no server (tests/sandbox/test_cli_agent_served.py
runs one)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from google.protobuf import json_format

from evalsi.authz import attributes as attrs
from evalsi.cli_agent_policy import (
    CliAgentPolicy,
    check_command,
    check_root,
    load_cli_policy,
    policy_request,
)
from evalsi.connection_rules import ServerEndpoints, run_problems
from evalsi.connections import Connections
from evalsi.errors import BadInputError
from evalsi.sandbox.model import Level
from evalsi.service.config import Config
from evalsi.v1alpha1.run_pb2 import EvalRun, SandboxSpec
from evalsi.v1alpha1.run_service_pb2 import CreateRunRequest

POLICY = {"commands": ["sh", "/opt/agents/*", "/workspace/agent.sh"], "max_timeout_s": 60,
          "projects": ["quickstart"]}


def _run(cli: dict[str, Any], environment: dict[str, Any] | None = None) -> EvalRun:
    spec: dict[str, Any] = {"dataset": {"path": "d.jsonl"}, "evaluators": [{"ref": "task-success"}],
                            "target": {"agent": {"cli": cli}}}
    if environment is not None:
        spec["harness"] = {"environment": environment}
    return json_format.ParseDict({"apiVersion": "evals.si/v1alpha1", "kind": "EvalRun", "metadata": {"name": "r"},
                                  "spec": spec}, EvalRun())


@pytest.mark.parametrize(("section", "message"), [
    ({"command": ["sh"]}, "cli_agents.command: unknown key; did you mean commands?"),
    ({"commands": []}, "cli_agents.commands: a non-empty list"),
    ({"commands": ["sh*"]}, "cli_agents.commands[0]: 'sh*': a bare name is matched exactly"),
    ({"commands": ["/opt/../bin/*"]}, "cli_agents.commands[0]: '/opt/../bin/*': a path glob is absolute and normal"),
    ({"commands": ["bin/agent"]}, "cli_agents.commands[0]: 'bin/agent': a path glob is absolute"),
    ({"commands": ["sh"], "min_isolation": "confined"}, "cli_agents.min_isolation: 'confined' is below namespaced"),
    ({"commands": ["sh"], "max_timeout_s": 0}, "cli_agents.max_timeout_s: seconds in (0, 86400]"),
])
def test_a_bad_section_is_refused_at_load_naming_its_key(section: dict[str, Any], message: str) -> None:
    with pytest.raises(BadInputError, match="^" + re.escape(f"evalsi.yaml: {message}")):
        Config.from_mapping({"cli_agents": section})


def test_the_section_reaches_the_api_and_workers_through_the_connections_file(tmp_path: Any) -> None:
    config = Config.from_mapping({"cli_agents": POLICY})
    assert Config.from_mapping({}).connections.cli_agents is None  # absent: CLI agents are refused
    path = config.connections.write(tmp_path / "connections.json")
    policy = Connections.load(path).cli_agents
    assert policy == CliAgentPolicy(("sh", "/opt/agents/*", "/workspace/agent.sh"), Level.NAMESPACED, 60.0,
                                    ("quickstart",))


@pytest.mark.parametrize(("command", "allowed"), [
    ("sh", True), ("/opt/agents/run", True), ("/workspace/agent.sh", True),
    ("bash", False), ("/bin/sh", False),               # exact names; a path must match a glob
    ("/opt/agents/sub/run", False),                    # a glob's * never crosses a /
    ("/opt/agents/../../bin/sh", False), ("./agent.sh", False), ("/opt//agents/x", False),
])
def test_commands_are_exact_names_or_globs_of_normalized_sandbox_paths(command: str, allowed: bool) -> None:
    policy = load_cli_policy(POLICY)
    assert policy is not None
    if allowed:
        check_command(policy, command)
    else:
        with pytest.raises(BadInputError, match=r"spec\.target\.agent\.cli\.command\[0\]: .*cli_agents\.commands"):
            check_command(policy, command)


@pytest.mark.parametrize(("run", "project", "message"), [
    (_run({"command": ["bash", "-c", "id"]}), "quickstart",
     "spec.target.agent.cli.command[0]: 'bash' is not a command the server's evalsi.yaml cli_agents.commands "
     "allows; accepted: sh, /opt/agents/*, /workspace/agent.sh"),
    (_run({"command": ["sh"]}), "other",
     "spec.target.agent.cli: project 'other' may not run CLI agents; the server's evalsi.yaml cli_agents.projects "
     "allows: quickstart"),
    (_run({"command": ["sh"], "timeout": "120s"}), "quickstart",
     "spec.target.agent.cli.timeout: 120s is over the server's cap of 60s (evalsi.yaml cli_agents.max_timeout_s)"),
    (_run({"command": ["sh"]}, {"sandbox": {"minIsolation": "confined"}}), "quickstart",
     "spec.harness.environment.sandbox.minIsolation: 'confined' is below what the server runs CLI agents under "
     "(namespaced, evalsi.yaml cli_agents.min_isolation)"),
    (_run({"command": ["sh"]}, {"root": {"image": "/"}}), "quickstart",
     "spec.harness.environment.root: a CLI agent never runs on the host's root (evalsi.yaml cli_agents)"),
    (_run({"command": ["sh"]}, {"root": {"image": "//"}}), "quickstart",
     "spec.harness.environment.root: a CLI agent never runs on the host's root (evalsi.yaml cli_agents)"),
])
def test_a_served_cli_agent_outside_the_policy_is_refused_naming_the_field_and_the_setting(
        run: EvalRun, project: str, message: str) -> None:
    connections = Connections.from_mapping(None, None, cli_agents=POLICY)
    problems = run_problems(connections, run, project)
    assert len(problems) == 1 and problems[0].startswith(message), problems


def test_without_the_section_every_cli_agent_is_refused_and_an_allowed_one_passes() -> None:
    [problem] = run_problems(Connections(), _run({"command": ["sh"]}), "quickstart")
    assert problem.startswith("spec.target.agent.cli: CLI agents are not run on this server (project 'quickstart'); "
                              "the operator allows them with evalsi.yaml's cli_agents: section")
    allowed = Connections.from_mapping(None, None, cli_agents=POLICY)
    run = _run({"command": ["sh", "agent.sh"], "timeout": "30s"}, {"sandbox": {"minIsolation": "kernel"}})
    assert run_problems(allowed, run, "quickstart") == []
    # The worker asks again, with its own configuration (a bus message cannot widen it).
    with pytest.raises(BadInputError, match="cli_agents: section"):
        ServerEndpoints(Connections(), "quickstart").cli_policy()
    assert ServerEndpoints(allowed, "quickstart").cli_policy() == allowed.cli_agents


def test_the_worker_raises_the_minimum_never_lowers_it_and_never_uses_the_host_root() -> None:
    policy = CliAgentPolicy(("sh",), Level.KERNEL)
    assert policy_request(policy, SandboxSpec(), Level.NAMESPACED).min_isolation == "kernel"
    assert policy_request(policy, SandboxSpec(min_isolation="confined"), Level.NAMESPACED).min_isolation == "kernel"
    assert policy_request(policy, SandboxSpec(min_isolation="vm"), Level.NAMESPACED).min_isolation == "vm"
    check_root(policy, {"root": "runtime image 0123abcd read-only"})
    with pytest.raises(BadInputError, match=r"the sandbox's root is the host's \(host /usr read-only \(trusted\)\)"):
        check_root(policy, {"root": "host /usr read-only (trusted)"})


def test_a_cli_agent_target_runs_code_for_the_callers_permissions() -> None:
    """The policy is the operator's; the caller still needs runs.create, and rules reading resource.runs_code
    (a role's condition that its holders run no code) see a CLI agent as code."""
    resource = attrs.create_run(CreateRunRequest(run=_run({"command": ["sh"]})), attrs.AttributeSources(
        runs_code=lambda ref: False))
    assert resource["runs_code"] is True
    assert resource["target"] == {"kind": "agent", "connector": "cli", "model": "", "connection": ""}
