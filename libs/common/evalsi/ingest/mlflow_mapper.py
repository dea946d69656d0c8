"""``mlflow@1`` (``mappers.MLFLOW``): spans from MLflow Tracing (``mlflow.trace``, ``mlflow.start_span``, the
autolog integrations).

MLflow writes every attribute value JSON-encoded (a span type is ``"\\"CHAT_MODEL\\""``), so each is decoded:
- ``mlflow.spanType``: LLM and CHAT_MODEL→LLM, CHAIN, AGENT, TOOL, RETRIEVER→RETRIEVAL, EMBEDDING, RERANKER→RERANK,
  anything else (PARSER, MEMORY, UNKNOWN, a custom string) GENERIC;
- ``mlflow.spanInputs``/``mlflow.spanOutputs``: the call's arguments and return value. On LLM spans the OpenAI
  shapes are read as chat: ``{"messages": [...]}`` in, a ``ChatCompletion`` (``choices[].message``) or a message
  out; older MLflow also wrote the whole chat (inputs and the answer) in ``mlflow.chat.messages``;
- model: ``mlflow.llm.model``, else the inputs' or outputs' ``model``;
- tokens: ``mlflow.chat.tokenUsage`` (``input_tokens``, ``output_tokens``, ``total_tokens``,
  ``cache_read_input_tokens``), else the ChatCompletion's ``usage``;
- a TOOL span's call: its name (``mlflow.spanFunctionName`` when the span was renamed), arguments from the inputs,
  result from the outputs.
The trace's session and user come as ``session.id``/``user.id`` on the root span (MLflow copies them there for
OTLP), which the shared session rule reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from evalsi.records import to_value
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

from .genai_mapper import set_usage
from .messages import messages_content, messages_from_json, parse_json, tool_call

_TYPES: dict[str, StepType] = {
    "LLM": STEP_TYPE_LLM,
    "CHAT_MODEL": STEP_TYPE_LLM,
    "CHAIN": STEP_TYPE_CHAIN,
    "AGENT": STEP_TYPE_AGENT,
    "TOOL": STEP_TYPE_TOOL,
    "RETRIEVER": STEP_TYPE_RETRIEVAL,
    "EMBEDDING": STEP_TYPE_EMBEDDING,
    "RERANKER": STEP_TYPE_RERANK,
}


def matches(attrs: Mapping[str, Any]) -> bool:
    return "mlflow.spanType" in attrs or "mlflow.traceRequestId" in attrs


def _decoded(attrs: Mapping[str, Any], key: str) -> Any:
    return parse_json(attrs.get(key))


def _value_content(value: Any) -> Content | None:
    """A decoded input or output: text for a string, JSON for anything else."""
    if value is None:
        return None
    if isinstance(value, str):
        return Content(text=value) if value else None
    return Content(json=to_value(value))


def _output_messages(outputs: Any) -> Messages | None:
    if isinstance(outputs, Mapping):
        choices = outputs.get("choices")
        if isinstance(choices, list):  # an OpenAI ChatCompletion
            return messages_from_json([choice["message"] for choice in choices
                                       if isinstance(choice, Mapping) and isinstance(choice.get("message"), Mapping)])
        if "role" in outputs and ("content" in outputs or "tool_calls" in outputs):
            return messages_from_json([outputs])
    if isinstance(outputs, str) and outputs:
        return messages_from_json([{"role": "assistant", "content": outputs}])
    return None


def _chat(attrs: Mapping[str, Any], inputs: Any, outputs: Any) -> tuple[Messages | None, Messages | None]:
    chat = _decoded(attrs, "mlflow.chat.messages")
    if isinstance(chat, list) and chat:
        # The whole exchange in one list: the trailing assistant message is the answer when the span has outputs.
        answer = chat[-1] if outputs is not None and isinstance(chat[-1], Mapping) and \
            chat[-1].get("role") == "assistant" else None
        history = chat[:-1] if answer is not None else chat
        return messages_from_json(history), messages_from_json([answer]) if answer is not None else None
    messages = inputs.get("messages") if isinstance(inputs, Mapping) else None
    return messages_from_json(messages), _output_messages(outputs)


def _usage(step: Step, attrs: Mapping[str, Any], outputs: Any) -> None:
    usage = _decoded(attrs, "mlflow.chat.tokenUsage")
    if isinstance(usage, Mapping):
        set_usage(step, usage.get("input_tokens"), usage.get("output_tokens"), usage.get("total_tokens"),
                   usage.get("cache_read_input_tokens"))
    elif isinstance(outputs, Mapping) and isinstance(outputs.get("usage"), Mapping):
        usage = outputs["usage"]
        set_usage(step, usage.get("prompt_tokens", usage.get("input_tokens")),
                   usage.get("completion_tokens", usage.get("output_tokens")), usage.get("total_tokens"))


def fill(attrs: Mapping[str, Any], span: Span, step: Step) -> None:
    kind = str(_decoded(attrs, "mlflow.spanType") or "")
    step.type = _TYPES.get(kind.upper(), STEP_TYPE_GENERIC)
    inputs, outputs = _decoded(attrs, "mlflow.spanInputs"), _decoded(attrs, "mlflow.spanOutputs")
    model = _decoded(attrs, "mlflow.llm.model")
    if not model:
        model = next((side.get("model") for side in (outputs, inputs)
                      if isinstance(side, Mapping) and isinstance(side.get("model"), str)), "")
    step.model = str(model or "")
    if step.type in (STEP_TYPE_LLM, STEP_TYPE_EMBEDDING):
        _usage(step, attrs, outputs)
    if step.type == STEP_TYPE_LLM:
        chat_in, chat_out = _chat(attrs, inputs, outputs)
        contents = (messages_content(chat_in) or _value_content(inputs),
                    messages_content(chat_out) or _value_content(outputs))
    else:
        contents = (_value_content(inputs), _value_content(outputs))
    for field, content in zip(("input", "output"), contents, strict=True):
        if content is not None:
            getattr(step, field).CopyFrom(content)
    if step.type == STEP_TYPE_TOOL:
        tool_call(None, _decoded(attrs, "mlflow.spanFunctionName") or span.name, None, into=step.tool_call)
        if inputs is not None:
            step.tool_call.arguments.CopyFrom(to_value(inputs))
        if outputs is not None:
            step.tool_call.result.CopyFrom(to_value(outputs))

