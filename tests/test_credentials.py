"""Credentials only by name: the judges:/agents: sections, what a served request may name, redaction."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

from evalsi.connection_rules import evaluate_problems, judge_config, model_config, policy_problems, run_problems
from evalsi.connections import CONNECTIONS_ENV, Connections
from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.judges.redaction import REDACTED, redact
from evalsi.policy import compile_policy
from evalsi.service.config import Config
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest
from evalsi.v1alpha1.evaluator_pb2 import JudgeSpec
from evalsi.v1alpha1.policy_pb2 import OnlineEvalPolicy
from evalsi.v1alpha1.run_pb2 import EvalRun, ModelTarget

JUDGES = {
    "default": {"base_url": "http://127.0.0.1:9/v1", "model": "judge", "models": ["judge", "big"],
                "api_key": {"env": "JUDGE_KEY"}, "params": {"temperature": 0.2}, "rpm": 60},
    "team": {"connector": "anthropic", "model": "claude", "api_key": {"file": "/run/secrets/k"},
             "projects": ["team-a"]},
}
AGENTS = {"shop": {"protocol": "http", "url": "http://127.0.0.1:9", "agent": "shop", "token": {"env": "SHOP"}}}


@pytest.fixture(scope="module")
def connections() -> Connections:
    return Config.from_mapping({"judges": JUDGES, "agents": AGENTS, "harness_tools": ["tools:weather"]}).connections


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry.from_entry_points()


# --- the evalsi.yaml sections -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("judge", "message"),
    [
        ({"model": "m", "base_url": "ftp://x"}, "judges.j.base_url: must start with http:// or https://"),
        ({"model": "m", "api_key": "sk-live-123"}, "judges.j.api_key: expected {env: VARIABLE} or {file: PATH}"),
        ({"model": "m", "api_key": {"env": "A", "file": "/k"}}, "judges.j.api_key: expected {env: VARIABLE}"),
        ({"model": "m", "api_key": {"env": "not a name"}}, "judges.j.api_key.env: 'not a name' is not"),
        ({"modle": "m"}, "judges.j.modle: unknown key; did you mean model?"),
        ({"base_url": "http://x"}, "judges.j.model: required"),
        ({"model": "m", "models": ["a"]}, "judges.j.model: 'm' is not in models (a)"),
        ({"model": "m", "connector": "cohere"}, "judges.j.connector: must be one of openai, openai-compatible"),
        ({"model": "m", "projects": []}, "judges.j.projects: expected a non-empty list of names"),
        ({"model": "m", "timeout_s": 0}, "judges.j.timeout_s: must be > 0"),
        ({"model": "m", "params": {"stream": True}}, "judges.j.params.stream: set by Evals.si itself"),
    ],
)
def test_a_bad_judge_connection_is_refused_naming_its_key(judge: dict[str, Any], message: str) -> None:
    with pytest.raises(BadInputError) as caught:
        Config.from_mapping({"judges": {"j": judge}})
    assert str(caught.value) == f"evalsi.yaml: {message}" or str(caught.value).startswith(f"evalsi.yaml: {message}")


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        ({"protocol": "ftp", "url": "http://x"}, "agents.a.protocol: required, one of http, a2a, openai-responses"),
        ({"protocol": "a2a"}, "agents.a.url: required, an http:// or https:// URL"),
        ({"protocol": "http", "url": "http://x"}, "agents.a.agent: required for protocol http"),
        ({"protocol": "openai-responses", "url": "http://x"}, "agents.a.model: required for protocol openai"),
        ({"protocol": "a2a", "url": "http://x", "token": "t0ken"}, "agents.a.token: expected {env: VARIABLE}"),
        ({"protocol": "a2a", "url": "http://x", "urls": []}, "agents.a.urls: unknown key; did you mean url?"),
    ],
)
def test_a_bad_agent_connection_is_refused_naming_its_key(agent: dict[str, Any], message: str) -> None:
    with pytest.raises(BadInputError) as caught:
        Config.from_mapping({"agents": {"a": agent}})
    assert str(caught.value).startswith(f"evalsi.yaml: {message}")


def test_the_sections_round_trip_through_a_private_file(tmp_path: Path, connections: Connections) -> None:
    path = connections.write(tmp_path / "state" / "connections.json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = Connections.from_environ({CONNECTIONS_ENV: str(path)})
    assert again == connections
    assert again.judges["default"].models == ("judge", "big")
    assert again.judges["team"].base_url == "https://api.anthropic.com"
    assert again.judges["team"].api_key.file == "/run/secrets/k"
    assert again.harness_tools == ("tools:weather",)
    assert Connections.from_environ({}) == Connections()


# --- what a served request may name -------------------------------------------------------------


def test_a_judge_resolves_to_the_connection_and_its_credential_reference(connections: Connections) -> None:
    config = judge_config(connections, "default", JudgeSpec(model="big", template="pairwise@1"), "default", "judges")
    assert (config.provider, config.base_url, config.model, config.template) == (
        "openai", "http://127.0.0.1:9/v1", "big", "pairwise@1")
    assert config.api_key({"JUDGE_KEY": "k-123456", "OPENAI_API_KEY": "planted"}) == "k-123456"
    assert config.api_key_env == "" and config.rpm == 60 and config.params["temperature"] == 0.2
    # No spec: the connection named like the judge, its default model.
    assert judge_config(connections, "default", None, "p", "judges.default").model == "judge"


@pytest.mark.parametrize(
    ("spec", "project", "message"),
    [
        ({"baseUrl": "http://127.0.0.1:1/x", "apiKeyEnv": "ANTHROPIC_API_KEY"}, "default",
         "judges.default.baseUrl, judges.default.apiKeyEnv: not accepted on a server"),
        ({"secretRef": "aws"}, "default", "judges.default.secretRef: not accepted"),
        ({"connector": "openai", "params": {"seed": 1}}, "default", "judges.default.connector, judges.default.params"),
        ({"timeoutS": 900}, "default", "judges.default.timeoutS: not accepted"),
        ({"connection": "nope"}, "default",
         "judges.default.connection: 'nope' is not one of the server's configured judges (evalsi.yaml judges:); "
         "accepted for project 'default': default"),
        ({"connection": "team"}, "default", "judges.default.connection: 'team' is not granted to project 'default'"),
        ({"model": "gpt-4o"}, "default",
         "judges.default.model: 'gpt-4o' is not offered by connection 'default'; accepted: judge, big"),
        ({"template": "bad template"}, "default", "judges.default.template: must be \"name@version\""),
    ],
)
def test_a_judge_naming_anything_but_an_offered_connection_is_refused(
    connections: Connections, spec: dict[str, Any], project: str, message: str
) -> None:
    with pytest.raises(BadInputError) as caught:
        judge_config(connections, "default", json_format.ParseDict(spec, JudgeSpec()), project, "judges.default")
    assert str(caught.value).startswith(message)


def test_a_project_granted_a_connection_may_name_it(connections: Connections) -> None:
    spec = JudgeSpec(connection="team")
    assert judge_config(connections, "j", spec, "team-a", "judges.j").secret.file == "/run/secrets/k"


def test_an_evaluate_request_is_checked_judge_by_judge_and_evaluator_by_evaluator(
    connections: Connections, registry: Registry
) -> None:
    request = json_format.ParseDict({
        "records": [{"id": "a"}],
        "evaluators": [{"ref": "llm-judge", "judge": "strict"}, {"ref": "exact-match"}, {"ref": "llm-judge"}],
        "judges": {"evil": {"baseUrl": "http://127.0.0.1:1"}},
    }, EvaluateRequest())
    problems = evaluate_problems(connections, request, "default", registry)
    assert [p.split(":")[0] for p in problems] == ["judges.evil.baseUrl", "evaluators[0].judge"]
    assert evaluate_problems(Connections(), json_format.ParseDict(
        {"records": [{"id": "a"}], "evaluators": [{"ref": "llm-judge"}]}, EvaluateRequest()), "default", registry
    ) == ["evaluators[0].judge: 'default' is not one of the server's configured judges (evalsi.yaml judges:); "
          "accepted for project 'default': none (the server's evalsi.yaml judges: offers none to it)"]


def run(spec: dict[str, Any]) -> EvalRun:
    return json_format.ParseDict({"apiVersion": "evals.si/v1alpha1", "kind": "EvalRun", "metadata": {"name": "r"},
                                  "spec": {"dataset": {"path": "d.jsonl"}, "evaluators": [{"ref": "exact-match"}],
                                           **spec}}, EvalRun())


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"judges": {"default": {"baseUrl": "http://127.0.0.1:1"}}}, "spec.judges.default.baseUrl: not accepted"),
        ({"target": {"model": {"model": "m", "baseUrl": "http://127.0.0.1:1", "apiKeyEnv": "X"}}},
         "spec.target.model.baseUrl, spec.target.model.apiKeyEnv: not accepted"),
        ({"target": {"model": {"model": "m"}}}, "spec.target.model.connection: required on a server"),
        ({"target": {"model": {"connection": "default", "params": {"timeout_s": 900}}}},
         "spec.target.model.params.timeout_s: set by the server's connection 'default'"),
        ({"target": {"agent": {"http": {"url": "http://127.0.0.1:1", "agent": "a"}}}},
         "spec.target.agent.http: on a server an agent target names a configured agent (spec.target.agent.connection)"
         ", never an address or code of its own; accepted for project 'default': shop"),
        ({"target": {"agent": {"openaiResponses": {"baseUrl": "http://x/v1", "model": "m", "apiKeyEnv": "K"}}}},
         "spec.target.agent.openaiResponses: on a server"),
        ({"target": {"agent": {"python": {"callable": "os:getenv"}}}}, "spec.target.agent.python: on a server"),
        ({"target": {"agent": {"connection": "mall"}}},
         "spec.target.agent.connection: 'mall' is not one of the server's configured agents"),
        ({"target": {"model": {"connection": "default"}}, "harness": {"builtin": {"tools": {"mcp": [
            {"command": ["sh", "-c", "env"]}]}}}}, "spec.harness.builtin.tools.mcp[0].command: MCP tool servers"),
        ({"target": {"model": {"connection": "default"}}, "harness": {"builtin": {"tools": {"python": [
            "tools:weather", "os:getenv"]}}}},
         "spec.harness.builtin.tools.python[1]: 'os:getenv' is not a tool the server offers (a tool runs in the worker "
         "with its environment); accepted: tools:weather"),
    ],
)
def test_a_run_spec_naming_an_endpoint_is_refused(connections: Connections, spec: dict, message: str) -> None:
    problems = run_problems(connections, run(spec), "default")
    assert len(problems) == 1 and problems[0].startswith(message), problems


def test_a_model_target_over_a_connection_keeps_its_sampling_params_and_prices(connections: Connections) -> None:
    target = json_format.ParseDict({"connection": "default", "model": "big", "params": {
        "max_tokens": 5, "price_per_1k_input": 1.0}}, ModelTarget())
    config = model_config(connections, target, "default", seed=7)
    assert config.model == "big" and config.base_url == "http://127.0.0.1:9/v1"
    assert config.params == {"temperature": 0.2, "max_tokens": 5, "seed": 7}
    assert run_problems(connections, run({"target": {"agent": {"connection": "shop"}}}), "default") == []


def test_a_policy_stage_needs_an_offered_judge(connections: Connections, registry: Registry) -> None:
    def policy(judge: str) -> Any:
        return compile_policy(json_format.ParseDict({
            "apiVersion": "evals.si/v1alpha1", "kind": "OnlineEvalPolicy", "metadata": {"name": "p"},
            "spec": {"cascade": [{"ref": "exact-match"}, {"ref": "llm-judge", "judge": judge}]}},
            OnlineEvalPolicy()), registry=registry)

    assert policy_problems(connections, policy("default"), "default") == []
    (problem,) = policy_problems(connections, policy("team"), "default")
    assert problem.startswith("policy.spec.cascade[1].judge: 'team' is not granted to project 'default'")


# --- redaction ----------------------------------------------------------------------------------


def test_provider_error_bodies_lose_keys_tokens_and_length() -> None:
    body = ('{"error": {"message": "Incorrect API key provided: k-planted-987654. Authorization: Bearer abc.def-123 '
            'x-api-key: ant-xyz-0001 sk-proj-AAAAbbbbCCCC"}}')
    text = redact(body, ("k-planted-987654",))
    assert text == ('{"error": {"message": "Incorrect API key provided: [REDACTED]. Authorization: Bearer [REDACTED] '
                    'x-api-key: [REDACTED] sk-[REDACTED]"}}')
    assert text.count(REDACTED) == 4
    assert len(redact("x" * 5000)) == 500
    assert redact("usage.prompt_tokens is -1, not a token count") == "usage.prompt_tokens is -1, not a token count"


def test_an_embedded_run_refuses_a_servers_connection_names() -> None:
    from evalsi.runs.spec import judge_configs_of
    from evalsi.targets.models import LocalEndpoints
    from evalsi.targets.transports import open_transport

    with pytest.raises(BadInputError, match=r"^spec\.judges\.default\.connection: names a judge connection a server"):
        judge_configs_of(run({"judges": {"default": {"connection": "good", "model": "judge"}}}))
    with pytest.raises(BadInputError, match=r"^spec\.target\.model\.connection: 'good' names a connection a server"):
        LocalEndpoints().model_config(ModelTarget(connection="good", model="judge"))
    with pytest.raises(BadInputError, match=r"^spec\.target\.agent\.connection: 'shop' names an agent a server"):
        open_transport(run({"target": {"agent": {"connection": "shop"}}}).spec.target.agent, {})


def test_evalsi_serve_hands_its_children_the_connections_in_a_private_file(tmp_path: Path) -> None:
    from evalsi.service.supervisor import plan_children

    config = Config.from_mapping({"judges": JUDGES, "agents": AGENTS})
    children = plan_children(config, "nats://127.0.0.1:4222", tmp_path)
    # Every child but sandboxd, which runs untrusted code and so holds no connection (no provider key) at all.
    paths = {child.env[CONNECTIONS_ENV] for child in children if child.name != "sandboxd"}
    assert paths == {str(tmp_path / "connections.json")}
    assert [CONNECTIONS_ENV not in child.env for child in children if child.name == "sandboxd"] == [True]
    assert stat.S_IMODE((tmp_path / "connections.json").stat().st_mode) == 0o600
    assert Connections.load(tmp_path / "connections.json") == config.connections
    # References only: no argv and no file carries a credential's value, only where to read it.
    assert all("JUDGE_KEY" not in " ".join(child.argv) for child in children)


def test_harness_tools_must_name_functions() -> None:
    with pytest.raises(BadInputError, match=r"^evalsi.yaml: harness_tools\[0\]: expected \"package.module:function\""):
        Config.from_mapping({"harness_tools": ["os.getenv"]})
