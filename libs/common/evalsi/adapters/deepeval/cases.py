"""Records and DeepEval test cases, one mapping both ways (pure: no DeepEval import).

A record's fields map as the rag pack reads them: ``input`` is the question, ``output`` the answer
(``actual_output``), ``reference`` the expected answer (``expected_output``) and each ``context`` item one retrieved
chunk (``retrieval_context``, and ``context`` too: DeepEval's hallucination metric reads that one). Contents are
their text (``evalsi.records.content_text``: a conversation's last assistant message, JSON canonically).

Agentic metrics read the trajectory's tool calls as the agent pack reads them (``tools_called``) and the expected
tools from a param, the reference or the metadata (``expected_tools``); conversational metrics read one record as
a conversation (``turns``): its input's user and assistant messages, then its output.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from evalsi.errors import BadInputError, SkipRecord
from evalsi.packs.agent._trajectory import reference_object, tool_calls, tool_steps
from evalsi.records import content_text, from_value, has_content
from evalsi.v1alpha1.record_pb2 import Content, Record

# Where expected tools are read when no param gives them: the reference's keys, then this metadata key.
EXPECTED_KEYS = ("expected_tools", "tool_calls")
EXPECTED_METADATA = "expected_tools"
# DeepEval's Turn takes these roles only; system and tool messages are not turns.
TURN_ROLES = ("user", "assistant")
MAX_TOOL_CALLS = 500  # per record: each is compared with each expected tool
MAX_TURNS = 500  # per conversation: every turn is sent to the judge


def case_fields(record: Record) -> dict[str, Any]:
    """The keyword arguments of the ``LLMTestCase`` that stands for ``record``."""
    fields: dict[str, Any] = {"input": content_text(record.input), "actual_output": content_text(record.output)}
    if has_content(record, "reference"):
        fields["expected_output"] = content_text(record.reference)
    if record.context:
        chunks = [content_text(chunk) for chunk in record.context]
        fields["retrieval_context"] = chunks
        fields["context"] = list(chunks)
    return fields


def case_row(*, input: str, actual_output: str | None, expected_output: str | None = None,
             retrieval_context: Sequence[Any] | None = None, context: Sequence[str] | None = None,
             name: str | None = None, metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The record row (as ``evalsi.evaluate`` takes rows) of a DeepEval test case's fields: the mapping above,
    reversed. Retrieval context wins over context when a case has both; absent fields stay absent, so an
    evaluator that needs one skips the record rather than grading an empty string."""
    row: dict[str, Any] = {"input": input}
    if name:
        row["id"] = name
    if actual_output is not None:
        row["output"] = actual_output
    if expected_output is not None:
        row["reference"] = expected_output
    chunks = retrieval_context if retrieval_context else context
    if chunks:
        row["context"] = [_chunk_text(chunk) for chunk in chunks]
    if metadata:
        row["metadata"] = dict(metadata)
    return row


def _chunk_text(chunk: Any) -> str:
    # DeepEval 4 allows a retrieved chunk to be a RetrievedContextData (a context and its source) besides a string;
    # its own serializer writes it as DeepEval's prompts show it ("source: context").
    return chunk if isinstance(chunk, str) else str(chunk.model_dump())


def tool_call_fields(record: Record) -> list[dict[str, Any]]:
    """The keyword arguments of a DeepEval ``ToolCall`` for each tool call of the record's trajectory, in the agent
    pack's order: its name, its arguments (``input_parameters``, absent when the call has none) and its result
    (``output``, absent when unset)."""
    calls = tool_calls(record.trajectory)
    if len(calls) > MAX_TOOL_CALLS:
        raise ValueError(f"record {record.id!r}: {len(calls)} tool calls, more than the {MAX_TOOL_CALLS} DeepEval's "
                         "tool metrics are given")
    fields = []
    for step, call in zip(tool_steps(record.trajectory), calls, strict=True):
        item: dict[str, Any] = {"name": call.name}
        if call.arguments is not None:
            item["input_parameters"] = _parameters(call.arguments, f"trajectory.steps[{call.step}] ({call.name})",
                                                   ValueError)
        if step.tool_call.HasField("result"):
            item["output"] = from_value(step.tool_call.result)
        fields.append(item)
    return fields


def expected_tool_fields(record: Record, given: Sequence[Any] | None) -> list[dict[str, Any]]:
    """The ``ToolCall`` keyword arguments of the expected tools: the param ``expected`` when given, else the
    reference's ``expected_tools`` or ``tool_calls`` (a JSON object), else the metadata's ``expected_tools``. Each
    is a tool name or an object with a ``name`` and optionally ``input_parameters`` (or ``arguments``) and
    ``output``. None of them: the record is skipped."""
    if given is not None:
        return expected_list(given, "param 'expected'", BadInputError)
    reference = reference_object(record)
    if isinstance(reference, Mapping):
        for key in EXPECTED_KEYS:
            if key in reference:
                return expected_list(reference[key], f"reference '{key}'", ValueError)
    if EXPECTED_METADATA in record.metadata:
        return expected_list(from_value(record.metadata[EXPECTED_METADATA]), f"metadata '{EXPECTED_METADATA}'",
                         ValueError)
    raise SkipRecord("no expected tools: set param 'expected', a reference {\"expected_tools\": [...]} or "
                     f"metadata '{EXPECTED_METADATA}'")


def expected_list(items: Any, source: str, error: type[Exception]) -> list[dict[str, Any]]:
    """``ToolCall`` keyword arguments of a list of expected tools read from ``source``; a bad one raises ``error``
    (BadInputError for a param, the caller's mistake; ValueError for a record's, which fails that record only)."""
    if not isinstance(items, list | tuple) or len(items) > MAX_TOOL_CALLS:
        raise error(f"{source} must be a list of at most {MAX_TOOL_CALLS} tools, got {type(items).__name__}"
                    f"{f' of {len(items)}' if isinstance(items, list | tuple) else ''}")
    expected = []
    for index, item in enumerate(items):
        if isinstance(item, str) and item:
            expected.append({"name": item})
            continue
        if isinstance(item, Mapping) and isinstance(item.get("name"), str) and item["name"]:
            tool: dict[str, Any] = {"name": item["name"]}
            parameters = item.get("input_parameters", item.get("arguments"))
            if parameters is not None:
                tool["input_parameters"] = _parameters(parameters, f"{source}[{index}]", error)
            if "output" in item:
                tool["output"] = item["output"]
            expected.append(tool)
            continue
        raise error(f"{source}[{index}] must be a tool name or an object with a 'name' (and optionally "
                    f"'input_parameters', 'output'), got {item!r}"[:500])
    return expected


def _parameters(value: Any, where: str, error: type[Exception]) -> dict[str, Any]:
    # DeepEval's ToolCall holds its parameters as an object; a JSON text of one (OpenAI's arguments) is decoded.
    if isinstance(value, str):
        with contextlib.suppress(json.JSONDecodeError):
            value = json.loads(value)
    if not isinstance(value, Mapping):
        raise error(f"{where}: the arguments must be a JSON object (DeepEval's input_parameters), got "
                    f"{type(value).__name__}")
    return dict(value)


def turn_fields(record: Record) -> list[dict[str, str]]:
    """The conversation a record holds, as DeepEval ``Turn`` keyword arguments: the input's user and assistant
    messages (a text input is one user turn), then the output's (a text output is one assistant turn). Messages
    without text (an assistant's bare tool calls) and system or tool messages are not turns."""
    turns: list[dict[str, str]] = []
    for field, role in (("input", "user"), ("output", "assistant")):
        if not has_content(record, field):
            continue
        content: Content = getattr(record, field)
        if content.WhichOneof("kind") == "messages":
            turns.extend({"role": m.role, "content": m.content} for m in content.messages.messages
                         if m.role in TURN_ROLES and m.content)
        else:
            turns.append({"role": role, "content": content_text(content)})
    if not turns:
        raise SkipRecord("no conversation: the input and output hold no user or assistant message with text")
    if len(turns) > MAX_TURNS:
        raise ValueError(f"record {record.id!r}: a conversation of {len(turns)} turns, more than {MAX_TURNS}")
    return turns


def chatbot_role(record: Record, given: str | None) -> str:
    """The role the assistant plays: the param when given, else the metadata's ``chatbot_role``, else the
    input's system message. None of them: the record is skipped."""
    if given is not None:
        return given
    value = record.metadata.get("chatbot_role")
    if value is not None:
        if value.WhichOneof("kind") != "string_value" or not value.string_value.strip():
            raise ValueError(f"record {record.id!r}: metadata 'chatbot_role' must be a non-empty string")
        return value.string_value
    if has_content(record, "input") and record.input.WhichOneof("kind") == "messages":
        for message in record.input.messages.messages:
            if message.role == "system" and message.content.strip():
                return message.content
    raise SkipRecord("no chatbot role: set param 'chatbot_role', metadata 'chatbot_role' or a system message")
