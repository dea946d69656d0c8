"""A DeepEval ``ConversationalTestCase`` as a record row (pure: no DeepEval import), the inverse of the forward
mapping (``cases.turn_fields``, ``traces.rag_turn_fields``, ``traces.tool_turn_fields``, ``cases.chatbot_role``):
the record this row makes maps forward to the same turns.

- turns: when the conversation ends with an assistant turn, that turn is the output (text) and the turns before it
  the input (messages); otherwise the whole conversation is the input and there is no output (no reply to grade);
- each turn's ``tools_called``, in turn order, become the trajectory's tool steps (name, ``input_parameters`` as the
  arguments, ``output`` as the result); the forward mapping puts them all on the last reply, so which turn called a
  tool is not kept;
- the reply's (the last assistant turn's) ``retrieval_context``, else the case's ``context``, is the record's
  context (as ``cases.case_row``: retrieval context wins);
- ``expected_outcome`` is the reference, ``name`` the id; ``chatbot_role``, ``scenario`` and ``user_description``
  go to the metadata under their own names (where the forward mapping reads ``chatbot_role``), over the case's own
  metadata keys of those names.

Turns are plain dicts here (``role``, ``content`` and optionally ``tools_called``: dicts of a ``ToolCall``'s
fields, ``retrieval_context``: texts): the metric turns DeepEval's objects into them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evalsi.adapters.deepeval.cases import MAX_TOOL_CALLS, MAX_TURNS

# Case fields kept in the record's metadata under these names.
METADATA_FIELDS = ("chatbot_role", "scenario", "user_description")


def conversation_row(*, turns: Sequence[Mapping[str, Any]], expected_outcome: str | None = None,
                     context: Sequence[str] | None = None, name: str | None = None,
                     metadata: Mapping[str, Any] | None = None, chatbot_role: str | None = None,
                     scenario: str | None = None, user_description: str | None = None) -> dict[str, Any]:
    """The record row (as ``evalsi.evaluate`` takes rows) of a conversational test case's fields (module
    docstring). Absent fields stay absent, so an evaluator that needs one skips the record."""
    if len(turns) > MAX_TURNS:
        raise ValueError(f"a conversation of {len(turns)} turns, more than {MAX_TURNS}")
    messages = [{"role": turn["role"], "content": turn["content"]} for turn in turns]
    row: dict[str, Any] = {}
    if name:
        row["id"] = name
    replied = bool(turns) and turns[-1]["role"] == "assistant"
    asked = messages[:-1] if replied else messages
    if asked:
        row["input"] = {"messages": asked}
    if replied:
        row["output"] = turns[-1]["content"]
    if expected_outcome is not None:
        row["reference"] = expected_outcome
    chunks = _reply_context(turns) or context
    if chunks:
        row["context"] = list(chunks)
    steps = [_tool_step(call) for turn in turns for call in turn.get("tools_called") or ()]
    if len(steps) > MAX_TOOL_CALLS:
        raise ValueError(f"{len(steps)} tool calls, more than {MAX_TOOL_CALLS}")
    if steps:
        row["trajectory"] = {"steps": steps}
    kept = {**(metadata or {}), **{key: value for key, value in (("chatbot_role", chatbot_role),
                                                                   ("scenario", scenario),
                                                                   ("user_description", user_description))
                                    if value is not None}}
    if kept:
        row["metadata"] = kept
    return row


def _reply_context(turns: Sequence[Mapping[str, Any]]) -> list[str] | None:
    for turn in reversed(turns):
        if turn["role"] == "assistant":
            return list(turn.get("retrieval_context") or ()) or None
    return None


def _tool_step(call: Mapping[str, Any]) -> dict[str, Any]:
    """A trajectory tool step (the protobuf JSON form of ``Step``) of a DeepEval ``ToolCall``'s fields, the inverse
    of ``cases.tool_call_fields``."""
    tool_call: dict[str, Any] = {"name": call["name"]}
    if call.get("input_parameters") is not None:
        tool_call["arguments"] = call["input_parameters"]
    if call.get("output") is not None:
        tool_call["result"] = call["output"]
    return {"type": "STEP_TYPE_TOOL", "name": call["name"], "tool_call": tool_call}
