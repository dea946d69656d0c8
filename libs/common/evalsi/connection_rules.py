"""What a request or spec may name on a server: connections the server's configuration defines, nothing else.

A judge (``JudgeSpec``) names a judge connection (``connection``, or its own key when empty) and may choose a
model among the connection's ``models`` and a prompt template; a model target (``ModelTarget``) names a connection
the same way and adds its prompt and sampling params; an agent target names an agent connection; the built-in
harness gets only the python tools the server lists (``harness_tools``) and no MCP server. Every field that
would choose an endpoint or a credential (``baseUrl``, ``apiKeyEnv``, ``secretRef``, ``connector``, an agent's
``url``) or a call policy the server owns (timeouts, retries, rate limits) is refused with the field's path and
what is accepted. The api checks this before anything is stored or sent; the worker that makes the call resolves
the name again against its own configuration and never uses an endpoint or credential a bus message carries.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from evalsi.cases.transport import HttpTransport
from evalsi.cases.transport_a2a import A2ATransport
from evalsi.cases.transport_responses import ResponsesTransport
from evalsi.cli_agent_policy import CliAgentPolicy, cli_problems, granted
from evalsi.connections import Connections, JudgeConnection
from evalsi.errors import BadInputError
from evalsi.judges.config import JudgeConfig
from evalsi.records import struct_dict
from evalsi.targets.config import TARGET_CALL_PARAMS
from evalsi.v1alpha1.evaluator_pb2 import JudgeSpec
from evalsi.v1alpha1.run_pb2 import AgentTarget, EvalRun, HarnessSpec, ModelTarget

if TYPE_CHECKING:
    from evalsi.cases.transport import Transport
    from evalsi.evaluators import Registry
    from evalsi.policy import CompiledPolicy
    from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest

JUDGE_FIELDS = frozenset({"connection", "model", "template"})
MODEL_FIELDS = frozenset({"connection", "model", "params", "prompt_template", "system_prompt"})
# Call policy the connection owns: a caller raising them could stall a pool or overrun the provider's quota.
CONNECTION_PARAMS = ("timeout_s", "max_retries", "rpm", "tpm")
_TEMPLATE = re.compile(r"^[^\s@]+@[^\s@]+$")


def judge_config(connections: Connections, name: str, spec: JudgeSpec | None, project: str,
                 where: str) -> JudgeConfig:
    """The call config of judge ``name`` (``spec`` from the request, None when the request names it only in an
    evaluator); ``BadInputError`` naming ``where`` when the server does not offer it to ``project``."""
    spec = spec if spec is not None else JudgeSpec()
    _refuse_fields(spec, JUDGE_FIELDS, where, "a judge")
    if spec.template and not _TEMPLATE.match(spec.template):
        raise BadInputError(f"{where}.template: must be \"name@version\" (e.g. pairwise@1), got {spec.template!r}")
    connection = connections.judge(spec.connection or name, project,
                                   f"{where}.connection" if spec.connection else where)
    model = _model(connection, spec.model, f"{where}.model")
    return connection.config(name=name, model=model, template=spec.template or None)


def model_config(connections: Connections, model: ModelTarget, project: str, *, seed: int | None = None,
                 where: str = "spec.target.model") -> JudgeConfig:
    """The call config of a model target over its connection: the spec's params on the connection's (no
    temperature imposed, as embedded), prices and the connection's call policy left to their owners."""

    _refuse_fields(model, MODEL_FIELDS, where, "a model target")
    if not model.connection:
        raise BadInputError(f"{where}.connection: required on a server (a model connection it configures); "
                            f"accepted for project {project!r}: {_offered(connections.judges, project)}")
    connection = connections.judge(model.connection, project, f"{where}.connection")
    name = _model(connection, model.model, f"{where}.model")
    params = struct_dict(model, "params")
    for key in CONNECTION_PARAMS:
        if key in params:
            raise BadInputError(f"{where}.params.{key}: set by the server's connection {connection.name!r}")
    params = {key: value for key, value in params.items() if key not in TARGET_CALL_PARAMS}
    if seed is not None:
        params["seed"] = seed
    config = connection.config(name="target", model=name)
    return dataclasses.replace(config, params={"temperature": None, **connection.params, **params})


def agent_transport(connections: Connections, agent: AgentTarget, project: str,
                    where: str = "spec.target.agent") -> tuple[Transport, str]:
    """The transport to a configured agent, its token read here (the worker) and sent only to its own URL."""

    connection = connections.agent(_agent_name(connections, agent, project, where), project, f"{where}.connection")
    token = connection.token.read()
    if connection.protocol == "http":
        return HttpTransport(connection.url, token=token, timeout=connection.timeout_s), connection.agent
    if connection.protocol == "a2a":
        return A2ATransport(connection.url, token=token, timeout=connection.timeout_s), "agent"
    return (ResponsesTransport(connection.url, model=connection.model, token=token, timeout=connection.timeout_s),
            connection.model)


def evaluate_problems(connections: Connections, request: EvaluateRequest, project: str,
                      registry: Registry | None) -> list[str]:
    """What a served Evaluate names that the server does not offer ``project``, each naming its field (the
    judges its evaluators use by name too, given the ``registry`` that says which evaluators need one)."""
    problems = _judges_problems(connections, request.judges, project, "judges")
    if registry is None:
        return problems
    for index, ref in enumerate(request.evaluators):
        try:
            evaluator = registry.resolve(ref.ref)
        except BadInputError:
            continue  # the request's own checks report it
        name = ref.judge or "default"
        if "judge" in evaluator.requires and name not in request.judges:
            problems += _problem(judge_config, connections, name, None, project, f"evaluators[{index}].judge")
    return problems


def run_problems(connections: Connections, run: EvalRun, project: str) -> list[str]:
    """What a served run spec names that the server does not offer ``project``, each naming its field."""
    spec = run.spec
    problems = _judges_problems(connections, spec.judges, project, "spec.judges")
    kind = spec.target.WhichOneof("kind")
    if kind == "model":
        problems += _problem(model_config, connections, spec.target.model, project)
    elif kind == "agent" and spec.target.agent.WhichOneof("kind") == "cli":  # the operator's cli_agents: policy
        problems += cli_problems(connections.cli_agents, run, project)
    elif kind == "agent":
        problems += _problem(_agent_name, connections, spec.target.agent, project, "spec.target.agent")
    problems += harness_problems(connections, spec.harness)
    return problems


def harness_problems(connections: Connections, harness: HarnessSpec) -> list[str]:
    """The harness tools a served spec gives that the server does not offer: python tools outside its
    ``harness_tools``, and every MCP tool server."""
    problems = []
    where = "spec.harness.builtin.tools"
    offered = ", ".join(connections.harness_tools) or "none (the server's evalsi.yaml harness_tools: lists none)"
    for index, tool in enumerate(harness.builtin.tools.python):
        if tool not in connections.harness_tools:
            problems.append(f"{where}.python[{index}]: {tool!r} is not a tool the server offers (a tool runs in the "
                            f"worker with its environment); accepted: {offered}")
    for index, mcp in enumerate(harness.builtin.tools.mcp):
        # A URL the caller chose, or a command the worker would start: neither is the server's to offer yet.
        field = "url" if mcp.url else "command"
        problems.append(f"{where}.mcp[{index}].{field}: MCP tool servers are not accepted on a server (a "
                        "caller-chosen address or command); use the server's python tools, or run the harness embedded")
    return problems


def policy_problems(connections: Connections, policy: CompiledPolicy, project: str) -> list[str]:
    """The judges a policy's stages use that the server does not offer ``project``."""
    problems: list[str] = []
    for index, stage in enumerate(policy.cascade.stages):
        if "judge" in stage.bound.evaluator.requires:
            problems += _problem(judge_config, connections, stage.bound.judge, None, project,
                                 f"policy.spec.cascade[{index}].judge")
    return problems


def refuse(problems: Sequence[str]) -> None:
    """One ``BadInputError`` listing ``problems`` (nothing when there are none)."""
    if len(problems) == 1:
        raise BadInputError(problems[0])
    if problems:
        raise BadInputError(f"{len(problems)} problems:\n" + "\n".join(f"  - {p}" for p in problems))


def _judges_problems(connections: Connections, judges: Mapping[str, JudgeSpec], project: str,
                     where: str) -> list[str]:
    problems: list[str] = []
    for name in sorted(judges):
        problems += _problem(judge_config, connections, name, judges[name], project, f"{where}.{name}")
    return problems


def _problem(check: Any, *args: Any) -> list[str]:
    try:
        check(*args)
    except BadInputError as exc:
        return [str(exc)]
    return []


def _agent_name(connections: Connections, agent: AgentTarget, project: str, where: str) -> str:
    kind = agent.WhichOneof("kind")
    if kind != "connection":
        given = f"{where}.{_JSON.get(kind or '', kind)}" if kind else where
        raise BadInputError(f"{given}: on a server an agent target names a configured agent ({where}.connection), "
                            f"never an address or code of its own; accepted for project {project!r}: "
                            f"{_offered(connections.agents, project)}")
    connections.agent(agent.connection, project, f"{where}.connection")
    return agent.connection


_JSON = {"openai_responses": "openaiResponses"}


def _refuse_fields(message: Any, allowed: frozenset[str], where: str, what: str) -> None:
    refused = [f"{where}.{descriptor.json_name}" for descriptor, _ in message.ListFields()
               if descriptor.name not in allowed]
    if refused:
        accepted = ", ".join(sorted(_camel(name) for name in allowed))
        raise BadInputError(f"{', '.join(refused)}: not accepted on a server, where {what} names a connection the "
                            f"server configures; accepted fields: {accepted}")


def _model(connection: JudgeConnection, model: str, where: str) -> str:
    if model and model not in connection.models:
        raise BadInputError(f"{where}: {model!r} is not offered by connection {connection.name!r}; accepted: "
                            f"{', '.join(connection.models)}")
    return model or connection.model


def _offered(section: Mapping[str, Any], project: str) -> str:
    names = sorted(n for n, c in section.items() if not c.projects or project in c.projects)
    return ", ".join(names) if names else "none"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


@dataclasses.dataclass(frozen=True)
class ServerEndpoints:
    """A worker's generation endpoints: the target's connection resolved for ``project`` against this process's
    own configuration (``evalsi.targets.models.Endpoints``); what a bus message says about addresses is never used."""

    connections: Connections
    project: str

    def model_config(self, model: ModelTarget, *, seed: int | None = None) -> JudgeConfig:
        return model_config(self.connections, model, self.project, seed=seed)

    def agent_transport(self, agent: AgentTarget) -> tuple[Transport, str]:
        return agent_transport(self.connections, agent, self.project)

    def check_harness(self, harness: HarnessSpec) -> None:
        refuse(harness_problems(self.connections, harness))

    def cli_policy(self) -> CliAgentPolicy | None:
        """The server's CLI agent policy for this project; ``BadInputError`` naming the setting when it refuses."""
        return granted(self.connections.cli_agents, self.project)


def pin_models(connections: Connections, run: EvalRun) -> None:
    """Write the connection and the model it defaults to into a checked spec's judges and model target, so the
    stored spec and its hash name what answers."""
    for name, spec in run.spec.judges.items():
        spec.connection = spec.connection or name
        if not spec.model:
            spec.model = connections.judges[spec.connection].model
    model = run.spec.target.model
    if run.spec.target.WhichOneof("kind") == "model" and model.connection and not model.model:
        model.model = connections.judges[model.connection].model
