"""The case transport an embedded run opens for an agent target (http, a2a, OpenAI Responses, a Python callable)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from evalsi.cases.transport import CallableTransport, HttpTransport
from evalsi.cases.transport_a2a import A2ATransport
from evalsi.cases.transport_responses import ResponsesTransport
from evalsi.errors import BadInputError
from evalsi.targets.identity import _where, agent_problems
from evalsi.v1alpha1.run_pb2 import AgentTarget

if TYPE_CHECKING:
    from evalsi.cases.transport import Transport

DEFAULT_AGENT_TIMEOUT_S = 120.0
AGENT_TOKEN_ENV = "EVALSI_AGENT_TOKEN"  # the Bearer token sent to http and a2a agents, as `evalsi cases run`


def _duration_s(message: Any, field: str) -> float:
    if not message.HasField(field):
        return DEFAULT_AGENT_TIMEOUT_S
    return float(getattr(message, field).ToTimedelta().total_seconds())


def open_transport(agent: AgentTarget, environ: Mapping[str, str]) -> tuple[Transport, str]:
    """The case transport for ``agent`` and the agent name its turns carry."""
    problems = agent_problems(agent)
    if problems:
        raise BadInputError("; ".join(problems))
    kind = agent.WhichOneof("kind")
    if kind == "connection":
        raise BadInputError(f"{_where(kind)}: {agent.connection!r} names an agent a server configures; an embedded "
                            "run gives http, a2a, openaiResponses or python instead")
    token = environ.get(AGENT_TOKEN_ENV) or None
    if kind == "http":
        return HttpTransport(agent.http.url, token=token, timeout=_duration_s(agent.http, "timeout")), agent.http.agent
    if kind == "a2a":
        return A2ATransport(agent.a2a.url, token=token, timeout=_duration_s(agent.a2a, "timeout")), "agent"
    if kind == "openai_responses":
        responses = agent.openai_responses
        key = environ.get(responses.api_key_env) if responses.api_key_env else token
        return ResponsesTransport(responses.base_url, model=responses.model, token=key or None), responses.model
    try:
        return CallableTransport.from_spec(agent.python.callable), "agent"
    except BadInputError as exc:
        raise BadInputError(f"{_where('python')}.callable: {str(exc).removeprefix('--agent-callable ')}") from None
