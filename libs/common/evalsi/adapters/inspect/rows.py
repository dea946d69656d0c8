"""One Inspect sample as one record row (the record-file convention of docs/datasets.md), pure.

The same mapping serves both directions: an imported log's samples (``logs``) and the task state an Inspect
scorer receives (``scorer``), so an Evals.si evaluator grades the same record whichever way it meets a sample.

- ``id`` is the sample's id and ``trial`` its epoch less one: the epochs of a sample are its trials (pass@k).
- ``input`` is the conversation the model was given (the messages before its first generated one); ``output``
  what it generated: its completion as text when it answered with one message and no tool call, else its messages
  with their tool calls and the tools' answers.
- ``reference`` is the target: a string, or a list meaning "any of these"; an empty target is no reference.
- ``metadata`` is the sample's metadata, plus ``inspect.task``, ``inspect.model``, ``inspect.sample_id``,
  ``inspect.epoch``, Inspect's own scores as ``inspect.<scorer>``, and ``inspect.error``/``inspect.limit`` when
  the sample was halted.
- ``trajectory`` (when the model called tools): each generation and each tool call with the tool's answer.
- ``usage`` is the evaluated model's tokens and cost over the sample, and its working time as the latency.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageTool, ModelOutput, ModelUsage

# Where an epoch-less caller (a scorer outside an eval) starts: Inspect numbers epochs from 1.
FIRST_EPOCH = 1


@dataclass(frozen=True)
class SampleParts:
    """What a record is made of, read from an ``EvalSample`` or a ``TaskState``."""

    sample_id: int | str
    epoch: int
    input: str | Sequence[ChatMessage]
    messages: Sequence[ChatMessage]
    output: ModelOutput
    target: str | Sequence[str]
    metadata: Mapping[str, Any]
    model: str
    task: str = ""
    usage: ModelUsage | None = None
    working_time: float | None = None
    scores: Mapping[str, Any] = field(default_factory=dict)
    error: str = ""
    limit: str = ""


def sample_row(parts: SampleParts) -> dict[str, Any]:
    """The record row of one sample (docs/adapters.md#what-a-record-holds)."""
    given, generated = _split(parts.messages)
    row: dict[str, Any] = {"id": str(parts.sample_id), "trial": max(parts.epoch - FIRST_EPOCH, 0)}
    row["input"] = {"messages": [message_dict(m) for m in given]} if given else _input(parts.input)
    output = _output(generated, parts.output)
    if output is not None:
        row["output"] = output
    reference = _reference(parts.target)
    if reference is not None:
        row["reference"] = reference
    row["metadata"] = _metadata(parts)
    trajectory = _trajectory(generated, parts.model)
    if trajectory is not None:
        row["trajectory"] = trajectory
    usage = _usage(parts.usage, parts.working_time)
    if usage:
        row["usage"] = usage
    return row


def _split(messages: Sequence[ChatMessage]) -> tuple[Sequence[ChatMessage], Sequence[ChatMessage]]:
    """The messages the model was given and those it generated (with the tool answers among them): the split is at
    its first generated message (``source == "generate"``; an assistant message after the input in logs that do
    not mark sources)."""
    for index, message in enumerate(messages):
        if isinstance(message, ChatMessageAssistant) and message.source != "input":
            return messages[:index], messages[index:]
    return messages, ()


def _input(given: str | Sequence[ChatMessage]) -> Any:
    if isinstance(given, str):
        return given
    return {"messages": [message_dict(m) for m in given]}


def _output(generated: Sequence[ChatMessage], output: ModelOutput) -> Any:
    """The completion as text for one plain answer; the generated messages when there were tool calls or turns."""
    single = len(generated) == 1 and isinstance(generated[0], ChatMessageAssistant) and not generated[0].tool_calls
    if single or not generated:
        text = output.completion or (generated[0].text if generated else "")
        return text if text or generated else None
    return {"messages": [message_dict(m) for m in generated]}


def message_dict(message: ChatMessage) -> dict[str, Any]:
    """A chat message in the record convention: role, its text, tool calls (id, name, arguments), and on a tool's
    answer the call it answers and the tool's name; a tool error becomes the answer's text when it has none."""
    out: dict[str, Any] = {"role": message.role, "content": message.text}
    if isinstance(message, ChatMessageAssistant) and message.tool_calls:
        out["tool_calls"] = [
            {"id": call.id, "name": call.function, "arguments": plain(call.arguments)} for call in message.tool_calls
        ]
    if isinstance(message, ChatMessageTool):
        if message.tool_call_id:
            out["tool_call_id"] = message.tool_call_id
        if message.function:
            out["name"] = message.function
        if message.error and not out["content"]:
            out["content"] = message.error.message
    return out


def _trajectory(generated: Sequence[ChatMessage], model: str) -> dict[str, Any] | None:
    """The agent's steps when it called tools (the agent pack's evaluators read them): each generation, then each
    of its tool calls with the tool's answer, in the protobuf JSON form of ``Trajectory``."""
    answers = {m.tool_call_id: m for m in generated if isinstance(m, ChatMessageTool) and m.tool_call_id}
    steps: list[dict[str, Any]] = []
    for message in generated:
        if not isinstance(message, ChatMessageAssistant):
            continue
        steps.append({"type": "STEP_TYPE_LLM", "name": "generate", "model": message.model or model,
                      "output": {"text": message.text}})
        for call in message.tool_calls or ():
            tool_call: dict[str, Any] = {"id": call.id, "name": call.function, "arguments": plain(call.arguments)}
            answer = answers.get(call.id)
            if answer is not None:
                tool_call["result"] = answer.text
                tool_call["status"] = "TOOL_CALL_STATUS_ERROR" if answer.error else "TOOL_CALL_STATUS_OK"
                if answer.error:
                    tool_call["error"] = answer.error.message
            steps.append({"type": "STEP_TYPE_TOOL", "name": call.function, "toolCall": tool_call})
    return {"steps": steps} if len(steps) > sum(s["type"] == "STEP_TYPE_LLM" for s in steps) else None


def _reference(target: str | Sequence[str]) -> Any:
    """No target is no reference: Inspect gives a scorer ``[""]`` for a sample without one, a log ``""``."""
    if isinstance(target, str):
        return target or None
    targets = [str(t) for t in target if t]
    if not targets:
        return None
    return targets[0] if len(targets) == 1 else targets


def _metadata(parts: SampleParts) -> dict[str, Any]:
    metadata = {str(key): plain(value) for key, value in parts.metadata.items()}
    if parts.task:  # a scorer does not see the task's name
        metadata["inspect.task"] = parts.task
    metadata.update({"inspect.model": parts.model, "inspect.sample_id": parts.sample_id, "inspect.epoch": parts.epoch})
    for scorer, value in parts.scores.items():
        metadata[f"inspect.{scorer}"] = plain(value)
    if parts.error:
        metadata["inspect.error"] = parts.error
    if parts.limit:
        metadata["inspect.limit"] = parts.limit
    return metadata


def _usage(usage: ModelUsage | None, working_time: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if usage is not None:
        out.update(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, total_tokens=usage.total_tokens)
        if usage.input_tokens_cache_read is not None:
            out["cached_input_tokens"] = usage.input_tokens_cache_read
        if usage.reasoning_tokens is not None:
            out["reasoning_tokens"] = usage.reasoning_tokens
        if usage.total_cost is not None:
            out["cost_usd"] = usage.total_cost
    if working_time is not None and working_time >= 0:
        out["latency_s"] = working_time
    return out


def plain(value: Any) -> Any:
    """A JSON value: what a task's metadata or a tool's arguments hold that JSON cannot (a date, an object) as its
    string, as Inspect writes it to a log."""
    return json.loads(json.dumps(value, default=str))
