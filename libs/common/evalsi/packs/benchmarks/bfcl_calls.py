"""A model's function calls as BFCL decodes them: ``[{function_name: {param: value}}]``.

From tool calls (an assistant message's, or a trajectory's, as BFCL's function-calling mode reads them), from JSON
content (that same list, or OpenAI-style ``{"name", "arguments"}`` objects), or from text in BFCL's prompting format
``[f(a=1, b="x"), g(c=[1, 2])]``, parsed as a Python expression the way BFCL's ``default_decode_ast_prompting``
does, failing where it fails: surrounding backticks, newlines and spaces stripped, brackets added where missing,
every element a call, keyword arguments only (positional ones are not read), a bare name read as the string of that
name (a variable), a call without keywords as its source text, a subscript as its source text, arithmetic on
literals evaluated (BFCL evaluates it with Python's ``eval``: on a name that fails), a unary operator on a number
read as its negation (as BFCL does, ``+5`` too), anything else (an attribute, a comprehension, a comparison, an
f-string...) a decode failure, as it is there. Text in JSON is not read as JSON: BFCL's prompting mode does not.
"""

from __future__ import annotations

import ast
import json
import keyword
import operator
import re
from collections.abc import Callable, Mapping
from typing import Any

from evalsi.records import content_text, content_value, from_value
from evalsi.v1alpha1.record_pb2 import Content, Record

MAX_TEXT = 100_000  # characters of output decoded: BFCL answers are a few calls
_MAX_POWER = 64  # largest exponent evaluated in an argument's arithmetic (2**64, not 10**10**10)
_ARITHMETIC: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
    ast.MatMult: operator.matmul,
}
_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_, ast.Invert: operator.invert,
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
    return python_calls(call_source(text))


def python_calls(source: str) -> Calls:
    """The calls in a Python expression as BFCL's ``ast_parse`` reads it: one call, or a list (tuple, set) of
    calls. (``text_calls`` always hands it a list; inside ``<TOOLCALL>`` tags no brackets are added.)"""
    plain = plain_calls(source)
    if plain is not None:
        return plain
    try:
        tree = ast.parse(source, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise DecodeError(f"invalid syntax, failed to decode the calls: {exc}") from None
    if isinstance(tree, ast.Call):
        return [_call(tree)]
    elements = tree.elts if isinstance(tree, ast.List | ast.Tuple | ast.Set) else [tree]  # else BFCL fails
    calls: Calls = []
    for index, element in enumerate(elements):
        if not isinstance(element, ast.Call):
            raise DecodeError(f"element {index} is not a function call: {ast.unparse(element)[:100]!r}")
        calls.append(_call(element))
    return calls


def call_source(text: str) -> str:
    """The Python expression BFCL parses from a model's text: backticks, newlines and spaces stripped, brackets
    added where missing, quotes around the answer dropped."""
    stripped = text.strip("`\n ")
    source = stripped if stripped.startswith("[") else "[" + stripped
    source = source if source.endswith("]") else source + "]"
    return source.strip().strip("'")  # BFCL's ast_parse drops quotes a model wrapped its answer in


def _call(node: ast.Call) -> dict[str, Any]:
    # BFCL keeps a ``**kwargs`` keyword under the name None, and so does this, so it fails the same checks
    return {_dotted(node.func): {kw.arg: _value(kw.value) for kw in node.keywords}}


def _dotted(node: ast.expr) -> str:
    """The called name, its attributes joined by dots; BFCL drops a base that is not a name (``x[0].f`` is ``f``)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _value(node: ast.expr) -> Any:
    """An argument's value as BFCL's ``resolve_ast_by_type`` reads it (see the module's docstring)."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.List):
        return [_value(item) for item in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_value(item) for item in node.elts)
    if isinstance(node, ast.Dict):
        if any(key is None for key in node.keys):
            raise DecodeError("a dict unpacks another (**): not a value BFCL decodes")
        # An unhashable key (a list) fails BFCL's own decode, so it is a decode failure here too, not an error.
        return {_hashable(_value(key)): _value(value)
                for key, value in zip(node.keys, node.values, strict=True) if key}
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        return _call(node) if node.keywords else ast.unparse(node)
    if isinstance(node, ast.Subscript):
        return ast.unparse(node.value) + "[" + ast.unparse(node.slice) + "]"
    if isinstance(node, ast.UnaryOp):
        operand = node.operand
        if not isinstance(operand, ast.Constant) or not isinstance(operand.value, int | float | complex):
            raise DecodeError(f"{ast.unparse(node)[:100]!r}: BFCL negates a number's value and fails on anything else")
        return -operand.value
    if isinstance(node, ast.BinOp):
        try:
            return _evaluated(node)
        except _TooLarge:
            return ast.unparse(node)
    raise DecodeError(f"{ast.unparse(node)[:100]!r}: a {type(node).__name__} is not a value BFCL decodes; accepted: "
                      "literals, names, calls, subscripts, arithmetic on literals")


class _TooLarge(Exception):
    """An evaluation whose result would be too large to compute (kept as source text)."""


def _evaluated(node: ast.expr) -> Any:
    """A literal expression evaluated with Python's semantics, as BFCL's ``eval`` would; a name or call in it fails
    (BFCL's ``eval`` fails on a name; a built-in's call, which it would run, is not run here)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        items = [_evaluated(item) for item in node.elts]
        return items if isinstance(node, ast.List) else tuple(items) if isinstance(node, ast.Tuple) else _set(items)
    if isinstance(node, ast.Dict) and all(key is not None for key in node.keys):
        return {_hashable(_evaluated(key)): _evaluated(value)  # type: ignore[arg-type]
                for key, value in zip(node.keys, node.values, strict=True)}
    try:
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](_evaluated(node.operand))
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
            left, right = _evaluated(node.left), _evaluated(node.right)
            _check_size(node.op, left, right)
            return _ARITHMETIC[type(node.op)](left, right)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError) as exc:
        raise DecodeError(f"{ast.unparse(node)[:100]!r}: {exc}") from None
    raise DecodeError(f"{ast.unparse(node)[:100]!r}: not arithmetic on literals; BFCL's eval fails on a name")


def _set(items: list[Any]) -> set[Any]:
    return {_hashable(item) for item in items}


def _hashable(item: Any) -> Any:
    try:
        hash(item)
    except TypeError as exc:
        raise DecodeError(str(exc)) from None
    return item


def _check_size(op: ast.operator, left: Any, right: Any) -> None:
    """Refuse results too large to compute: an exponent or shift over ``_MAX_POWER``, a repetition or string
    formatting that could exceed ``MAX_TEXT``."""
    numbers = all(isinstance(x, int | float) for x in (left, right))
    if isinstance(op, ast.Pow | ast.LShift) and numbers and abs(right) > _MAX_POWER:
        raise _TooLarge
    if isinstance(op, ast.Mult) and not numbers:
        sequence, count = (left, right) if isinstance(right, int) else (right, left)
        if isinstance(count, int) and hasattr(sequence, "__len__") and len(sequence) * count > MAX_TEXT:
            raise _TooLarge
    if isinstance(op, ast.Mod) and isinstance(left, str | bytes):
        raise _TooLarge  # a format's width could ask for any size


# BFCL answers are nearly always ``[name(key=literal, ...), ...]``. ``plain_calls`` reads that shape from tokens
# instead of through Python's parser (ast.parse is most of a decode's cost): strings without escapes, decimal ints
# and floats, True/False/None, names, lists, dicts, and calls with keywords only, separated by spaces, tabs or
# newlines. Whatever else it meets (an escape, a tuple, a positional argument, an operator, a non-ASCII name, a
# keyword repeated), it answers None and the text goes to ast.parse, so every verdict and message stays the parser's.
# Each token is (the whitespace before it, its text); a token's first character says its kind.
_PLAIN_TOKENS = re.compile(r"""([ \t\n]*)(
    '[^'\\\x00-\x1f\ud800-\udfff]*'|"[^"\\\x00-\x1f\ud800-\udfff]*"
    |-?(?:0|[1-9][0-9]{0,30})(?:\.[0-9]{1,30})?
    |[A-Za-z_][A-Za-z0-9_]*
    |[][(){},:=.]
)""", re.VERBOSE)
_QUOTES = ("'", '"')
_NUMBER_STARTS = frozenset("-0123456789")
_NAME_STARTS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_CONSTANTS: dict[str, Any] = {"True": True, "False": False, "None": None}
_MAX_PLAIN_DEPTH = 32  # nesting read here; deeper goes to the parser, whose own limit then applies


class _NotPlain(Exception):
    """The text is not of the plain shape: Python's parser reads it."""


def plain_calls(source: str) -> Calls | None:
    """The calls in ``source`` when it is a plain list of calls (see above), as ``text_calls`` decodes them; None
    when it is not."""
    if not source.startswith("["):  # leading whitespace is the parser's indentation error
        return None
    found = _PLAIN_TOKENS.findall(source)
    # Matches never overlap, so they tile the source exactly when their lengths add up to it.
    if sum(len(space) + len(token) for space, token in found) != len(source):
        return None
    reader = _PlainReader([token for _, token in found])
    try:
        calls: Calls = []
        reader.expect("[")
        while reader.peek() != "]":
            calls.append(reader.call(0, reader.name()))
            if reader.peek() != "]":
                reader.expect(",")
        reader.expect("]")
        reader.expect("")
    except _NotPlain:
        return None
    return calls


class _PlainReader:
    """Reads values from a list of tokens; the empty token marks the end."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = [*tokens, ""]
        self.at = 0

    def peek(self) -> str:
        return self.tokens[self.at]

    def take(self) -> str:
        token = self.tokens[self.at]
        if not token:
            raise _NotPlain
        self.at += 1
        return token

    def expect(self, mark: str) -> None:
        if self.tokens[self.at] != mark:
            raise _NotPlain
        self.at += 1

    def name(self) -> str:
        token = self.take()
        if token[0] not in _NAME_STARTS or keyword.iskeyword(token) or token == "__debug__":
            raise _NotPlain
        return token

    def call(self, depth: int, first: str) -> dict[str, Any]:
        """``first.name(key=value, ...)`` as ``{name: {key: value}}``, its first name already read."""
        name = first
        while self.tokens[self.at] == ".":
            self.at += 1
            name += "." + self.name()
        self.expect("(")
        arguments: dict[str, Any] = {}
        while self.tokens[self.at] != ")":
            key = self.name()
            if key in arguments:  # a keyword repeated: left to the parser
                raise _NotPlain
            self.expect("=")
            arguments[key] = self.value(depth + 1)
            if self.tokens[self.at] != ")":
                self.expect(",")
        self.at += 1
        return {name: arguments}

    def value(self, depth: int) -> Any:
        if depth > _MAX_PLAIN_DEPTH:
            raise _NotPlain
        token = self.take()
        first = token[0]
        if first in _QUOTES:
            return token[1:-1]
        if first in _NUMBER_STARTS:
            return float(token) if "." in token else int(token)
        if first in _NAME_STARTS:
            if token in _CONSTANTS:
                return _CONSTANTS[token]
            if keyword.iskeyword(token) or token == "__debug__":
                raise _NotPlain
            if self.tokens[self.at] in (".", "("):  # a call as a value: with keywords, its calls' form
                call = self.call(depth, token)
                if not next(iter(call.values())):  # without, its source text: left to the parser
                    raise _NotPlain
                return call
            return token
        if token == "[":
            items = []
            while self.tokens[self.at] != "]":
                items.append(self.value(depth + 1))
                if self.tokens[self.at] != "]":
                    self.expect(",")
            self.at += 1
            return items
        if token == "{":
            return self.mapping(depth)
        raise _NotPlain

    def mapping(self, depth: int) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        while self.tokens[self.at] != "}":
            if self.tokens[self.at][:1] in ("[", "{"):  # unhashable: the parser's path says so
                raise _NotPlain
            key = self.value(depth + 1)
            if isinstance(key, dict):
                raise _NotPlain
            self.expect(":")
            result[key] = self.value(depth + 1)
            if self.tokens[self.at] != "}":
                self.expect(",")
        self.at += 1
        return result
