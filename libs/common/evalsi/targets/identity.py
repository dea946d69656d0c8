"""What a target is: how it generates (its kind), the identity the manifest and provenance record, what the
manifest cannot pin, and what is wrong with an agent or harness spec. Pure functions of the spec."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from evalsi.errors import BadInputError
from evalsi.harness import Pricing, config_from_mapping
from evalsi.harness.config import DEFAULT_MAX_STEPS
from evalsi.harness.environment import MAX_ENV_BYTES, environment_from_mapping
from evalsi.records import struct_dict
from evalsi.sandbox.config import MAX_TIMEOUT_S
from evalsi.targets.config import target_config, target_prices
from evalsi.v1alpha1.run_pb2 import AgentTarget, HarnessSpec, ModelTarget, RunSpec, Target

if TYPE_CHECKING:
    from evalsi.harness import HarnessConfig
    from evalsi.targets.models import Endpoints

OUTPUTS_GIVEN = "outputs given"
_JSON_NAMES = {"openai_responses": "openaiResponses"}


def generation_kind(target: Target, harness: HarnessSpec | None = None) -> str:
    """How a run gets its outputs: ``outputs`` (given), ``model``, ``agent`` or ``harness`` (the built-in
    reference agent on the target model)."""
    kind = target.WhichOneof("kind") or "outputs"
    if kind == "model" and harness is not None and harness.HasField("builtin"):
        return "harness"
    return kind


def _where(kind: str) -> str:
    return f"spec.target.agent.{_JSON_NAMES.get(kind, kind)}"


def agent_identity(agent: AgentTarget) -> str:
    """What the manifest and provenance name: ``agent:http:http://host:8080 (agent shop)``."""
    kind = agent.WhichOneof("kind")
    if kind == "http":
        return f"agent:http:{agent.http.url} (agent {agent.http.agent})"
    if kind == "a2a":
        return f"agent:a2a:{agent.a2a.url}"
    if kind == "openai_responses":
        return f"agent:openai-responses:{agent.openai_responses.model} @ {agent.openai_responses.base_url}"
    if kind == "python":
        return f"agent:python:{agent.python.callable}"
    if kind == "connection":
        return f"agent:connection:{agent.connection}"
    if kind == "cli":
        return "agent:cli:" + " ".join(agent.cli.command)[:200]
    return "agent:unknown"


def harness_identity(spec: RunSpec) -> str:
    """``evalsi-harness(maxSteps=5, tools=[py:tools:get_weather]) on openai-compatible:m @ http://host/v1``."""

    builtin = spec.harness.builtin
    tools = [f"py:{t}" for t in builtin.tools.python] + [f"mcp:{m.url or ' '.join(m.command)}" for m in
                                                         builtin.tools.mcp]
    model = spec.target.model
    head = f"evalsi-harness(maxSteps={builtin.max_steps or DEFAULT_MAX_STEPS}, tools=[{', '.join(tools)}]) on "
    if model.connection:
        return head + model_connection_identity(model)
    config = target_config(model)
    return head + f"{model.connector or 'openai'}:{config.model} @ {config.base_url}"


def _url_problem(where: str, url: str) -> str | None:
    if not url:
        return f"{where}: required (the agent's http:// or https:// URL)"
    if not url.startswith(("http://", "https://")):
        return f"{where}: expected an http:// or https:// URL, got {url!r}"
    return None


def agent_problems(agent: AgentTarget) -> list[str]:
    """What is wrong with ``spec.target.agent``, each naming its field path."""
    kind = agent.WhichOneof("kind")
    if kind is None:
        return ["spec.target.agent: give one transport: http (docs/agent-protocol.md), a2a, openaiResponses or "
                "python (an in-process callable)"]
    where = _where(kind)
    problems: list[str | None] = []
    if kind == "http":
        problems.append(_url_problem(f"{where}.url", agent.http.url))
        if not agent.http.agent:
            problems.append(f"{where}.agent: required (the agent id the deployment serves, sent with every turn)")
    elif kind == "a2a":
        problems.append(_url_problem(f"{where}.url", agent.a2a.url))
    elif kind == "openai_responses":
        problems.append(_url_problem(f"{where}.baseUrl", agent.openai_responses.base_url))
        if not agent.openai_responses.model:
            problems.append(f"{where}.model: required (the model or agent the endpoint answers as)")
    elif kind == "connection":
        if not agent.connection:
            problems.append(f"{where}: required (the name of an agent the server configures)")
    elif kind == "cli":
        problems += _cli_problems(agent, where)
    else:
        module, sep, attr = agent.python.callable.partition(":")
        if not (module and sep and attr):
            problems.append(f"{where}.callable: expected \"package.module:callable\", got {agent.python.callable!r}")
    for name in ("http", "a2a"):
        if kind == name and getattr(agent, name).HasField("timeout"):
            timeout = getattr(agent, name).timeout
            if timeout.seconds < 0 or timeout.nanos < 0 or timeout.ToNanoseconds() == 0:
                problems.append(f"{where}.timeout: must be longer than zero")
    return [p for p in problems if p]


MAX_CLI_ARGS = 256
MAX_CLI_CHARS = 16 * 1024
MAX_CLI_ENV = 64


def _cli_problems(agent: AgentTarget, where: str) -> list[str | None]:
    cli = agent.cli
    problems: list[str | None] = []
    if not cli.command or not cli.command[0]:
        problems.append(f"{where}.command: required (the agent's argv, run in the environment's sandbox)")
    if len(cli.command) > MAX_CLI_ARGS or sum(len(a) for a in cli.command) > MAX_CLI_CHARS \
            or any("\0" in a for a in cli.command):
        problems.append(f"{where}.command: at most {MAX_CLI_ARGS} arguments and {MAX_CLI_CHARS} characters, "
                        "without NUL")
    if cli.HasField("timeout") and not 0 < cli.timeout.ToNanoseconds() <= MAX_TIMEOUT_S * 1e9:
        problems.append(f"{where}.timeout: must be longer than zero and at most {MAX_TIMEOUT_S:g}s")
    if len(cli.env) > MAX_CLI_ENV or any(not k or "=" in k or "\0" in k + v for k, v in cli.env.items()) \
            or sum(len(k) + len(v) for k, v in cli.env.items()) > MAX_ENV_BYTES:
        problems.append(f"{where}.env: at most {MAX_CLI_ENV} variables of {MAX_ENV_BYTES} characters in all, names "
                        "without '=' and values without NUL")
    return problems


def _environment_problems(spec: RunSpec) -> list[str]:
    if not spec.harness.HasField("environment"):
        return []
    try:
        environment_from_mapping(struct_dict(spec.harness, "environment"), "spec.harness.environment")
    except BadInputError as exc:
        return [str(exc)]
    return []


def harness_problems(spec: RunSpec) -> list[str]:
    """What is wrong with ``spec.harness`` given the target, each naming its field path."""
    kind = spec.target.WhichOneof("kind")
    if kind == "agent" and spec.target.agent.WhichOneof("kind") == "cli":
        if spec.harness.HasField("builtin"):
            return ["spec.harness.builtin: a CLI agent runs its own loop; give only spec.harness.environment"]
        return _environment_problems(spec)
    if not spec.harness.HasField("builtin"):
        if spec.harness.HasField("environment"):
            return ["spec.harness.environment: an environment is worked in by the built-in harness (give "
                    "spec.harness.builtin and target.model) or a CLI agent (target.agent.cli)"]
        return ["spec.harness: give builtin (the built-in reference agent); no other harness is built yet"]
    if kind == "agent":
        return ["spec.harness.builtin: the built-in harness runs the reference agent on spec.target.model; an agent "
                "target runs its own loop and tools (giving it the harness's tools, budgets or simulated user is "
                "not built yet): remove spec.harness, or use target.model"]
    if kind != "model":
        return ["spec.harness.builtin: needs spec.target.model, the model the reference agent runs on"]
    builtin = spec.harness.builtin
    problems = []
    if builtin.HasField("user_simulator"):
        problems.append("spec.harness.builtin.userSimulator: the simulated user is not built yet in runs; remove it "
                        "(persona cases run with `evalsi cases simulate`)")
    if builtin.max_steps < 0:
        problems.append(f"spec.harness.builtin.maxSteps: must be >= 1 (0 means the default), got {builtin.max_steps}")
    if builtin.budget.usd and target_prices(spec.target.model) is None:
        problems.append("spec.harness.builtin.budget.usd: needs the target's prices (price_per_1k_input and "
                        "price_per_1k_output in spec.target.model.params) to count dollars")
    problems += _environment_problems(spec)
    if problems:
        return problems
    try:
        target_config(spec.target.model)
    except BadInputError:
        return problems  # the model target's own checks report it
    try:
        harness_config_of(spec)
    except BadInputError as exc:
        problems.append(str(exc))
    return problems


def harness_config_of(spec: RunSpec, *, seed: int | None = None, endpoints: Endpoints | None = None) -> HarnessConfig:
    """The reference agent's config: the target model (its connector, params and system prompt, ``seed`` when
    given), prices per million tokens from the target's per-thousand prices, and the BuiltinHarness's step limit,
    per-task budget and tools. Errors name ``spec.harness.builtin``."""

    builtin = spec.harness.builtin
    budget: dict[str, Any] = {}
    if builtin.budget.tokens:
        budget["tokens"] = builtin.budget.tokens
    if builtin.budget.usd:
        budget["usd"] = builtin.budget.usd
    if builtin.budget.HasField("wall_clock"):
        budget["wall_clock"] = builtin.budget.wall_clock.ToTimedelta().total_seconds()
    prices = target_prices(spec.target.model)
    document: dict[str, Any] = {
        # The model is the target's, built below; this stand-in only lets the shared validation run.
        "model": {"model": "target"},
        "budget": budget,
        "tools": {"python": list(builtin.tools.python),
                  "mcp": [{"url": m.url} if m.url else {"command": list(m.command)} for m in builtin.tools.mcp]},
        "seed": max(0, spec.seed),
    }
    if builtin.max_steps:
        document["max_steps"] = builtin.max_steps
    if prices is not None:
        document["pricing"] = {"input_per_mtok": prices[0] * 1000, "output_per_mtok": prices[1] * 1000}
    config = config_from_mapping(document, source="spec.harness.builtin")
    pricing = Pricing(prices[0] * 1000, prices[1] * 1000) if prices is not None else None
    # No endpoints: validation, which names no credential and calls nothing.
    model = (endpoints.model_config(spec.target.model, seed=seed) if endpoints is not None
             else target_config(spec.target.model, seed=seed))
    return dataclasses.replace(config, model=model,
                               system=spec.target.model.system_prompt, pricing=pricing)


def model_connection_identity(model: ModelTarget) -> str:
    """``connection:judges-a:my-model``: a served model target, by the names the server resolves."""
    return f"connection:{model.connection}:{model.model or '(its default model)'}"


def target_identity(target: Target, harness: HarnessSpec | None = None) -> str:
    """What the manifest and provenance record: ``openai-compatible:my-model @ http://host/v1``, the agent
    (``agent:http:http://host:8080 (agent shop)``) or the reference agent and its model (``evalsi-harness(...) on
    openai-compatible:my-model @ http://host/v1``)."""

    kind = generation_kind(target, harness)
    if kind == "harness":
        assert harness is not None  # generation_kind says harness
        return harness_identity(RunSpec(target=target, harness=harness))
    if kind == "model":
        if target.model.connection:
            return model_connection_identity(target.model)
        config = target_config(target.model)
        return f"{target.model.connector or 'openai'}:{config.model} @ {config.base_url}"
    if kind == "agent":
        return agent_identity(target.agent)
    return OUTPUTS_GIVEN


def unpinned_target(spec: RunSpec) -> str:
    """What the manifest cannot pin about the target ("" for outputs given): a served model or agent."""

    kind = generation_kind(spec.target, spec.harness)
    if kind in ("model", "harness"):
        model = spec.target.model
        if model.connection:
            return f"target: {model_connection_identity(model)} is served by an API and cannot be pinned"
        return f"target: {model.connector or 'openai'} model {model.model!r} is served by an API and cannot be pinned"
    if kind == "agent":
        return f"target: {target_identity(spec.target)} is a running deployment and cannot be pinned"
    return ""
