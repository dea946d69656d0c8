"""Agent and harness specs: mistakes are refused before anything runs, each naming its field path; what is not
built (a simulated user, sandboxes, an agent inside the built-in harness) is refused by name; the default
server config runs a harness worker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agentrun_support import make_run

from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.runs.spec import validate_eval_run
from evalsi.service.config import Config
from evalsi.service.supervisor import plan_children

REGISTRY = Registry.from_entry_points()
ROWS = [{"id": "a", "input": "hi"}]
MODEL = {"model": {"connector": "openai-compatible", "model": "m", "baseUrl": "http://127.0.0.1:1/v1"}}


def problems(tmp_path: Path, spec: dict[str, Any]) -> list[str]:
    run = make_run(tmp_path, {"evaluators": [{"ref": "exact-match"}], **spec}, ROWS)
    with pytest.raises(BadInputError) as info:
        validate_eval_run(run, registry=REGISTRY, base_dir=tmp_path)
    message = str(info.value)
    return [line.removeprefix("  - ") for line in message.splitlines()[1:]] if "problems" in message else [message]


@pytest.mark.parametrize(
    ("agent", "expected"),
    [
        ({}, "spec.target.agent: give one transport: http"),
        ({"http": {"agent": "shop"}}, "spec.target.agent.http.url: required (the agent's http:// or https:// URL)"),
        ({"http": {"url": "http://a"}}, "spec.target.agent.http.agent: required"),
        ({"a2a": {"url": "ftp://a"}}, "spec.target.agent.a2a.url: expected an http:// or https:// URL, got 'ftp://a'"),
        ({"a2a": {"url": "http://a", "timeout": "0s"}}, "spec.target.agent.a2a.timeout: must be longer than zero"),
        ({"openaiResponses": {"baseUrl": "http://a/v1"}}, "spec.target.agent.openaiResponses.model: required"),
        ({"python": {"callable": "my_agent"}}, 'spec.target.agent.python.callable: expected "package.module:callable"'),
    ],
)
def test_bad_agent_targets_name_their_field(tmp_path: Path, agent: dict[str, Any], expected: str) -> None:
    (problem,) = problems(tmp_path, {"target": {"agent": agent}})
    assert problem.startswith(expected), problem


def test_an_unknown_transport_is_refused_with_its_path(tmp_path: Path) -> None:
    with pytest.raises(BadInputError) as info:
        make_run(tmp_path, {"target": {"agent": {"grpc": {"url": "http://a"}}}, "evaluators": []}, ROWS)
    assert "spec.target.agent.grpc: unknown field" in str(info.value)


def test_harness_specs_are_checked_against_the_target(tmp_path: Path) -> None:
    harness = {"builtin": {"maxSteps": 5}}
    assert problems(tmp_path, {"harness": harness}) == [
        "spec.harness.builtin: needs spec.target.model, the model the reference agent runs on"]
    (problem,) = problems(tmp_path, {"harness": harness, "target": {"agent": {"a2a": {"url": "http://a"}}}})
    assert problem.startswith("spec.harness.builtin: the built-in harness runs the reference agent on spec.target")
    assert problems(tmp_path, {"harness": {}, "target": MODEL}) == [
        "spec.harness: give builtin (the built-in reference agent); no other harness is built yet"]
    found = problems(tmp_path, {"target": MODEL, "harness": {"builtin": {
        "maxSteps": -1, "budget": {"usd": 1.0}, "userSimulator": {"persona": "frustrated customer"}}}})
    assert found == [
        "spec.harness.builtin.userSimulator: the simulated user is not built yet in runs; remove it (persona cases "
        "run with `evalsi cases simulate`)",
        "spec.harness.builtin.maxSteps: must be >= 1 (0 means the default), got -1",
        "spec.harness.builtin.budget.usd: needs the target's prices (price_per_1k_input and price_per_1k_output in "
        "spec.target.model.params) to count dollars",
    ]
    (problem,) = problems(tmp_path, {"target": MODEL, "harness": {"builtin": {"tools": {"python": ["no_colon"]}}}})
    assert problem == 'spec.harness.builtin: tools.python[0]: expected "package.module:function", got \'no_colon\''


def test_a_valid_harness_spec_allows_trials_and_pass_k_gates(tmp_path: Path) -> None:
    run = make_run(tmp_path, {"target": MODEL, "harness": {"builtin": {"tools": {"mcp": [{"command": ["srv"]}]}}},
                              "trials": 3, "evaluators": [{"ref": "builtin/contains", "params": {"values": ["x"]}}],
                              "gates": ["metric('contains').passHatK(3) >= 0.5"]}, ROWS)
    validate_eval_run(run, registry=REGISTRY, base_dir=tmp_path)  # no problem: raises nothing
    assert run.spec.harness.builtin.tools.mcp[0].command == ["srv"]


def test_the_default_server_runs_one_harness_worker(tmp_path: Path) -> None:
    assert ("harness", 1) in [(w.pool, w.replicas) for w in Config().workers]
    assert ("harness", 1) in [(w.pool, w.replicas) for w in Config.from_mapping({}).workers]
    names = [c.name for c in plan_children(Config(), "nats://127.0.0.1:1", tmp_path)]
    assert "worker-harness-0" in names
    argv = next(c.argv for c in plan_children(Config(), "nats://127.0.0.1:1", tmp_path) if c.name == "worker-harness-0")
    assert argv[argv.index("--pool") + 1] == "harness"
