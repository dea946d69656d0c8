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
from evalsi.v1alpha1.record_pb2 import Content, Messages, ToolCall


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


def _str(value: Any) -> str:
    return value if type(value) is str else str(value or "")


def tool_call(call_id: Any, name: Any, arguments: Any, result: Any = None, *, into: ToolCall | None = None) -> (
        ToolCall):
    """A tool call, written into ``into`` (a field of the step or message being built) when given."""
    call = ToolCall() if into is None else into
    call.id, call.name = _str(call_id), _str(name)
    if arguments is not None:
        to_value(parse_json(arguments), into=call.arguments)
    if result is not None:
        to_value(parse_json(result), into=call.result)
    return call


def _add_message(out: Messages, item: Mapping[str, Any]) -> None:
    # Built in place (add, not append): a Message built apart would be copied into ``out``.
    parts = item.get("parts")
    if not isinstance(parts, list) and "tool_calls" not in item and "tool_call_id" not in item:
        # The plain flat message, most of them: one call builds it ("" is every string field's default).
        out.messages.add(role=_str(item.get("role")), name=_str(item.get("name")), content=_text(item.get("content")))
        return
    message = out.messages.add(role=_str(item.get("role")), name=_str(item.get("name")))
    if isinstance(parts, list):
        texts: list[str] = []
        for part in parts:
            if not isinstance(part, Mapping):
                continue
            kind = part.get("type")
            if kind == "text":
                texts.append(_text(part.get("content")))
            elif kind == "tool_call":
                tool_call(part.get("id"), part.get("name"), part.get("arguments"), into=message.tool_calls.add())
            elif kind == "tool_call_response":
                message.tool_call_id = _str(part.get("id"))
                texts.append(_text(part.get("response", part.get("result"))))
        content = "".join(texts)
    else:
        content = _text(item.get("content"))
        for call in item.get("tool_calls") or []:
            if isinstance(call, Mapping):
                nested = call.get("function")
                function = nested if isinstance(nested, Mapping) else call
                tool_call(call.get("id"), function.get("name"), function.get("arguments"),
                          into=message.tool_calls.add())
        if item.get("tool_call_id"):
            message.tool_call_id = str(item["tool_call_id"])
    if content:
        message.content = content


def messages_from_json(value: Any, *, system: Any = None, into: Messages | None = None) -> Messages | None:
    """Messages from a JSON list (either JSON shape); ``system`` is ``gen_ai.system_instructions``.

    None when ``value`` is not a list. With ``into`` (a field of the step being built) the messages are added there.
    """
    items = parse_json(value)
    if not isinstance(items, list):
        return None
    out = Messages() if into is None else into
    if system is not None:
        instructions = parse_json(system)
        if isinstance(instructions, list) and instructions:
            out.messages.add(role="system", content=_text(instructions))
        elif isinstance(instructions, str) and instructions:
            out.messages.add(role="system", content=instructions)
    for item in items:
        if type(item) is dict or isinstance(item, Mapping):  # json.loads gives dicts: no ABC check for them
            _add_message(out, item)
        elif isinstance(item, str):
            out.messages.add(role="user", content=item)
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
        message = out.messages.add(
            role=_str(fields.get("role")),
            content=_text(fields.get("content")),
            name=_str(fields.get("name")),
            tool_call_id=_str(fields.get("tool_call_id")),
        )
        for call in indexed(fields, "tool_calls"):
            tool_call(
                call.get("tool_call.id", call.get("id")),
                call.get("tool_call.function.name", call.get("name")),
                call.get("tool_call.function.arguments", call.get("arguments")),
                into=message.tool_calls.add(),
            )
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
