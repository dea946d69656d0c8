"""``logfire@1`` (``mappers.LOGFIRE``): spans from Pydantic Logfire (``logfire.span``, ``@logfire.instrument``,
``logfire.info``, and its
LLM integrations such as ``logfire.instrument_openai``/``instrument_anthropic`` and Pydantic AI).

Every Logfire span has ``logfire.span_type`` (``span``, ``log``, ``pending_span``), ``logfire.msg_template`` and
``logfire.msg``; values that are not plain strings or numbers are JSON-encoded, and ``logfire.json_schema`` lists
which attributes are the call's own data (its arguments, ``return``):
- LLM spans: newer versions write the OTel GenAI attributes (``gen_ai.operation.name``, models, usage,
  ``gen_ai.input.messages``/``gen_ai.output.messages`` as JSON), read as ``genai@1`` reads them; what they lack is
  taken from ``request_data`` (the request body: ``model``, ``messages``, Anthropic's ``system``) and
  ``response_data`` (``{"message", "usage"}``), which every version writes;
- tool spans (Pydantic AI's ``execute_tool``): ``gen_ai.tool.*``, else its ``tool_arguments``/``tool_response``;
- other spans and logs: GENERIC, the input the arguments ``logfire.json_schema`` names, the output ``return``;
- a ``pending_span`` is the placeholder Logfire sends when a span starts (its parent is the real span): it is
  marked ``evalsi.placeholder``, and assembly leaves it out once the real span has arrived.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from evalsi.records import to_value
from evalsi.traces.model import PLACEHOLDER
from evalsi.v1alpha1.record_pb2 import STEP_TYPE_GENERIC, STEP_TYPE_LLM, STEP_TYPE_TOOL, Content, Messages, Step

from . import genai_mapper
from .genai_mapper import set_usage
from .messages import messages_content, messages_from_json, parse_json

# Attributes Logfire's schema lists that are not the call's arguments.
_NOT_ARGUMENTS = ("return", "request_data", "response_data", "events", "tool_arguments", "tool_response")


def matches(attrs: Mapping[str, Any]) -> bool:
    return "logfire.span_type" in attrs or "logfire.msg_template" in attrs


def _request_messages(request: Mapping[str, Any]) -> Messages | None:
    messages = request.get("messages")
    if not isinstance(messages, list):
        return None
    system = request.get("system")  # Anthropic's request puts the system prompt beside the messages
    return messages_from_json(messages, system=system if isinstance(system, str | list) else None)


def _response_messages(response: Mapping[str, Any]) -> Messages | None:
    message = response.get("message")
    if isinstance(message, Mapping):
        return messages_from_json([{**message, "role": message.get("role") or "assistant"}])
    if isinstance(response.get("combined_chunk_content"), str):  # a streamed answer
        return messages_from_json([{"role": "assistant", "content": response["combined_chunk_content"]}])
    return None


def _fill_llm(step: Step, request: Mapping[str, Any], response: Any) -> None:
    if step.type == STEP_TYPE_GENERIC:
        step.type = STEP_TYPE_LLM
    if not step.model:
        step.model = str(request.get("model") or "")
    if not step.HasField("input") and (content := messages_content(_request_messages(request))) is not None:
        step.input.CopyFrom(content)
    if isinstance(response, Mapping):
        if not step.HasField("output") and (content := messages_content(_response_messages(response))) is not None:
            step.output.CopyFrom(content)
        usage = response.get("usage")
        if not step.HasField("usage") and isinstance(usage, Mapping):
            set_usage(step, usage.get("prompt_tokens", usage.get("input_tokens")),
                       usage.get("completion_tokens", usage.get("output_tokens")), usage.get("total_tokens"))


def _arguments(attrs: Mapping[str, Any]) -> dict[str, Any]:
    schema = parse_json(attrs.get("logfire.json_schema"))
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return {}
    return {name: parse_json(attrs[name]) if isinstance(spec, Mapping) and spec.get("type") in ("object", "array")
            else attrs[name]
            for name, spec in properties.items()
            if name in attrs and name not in _NOT_ARGUMENTS and not name.startswith(("gen_ai.", "logfire."))}


def fill(attrs: Mapping[str, Any], span: Span, step: Step) -> None:
    if attrs.get("logfire.span_type") == "pending_span":
        step.type = STEP_TYPE_GENERIC
        step.attributes[PLACEHOLDER].bool_value = True
        return
    if any(key.startswith("gen_ai.") for key in attrs):
        genai_mapper.fill(attrs, span, step)
    else:
        step.type = STEP_TYPE_GENERIC
    request = parse_json(attrs.get("request_data"))
    if isinstance(request, Mapping) and ("messages" in request or step.type == STEP_TYPE_LLM):
        _fill_llm(step, request, parse_json(attrs.get("response_data")))
        return
    if step.type == STEP_TYPE_TOOL:
        if not step.tool_call.HasField("arguments") and "tool_arguments" in attrs:
            step.tool_call.arguments.CopyFrom(to_value(parse_json(attrs["tool_arguments"])))
        if not step.tool_call.HasField("result") and "tool_response" in attrs:
            step.tool_call.result.CopyFrom(to_value(parse_json(attrs["tool_response"])))
    if not step.HasField("input") and (arguments := _arguments(attrs)):
        step.input.CopyFrom(Content(json=to_value(arguments)))
    if not step.HasField("output") and "return" in attrs:
        result = parse_json(attrs["return"])
        step.output.CopyFrom(Content(text=result) if isinstance(result, str) else Content(json=to_value(result)))

