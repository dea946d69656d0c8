"""Chat messages as instrumentations write them, parsed into canonical ``Message``s.

Three shapes reach us:
- OTel GenAI JSON (``gen_ai.input.messages``/``gen_ai.output.messages``): ``[{"role", "parts": [{"type": "text",
  "content"}, {"type": "tool_call", "id", "name", "arguments"}, {"type": "tool_call_response", "id", "response"}]}]``,
  plus ``gen_ai.system_instructions`` as a list of parts;
- the older flat JSON (``[{"role", "content", "tool_calls": [{"id", "function": {"name", "arguments"}}]}]``);
- flattened, indexed attributes (OpenInference ``llm.input_messages.0.message.role``, OpenLLMetry
  ``gen_ai.prompt.0.content``), which ``indexed`` turns back into a list of dicts.
Anything else is left to the raw attributes the step keeps.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from evalsi.records import to_value
from evalsi.v1alpha1.record_pb2 import Content, Message, Messages, ToolCall


def parse_json(value: Any) -> Any:
    """A JSON string decoded, or the value itself when it is not a string or not JSON."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def indexed(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``prefix.<i>.<rest>`` keys as a list (in index order) of ``{rest: value}`` dicts."""
    start = prefix + "."
    found: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith(start):
            continue
        head, _, rest = key[len(start):].partition(".")
        if head.isdigit() and rest:
            found.setdefault(int(head), {})[rest] = value
    return [found[i] for i in sorted(found)]


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # content given as a list of parts
        return "".join(_text(part.get("content", part.get("text")) if isinstance(part, Mapping) else part)
                       for part in value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def tool_call(call_id: Any, name: Any, arguments: Any, result: Any = None) -> ToolCall:
    call = ToolCall(id=str(call_id or ""), name=str(name or ""))
    if arguments is not None:
        call.arguments.CopyFrom(to_value(parse_json(arguments)))
    if result is not None:
        call.result.CopyFrom(to_value(parse_json(result)))
    return call


def _message(item: Mapping[str, Any]) -> Message:
    message = Message(role=str(item.get("role") or ""), name=str(item.get("name") or ""))
    texts: list[str] = []
    parts = item.get("parts")
    if isinstance(parts, list):
        for part in parts:
            if not isinstance(part, Mapping):
                continue
            kind = part.get("type")
            if kind == "text":
                texts.append(_text(part.get("content")))
            elif kind == "tool_call":
                message.tool_calls.append(tool_call(part.get("id"), part.get("name"), part.get("arguments")))
            elif kind == "tool_call_response":
                message.tool_call_id = str(part.get("id") or "")
                texts.append(_text(part.get("response", part.get("result"))))
    else:
        texts.append(_text(item.get("content")))
        for call in item.get("tool_calls") or []:
            if isinstance(call, Mapping):
                function = call.get("function") if isinstance(call.get("function"), Mapping) else call
                message.tool_calls.append(tool_call(call.get("id"), function.get("name"), function.get("arguments")))
        if item.get("tool_call_id"):
            message.tool_call_id = str(item["tool_call_id"])
    message.content = "".join(texts)
    return message


def messages_from_json(value: Any, *, system: Any = None) -> Messages | None:
    """Messages from a JSON list (either JSON shape); ``system`` is ``gen_ai.system_instructions``."""
    items = parse_json(value)
    if not isinstance(items, list):
        return None
    out = Messages()
    instructions = parse_json(system)
    if isinstance(instructions, list) and instructions:
        out.messages.append(Message(role="system", content=_text(instructions)))
    elif isinstance(instructions, str) and instructions:
        out.messages.append(Message(role="system", content=instructions))
    for item in items:
        if isinstance(item, Mapping):
            out.messages.append(_message(item))
        elif isinstance(item, str):
            out.messages.append(Message(role="user", content=item))
    return out


def messages_from_indexed(items: Sequence[Mapping[str, Any]], *, inner: str = "") -> Messages | None:
    """Messages from ``indexed`` dicts; ``inner`` is OpenInference's ``message.`` key prefix.

    Tool calls are indexed again under ``tool_calls``: OpenInference names their fields
    ``tool_call.function.name``/``tool_call.function.arguments``/``tool_call.id``, OpenLLMetry
    ``name``/``arguments``/``id``.
    """
    if not items:
        return None
    out = Messages()
    for item in items:
        fields = {key[len(inner):]: value for key, value in item.items() if key.startswith(inner)}
        message = Message(
            role=str(fields.get("role") or ""),
            content=_text(fields.get("content")),
            name=str(fields.get("name") or ""),
            tool_call_id=str(fields.get("tool_call_id") or ""),
        )
        for call in indexed(fields, "tool_calls"):
            message.tool_calls.append(tool_call(
                call.get("tool_call.id", call.get("id")),
                call.get("tool_call.function.name", call.get("name")),
                call.get("tool_call.function.arguments", call.get("arguments")),
            ))
        out.messages.append(message)
    return out


def content_of(value: Any, mime_type: Any = None) -> Content | None:
    """``input.value``/``output.value``-style content: JSON when declared or parseable as an object, else text."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        if mime_type == "application/json" or value.lstrip().startswith(("{", "[")):
            parsed = parse_json(value)
            if not isinstance(parsed, str):
                return Content(json=to_value(parsed))
        return Content(text=value)
    return Content(json=to_value(value))


def messages_content(messages: Messages | None) -> Content | None:
    return Content(messages=messages) if messages is not None and messages.messages else None
