"""A record's trajectory as DeepEval's trace, and its conversation's turns with what the turn-level metrics read
(pure: no DeepEval import).

DeepEval's trace metrics (plan adherence, plan quality, step efficiency) read ``LLMTestCase._trace_dict``: the nested
span dict DeepEval's tracer writes for an ``@observe``d agent (``TraceManager.create_nested_spans_dict``: each span's
name, type, input, output and the like, unset keys left out, its ``children`` always present). ``trace_dict`` writes
that dict from a record: a root agent span holding the record's input and output, and each trajectory step as a span
under its parent step (``parent_id``), under the root when it has none, in the trajectory's order.

The turn-level metrics read one record as a conversation (``cases.turn_fields``) whose last assistant turn, the
record's output, carries the record's retrieved context (``retrieval_context``) and the trajectory's tool calls
(``tools_called``): the context and the tools the agent used to write that reply.
"""

from __future__ import annotations

from typing import Any

from evalsi.adapters.deepeval.cases import tool_call_fields, turn_fields
from evalsi.errors import SkipRecord
from evalsi.records import content_text, content_value, from_value, has_content
from evalsi.v1alpha1.record_pb2 import (
    STEP_TYPE_AGENT,
    STEP_TYPE_LLM,
    STEP_TYPE_RETRIEVAL,
    STEP_TYPE_TOOL,
    Record,
    Step,
)

MAX_STEPS = 500  # per trajectory: the whole trace is sent to the judge in every prompt
# DeepEval's span types (SpanApiType values); the other step types are its base span.
SPAN_TYPES = {STEP_TYPE_AGENT: "agent", STEP_TYPE_LLM: "llm", STEP_TYPE_RETRIEVAL: "retriever", STEP_TYPE_TOOL: "tool"}
ROOT = "agent"  # the root span's name: a record names no agent


def trace_dict(record: Record) -> dict[str, Any]:
    """DeepEval's nested span dict of the record's run: the root agent span (the record's input and output) holding
    the trajectory's steps. A record without steps is skipped: the trace metrics judge what the agent did."""
    steps = list(record.trajectory.steps)
    if not steps:
        raise SkipRecord("no trajectory: DeepEval's trace metrics read the agent's steps (trajectory.steps)")
    if len(steps) > MAX_STEPS:
        raise ValueError(f"record {record.id!r}: a trajectory of {len(steps)} steps, more than the {MAX_STEPS} "
                         "DeepEval's trace metrics are given")
    root: dict[str, Any] = {"name": ROOT, "type": "agent", "input": request_text(record)}
    if has_content(record, "output"):
        root["output"] = content_text(record.output)
    spans = [_span(step) for step in steps]
    root["children"] = []
    parents = _parents(steps)
    for index, span in enumerate(spans):
        parent = parents[index]
        (root if parent is None else spans[parent])["children"].append(span)
    return root


def _parents(steps: list[Step]) -> list[int | None]:
    """Each step's parent step (its index), named by the parent's id or span id; None (the root) for a step with no
    parent, an unknown one (a span outside the record), or one in a cycle of parents, so the spans form a tree."""
    by_id = {key: index for index, step in enumerate(steps) for key in (step.id, step.span_id) if key}
    parents: list[int | None] = [by_id.get(step.parent_id) if step.parent_id else None for step in steps]
    for index in range(len(steps)):
        seen = {index}
        ancestor = parents[index]
        while ancestor is not None:
            if ancestor in seen:
                parents[index] = None
                break
            seen.add(ancestor)
            ancestor = parents[ancestor]
    return parents


def request_text(record: Record) -> str:
    """What the user asked: the input's last user message (a conversation's text is its last assistant message,
    ``records.content_text``, which is not the request), else the input's text."""
    if record.input.WhichOneof("kind") == "messages":
        for message in reversed(record.input.messages.messages):
            if message.role == "user" and message.content:
                return message.content
    return content_text(record.input)


def _span(step: Step) -> dict[str, Any]:
    span: dict[str, Any] = {"name": step.name or step.tool_call.name or SPAN_TYPES.get(step.type, "base"),
                            "type": SPAN_TYPES.get(step.type, "tool" if step.HasField("tool_call") else "base")}
    # A tool span's input is the call's arguments and its output the call's result, as @observe records a tool.
    if step.HasField("tool_call") and step.tool_call.HasField("arguments"):
        span["input"] = from_value(step.tool_call.arguments)
    elif step.HasField("input"):
        span["input"] = content_value(step.input)
    if step.HasField("tool_call") and step.tool_call.HasField("result"):
        span["output"] = from_value(step.tool_call.result)
    elif step.HasField("output"):
        span["output"] = content_value(step.output)
    error = step.error or step.tool_call.error
    if error:
        span["error"] = error
    if step.model:
        span["model"] = step.model
    span["children"] = []
    return span


def rag_turn_fields(record: Record) -> list[dict[str, Any]]:
    """The record's conversation (``cases.turn_fields``), its last assistant turn holding the record's retrieved
    context. A record without context or without an assistant reply is skipped."""
    if not record.context:
        raise SkipRecord("no context: DeepEval's turn-level RAG metrics read the retrieved context of the reply")
    turns: list[dict[str, Any]] = list(turn_fields(record))
    last = _last_reply(turns, "the retrieved context")
    turns[last] = {**turns[last], "retrieval_context": [content_text(chunk) for chunk in record.context]}
    return turns


def tool_turn_fields(record: Record) -> list[dict[str, Any]]:
    """The record's conversation, its last assistant turn holding the trajectory's tool calls (``ToolCall`` fields,
    ``cases.tool_call_fields``); without a trajectory the turns hold no tool calls."""
    turns: list[dict[str, Any]] = list(turn_fields(record))
    if record.trajectory.steps:
        calls = tool_call_fields(record)
        if calls:
            last = _last_reply(turns, "the trajectory's tool calls")
            turns[last] = {**turns[last], "tools_called": calls}
    return turns


def _last_reply(turns: list[dict[str, Any]], what: str) -> int:
    for index in range(len(turns) - 1, -1, -1):
        if turns[index]["role"] == "assistant":
            return index
    raise SkipRecord(f"no assistant reply (an output, or an assistant message) to carry {what}")
