"""``genai@1`` (``mappers.GENAI``), the OTel GenAI conventions, and the helpers every mapper shares.

OpenLLMetry's and Logfire's LLM spans carry the GenAI attributes too, so ``mappers``, ``logfire_mapper`` and
``mlflow_mapper`` all import this module (it imports none of them): ``fill`` reads ``gen_ai.operation.name``,
``gen_ai.request.model``/``response.model``, ``gen_ai.usage.*``, ``gen_ai.tool.*``, and
``gen_ai.input.messages``/``gen_ai.output.messages`` as attributes or on the
``gen_ai.client.inference.operation.details`` event, else the older per-message span events; ``set_usage`` is the one
rule for writing token counts into a step, ``set_cost`` the one for a cost an instrumentation sent (the GenAI
conventions define no cost attribute; OpenInference's ``llm.cost.*`` do).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from itertools import repeat
from typing import Any

from google.protobuf.struct_pb2 import Value
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from evalsi.traces.otlp import attributes_to_dict
from evalsi.v1alpha1.record_pb2 import (
    STEP_TYPE_AGENT,
    STEP_TYPE_CHAIN,
    STEP_TYPE_EMBEDDING,
    STEP_TYPE_GENERIC,
    STEP_TYPE_LLM,
    STEP_TYPE_RERANK,
    STEP_TYPE_RETRIEVAL,
    STEP_TYPE_TOOL,
    Content,
    Messages,
    Step,
    StepType,
)

from .messages import content_of, messages_content, messages_from_json, parse_json, tool_call

# --- helpers every mapper uses -------------------------------------------------------------------------


def to_int(value: Any) -> int:
    # Most usage attributes are absent or already ints: no int() call, and no TypeError raised and caught for None.
    if value is None:
        return 0
    if type(value) is int:
        return value
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def first(attrs: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        value = attrs.get(key)
        if value not in (None, ""):
            return value
    return None


def _either(get: Any, key: str, other: str) -> Any:
    """``first(attrs, key, other)`` for ``get``, ``attrs.get``: the first value neither None nor ""."""
    value = get(key)
    if value is None or value == "":
        value = get(other)
        if value is None or value == "":
            return None
    return value


def set_usage(step: Step, inputs: Any, outputs: Any, total: Any = None, cached: Any = None,
               reasoning: Any = None) -> None:
    i, o = to_int(inputs), to_int(outputs)
    t = to_int(total) or i + o
    if not (i or o or t or to_int(cached) or to_int(reasoning)):
        return
    step.usage.input_tokens, step.usage.output_tokens, step.usage.total_tokens = i, o, t
    step.usage.cached_input_tokens = to_int(cached)
    step.usage.reasoning_tokens = to_int(reasoning)


def to_cost(value: Any) -> float | None:
    """A cost in USD from an attribute: a finite, non-negative number (or its text); None for anything else, so a
    malformed cost reads as unknown, never as free."""
    if value is None:
        return None
    try:
        cost = float(value)
    except (TypeError, ValueError):
        return None
    return cost if 0.0 <= cost < math.inf else None


def set_cost(step: Step, total: Any, prompt: Any = None, completion: Any = None) -> None:
    """The step's cost as the instrumentation sent it: the total, else the sum of the parts it sent. Nothing is
    written when none is a cost, so the step's cost stays unknown (unset), not zero."""
    cost = to_cost(total)
    if cost is None:
        parts = [c for c in (to_cost(prompt), to_cost(completion)) if c is not None]
        if not parts:
            return
        cost = sum(parts)
    step.usage.cost_usd = cost


def set_field(step: Step, field_name: str, content: Content | None) -> None:
    if content is not None:
        getattr(step, field_name).CopyFrom(content)


def set_content(content: Content, raw: Any, parsed: Value) -> None:
    """``content_of(raw)`` into ``content``, reusing ``parsed`` (``raw`` already decoded) when it is an object or
    array: content_of decodes exactly those raw values to JSON."""
    if parsed.WhichOneof("kind") in ("struct_value", "list_value"):
        content.json.CopyFrom(parsed)
    elif (decoded := content_of(raw)) is not None:
        content.CopyFrom(decoded)


# --- the genai@1 mapper --------------------------------------------------------------------------------

_GENAI_TYPES: dict[str, StepType] = {
    "chat": STEP_TYPE_LLM,
    "text_completion": STEP_TYPE_LLM,
    "generate_content": STEP_TYPE_LLM,
    "completion": STEP_TYPE_LLM,
    "embeddings": STEP_TYPE_EMBEDDING,
    "embedding": STEP_TYPE_EMBEDDING,
    "execute_tool": STEP_TYPE_TOOL,
    "invoke_agent": STEP_TYPE_AGENT,
    "create_agent": STEP_TYPE_AGENT,
    "invoke_workflow": STEP_TYPE_CHAIN,
    "retrieval": STEP_TYPE_RETRIEVAL,
    "rerank": STEP_TYPE_RERANK,
}
_EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
_DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_NO_USAGE = (None, None, None, None, None)


def matches(attrs: Mapping[str, Any]) -> bool:
    # map() of a C method rather than a generator: this runs for nearly every span.
    return any(map(str.startswith, attrs, repeat("gen_ai.")))


def _genai_event_messages(span: Span) -> tuple[Messages | None, Messages | None]:
    """The event forms: the operation-details event, else one event per message (``gen_ai.choice`` for outputs)."""
    inputs: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    for event in span.events:
        attrs = attributes_to_dict(event.attributes)
        if event.name == _DETAILS_EVENT:
            return (
                messages_from_json(attrs.get("gen_ai.input.messages"), system=attrs.get("gen_ai.system_instructions")),
                messages_from_json(attrs.get("gen_ai.output.messages")),
            )
        if event.name in _EVENT_ROLES:
            inputs.append({"role": _EVENT_ROLES[event.name], **attrs})
        elif event.name == "gen_ai.choice":
            message = parse_json(attrs.get("message"))
            outputs.append({"role": "assistant", **(message if isinstance(message, Mapping) else attrs)})
    return (messages_from_json(inputs) if inputs else None, messages_from_json(outputs) if outputs else None)


def fill(attrs: Mapping[str, Any], span: Span, step: Step) -> None:
    # This runs for most spans: an absent attribute costs a dict lookup, not a call (usage, messages).
    get = attrs.get
    operation = str(get("gen_ai.operation.name") or "")
    step.type = _GENAI_TYPES.get(operation, STEP_TYPE_LLM if "gen_ai.request.model" in attrs else STEP_TYPE_GENERIC)
    model = _either(get, "gen_ai.response.model", "gen_ai.request.model")
    if model:  # else "": the field's default
        step.model = str(model)
    usage = (_either(get, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"),
             _either(get, "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"),
             get("gen_ai.usage.total_tokens"),
             _either(get, "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens"),
             get("gen_ai.usage.reasoning.output_tokens"))
    if usage != _NO_USAGE:  # set_usage writes nothing when every count is absent
        set_usage(step, *usage)
    # Written straight into the step: a field is set only once a message is added to it. An absent attribute is
    # no list of messages (messages_from_json would answer None).
    raw_inputs, raw_outputs = get("gen_ai.input.messages"), get("gen_ai.output.messages")
    inputs = None if raw_inputs is None else messages_from_json(
        raw_inputs, system=get("gen_ai.system_instructions"), into=step.input.messages)
    outputs = None if raw_outputs is None else messages_from_json(raw_outputs, into=step.output.messages)
    if inputs is None and outputs is None and span.events:  # most spans without messages have no events either
        inputs, outputs = _genai_event_messages(span)
        set_field(step, "input", messages_content(inputs))
        set_field(step, "output", messages_content(outputs))
    if step.type == STEP_TYPE_TOOL or "gen_ai.tool.name" in attrs:
        tool_call(
            attrs.get("gen_ai.tool.call.id"),
            attrs.get("gen_ai.tool.name"),
            attrs.get("gen_ai.tool.call.arguments"),
            attrs.get("gen_ai.tool.call.result"),
            into=step.tool_call,
        )
        if not step.HasField("input") and "gen_ai.tool.call.arguments" in attrs:
            set_content(step.input, attrs["gen_ai.tool.call.arguments"], step.tool_call.arguments)
        if not step.HasField("output") and "gen_ai.tool.call.result" in attrs:
            set_content(step.output, attrs["gen_ai.tool.call.result"], step.tool_call.result)
    if step.type == STEP_TYPE_AGENT and attrs.get("gen_ai.agent.name"):
        step.name = str(attrs["gen_ai.agent.name"])
