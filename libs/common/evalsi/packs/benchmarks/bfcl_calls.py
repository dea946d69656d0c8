"""A model's function calls as BFCL decodes them: ``[{function_name: {param: value}}]``.

From tool calls (an assistant message's, or a trajectory's), from JSON (that same list, or OpenAI-style
``{"name", "arguments"}`` objects), or from text in BFCL's prompting format ``[f(a=1, b="x"), g(c=[1, 2])]``,
parsed as a Python expression the way BFCL's ``default_decode_ast_prompting`` does: surrounding backticks,
newlines and spaces stripped, brackets added where missing, keyword arguments only (positional ones are not
read), a bare name read as the string of that name (a variable), arithmetic on numbers evaluated.
"""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Callable, Mapping
from typing import Any

from evalsi.records import content_text, content_value, from_value
from evalsi.v1alpha1.record_pb2 import Content, Record

MAX_TEXT = 100_000  # characters of output decoded: BFCL answers are a few calls
_MAX_POWER = 64  # largest exponent evaluated in an argument's arithmetic (2**64, not 10**10**10)
_ARITHMETIC: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}

Calls = list[dict[str, Any]]


class DecodeError(ValueError):
    """The output is not a list of function calls BFCL could read."""


def record_calls(record: Record) -> Calls:
    """The calls in ``record.output`` (tool calls of its messages, JSON, or text), else its trajectory's."""
    if record.HasField("output") and record.output.WhichOneof("kind") is not None:
        return content_calls(record.output)
    calls = [{call.name: _arguments(call.arguments)} for step in record.trajectory.steps
             if step.HasField("tool_call") for call in (step.tool_call,)]
    if not calls:
        raise DecodeError("the record has no output and no tool calls in its trajectory")
    return calls


def content_calls(content: Content) -> Calls:
    kind = content.WhichOneof("kind")
    if kind == "messages":
        calls = [{call.name: _arguments(call.arguments)} for message in content.messages.messages
                 if message.role == "assistant" for call in message.tool_calls]
        return calls if calls else text_calls(content_text(content))
    if kind == "json":
        return json_calls(content_value(content))
    if kind == "text":
        return text_calls(content.text)
    raise DecodeError(f"an output of kind {kind!r} holds no function calls; accepted: messages with tool calls, "
                      "JSON, or text")


def _arguments(value: Any) -> Any:
    if value.WhichOneof("kind") is None:
        return {}
    arguments = from_value(value)
    if isinstance(arguments, str):  # some providers hand the arguments over as their JSON text
        try:
            return json.loads(arguments)
        except json.JSONDecodeError:
            return arguments
    return arguments


def json_calls(value: Any) -> Calls:
    """``[{name: {args}}]`` or ``[{"name": ..., "arguments": {...}}]`` (one object for one call)."""
    items = value if isinstance(value, list) else [value]
    calls: Calls = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise DecodeError(f"call {index}: expected an object, got {type(item).__name__}")
        if "name" in item and isinstance(item.get("name"), str) and set(item) <= {"name", "arguments", "id", "type"}:
            arguments = item.get("arguments", {})
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except json.JSONDecodeError as exc:
                    raise DecodeError(f"call {index}: arguments are not JSON: {exc}") from None
            calls.append({item["name"]: arguments})
        elif len(item) == 1:
            calls.append(dict(item))
        else:
            raise DecodeError(f"call {index}: expected {{function_name: {{arguments}}}} or {{\"name\", "
                              f"\"arguments\"}}, got keys {sorted(item)[:5]}")
    return calls


def text_calls(text: str) -> Calls:
    """Calls from text: JSON when it parses as such, else BFCL's Python-call form."""
    if len(text) > MAX_TEXT:
        raise DecodeError(f"output of {len(text)} characters; at most {MAX_TEXT} are decoded")
    stripped = text.strip("`\n ")
    if stripped.startswith(("[{", "{")):
        try:
            return json_calls(json.loads(stripped))
        except json.JSONDecodeError:
            pass
    source = stripped if stripped.startswith("[") else "[" + stripped
    source = source if source.endswith("]") else source + "]"
    try:
        tree = ast.parse(source, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise DecodeError(f"invalid syntax, failed to decode the calls: {exc}") from None
    elements = tree.elts if isinstance(tree, ast.List) else [tree]
    calls: Calls = []
    for index, element in enumerate(elements):
        if not isinstance(element, ast.Call):
            raise DecodeError(f"element {index} is not a function call: {ast.unparse(element)[:100]!r}")
        calls.append(_call(element))
    return calls


def _call(node: ast.Call) -> dict[str, Any]:
    return {_dotted(node.func): {kw.arg: _value(kw.value) for kw in node.keywords if kw.arg is not None}}


def _dotted(node: ast.expr) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    else:
        raise DecodeError(f"function name {ast.unparse(node)[:100]!r} is not a (dotted) name")
    return ".".join(reversed(parts))


def _value(node: ast.expr) -> Any:
    """An argument's value: literals as themselves, a name as its string, a nested call as a call, numbers'
    arithmetic evaluated, anything else as its source text."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.List):
        return [_value(item) for item in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_value(item) for item in node.elts)
    if isinstance(node, ast.Dict):
        pairs = zip(node.keys, node.values, strict=True)
        return {_value(key) if key is not None else None: _value(value) for key, value in pairs}
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call) and node.keywords:
        return _call(node)
    if isinstance(node, ast.UnaryOp | ast.BinOp):
        number = _arithmetic(node)
        if number is not None:
            return number
    return ast.unparse(node)


def _arithmetic(node: ast.expr) -> int | float | None:
    """Numbers' arithmetic (``-5``, ``3*60``, ``1e3/2``); None for anything else or an exponent over
    ``_MAX_POWER``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _arithmetic(node.operand)
        if operand is None:
            return None
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _arithmetic(node.left), _arithmetic(node.right)
        if left is None or right is None or (isinstance(node.op, ast.Pow) and abs(right) > _MAX_POWER):
            return None
        try:
            result: int | float = _ARITHMETIC[type(node.op)](left, right)
            return result
        except (ZeroDivisionError, OverflowError):
            return None
    return None
