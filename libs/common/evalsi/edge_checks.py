"""Checks every request body passes at the edge, before any handler or store sees it.

What the stores and the bus cannot take is refused here with a ``BadInputError`` naming the field path,
so it becomes a 400 / INVALID_ARGUMENT instead of a 5xx from deep inside a driver:

- JSON nested deeper than ``MAX_JSON_DEPTH`` (checked without recursion, so 100,000 levels cost no stack);
- the non-standard JSON literals ``NaN``, ``Infinity`` and ``-Infinity``, and numbers that overflow to infinity;
- text with a NUL (U+0000), which Postgres ``text``/``jsonb`` refuse, or a lone UTF-16 surrogate, which is not
  encodable as UTF-8 (so no store, and no protobuf, can hold it);
- protobuf messages nested deeper than ``MAX_MESSAGE_DEPTH``, the limit every decoder on the bus applies
  (upb's default), so an accepted request is one every service can read back.

The common case is cheap: a body without the escapes or literals these checks look for is only scanned by
C code (``bytes.count``, one regex search); the Python walks that name a path run only when they can find one.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from typing import Any, cast

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message

from evalsi.errors import BadInputError

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_MESSAGE_DEPTH",
    "check_message",
    "descriptor_of",
    "enum_type",
    "is_map",
    "is_repeated",
    "load_json",
    "message_type",
    "text_problem",
]

MAX_JSON_DEPTH = 64
# upb refuses to decode a message nested deeper than this, so no service could read such a message back.
MAX_MESSAGE_DEPTH = 100

# JSON spells a NUL or a surrogate only as an escape (raw control characters and invalid UTF-8 are refused
# by the parser), so a body without these escapes cannot hold either. False positives only cost a walk.
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_NON_FINITE_LITERALS = ("NaN", "Infinity", "-Infinity")
_PLAIN_KEY = re.compile(r"[A-Za-z_][\w-]*")


class _Constant:
    """Stands in for a NaN/Infinity literal until its path is known."""

    def __init__(self, name: str) -> None:
        self.name = name


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored, or None when it can."""
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    char = found.group()
    if char == "\x00":
        return "contains a NUL character (U+0000), which cannot be stored; remove it or send the data base64-encoded"
    return (
        f"contains a lone UTF-16 surrogate (U+{ord(char):04X}) at character {found.start()}, which is not valid "
        "Unicode text; send UTF-8 text"
    )


def load_json(
    body: bytes,
    *,
    label: str = "request body",
    max_depth: int = MAX_JSON_DEPTH,
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
    check_text: bool = True,
    root: tuple[str, ...] = (),
) -> Any:
    """Parse a JSON body refusing what the stores cannot hold; errors name the path (``a.b[2].c: ...``).

    ``label`` names the whole body in messages about it. ``check_text=False`` leaves NULs in strings to the
    caller (lone surrogates still fail where the protobuf parser meets them). ``json.JSONDecodeError`` and
    ``UnicodeDecodeError`` pass through so callers keep their own wording for malformed JSON; anything else
    is a ``BadInputError``. ``root`` is the path of the body inside the request (``policy`` when the body is
    that field), so messages name the whole path.
    """
    constants: list[_Constant] = []

    def constant(name: str) -> _Constant:
        constants.append(_Constant(name))
        return constants[-1]

    # Decoded here, not by json.loads: given bytes, it guesses UTF-16 or UTF-32 from NUL bytes.
    text = body.decode("utf-8")
    try:
        document = json.loads(text, parse_constant=constant, object_pairs_hook=object_pairs_hook)
    except RecursionError:
        # The C scanner stops at the interpreter's recursion limit, far above ours: the body is too deep.
        raise BadInputError(f"{label}: JSON nested deeper than the limit of {max_depth} levels") from None
    if text.count("{") + text.count("[") > max_depth:
        _check_depth(document, label, max_depth, root)
    if constants:
        path = _path_to(document, lambda value: isinstance(value, _Constant))
        name = _at(document, path).name if path is not None else constants[0].name
        raise BadInputError(
            f"{_render(_under(root, path), label)}: {name} is not a JSON number; a finite number is expected "
            "(NaN and Infinity are not accepted)"
        )
    if check_text and _SUSPECT_ESCAPE.search(text):
        _check_text(document, label, root)
    return document


def _under(root: tuple[str, ...], path: tuple[str | int, ...] | None) -> tuple[str | int, ...] | None:
    return None if path is None else (*root, *path)


def _check_depth(document: Any, label: str, max_depth: int, root: tuple[str, ...]) -> None:
    level = [document]
    depth = 0
    while level:
        containers = [value for value in level if isinstance(value, dict | list)]
        if not containers:
            return
        depth += 1
        if depth > max_depth:
            path = _path_to(document, lambda value: isinstance(value, dict | list), min_depth=max_depth)
            raise BadInputError(
                f"{_render(_under(root, path), label)}: JSON nested deeper than the limit of {max_depth} levels"
            )
        level = [child for value in containers for child in (value.values() if isinstance(value, dict) else value)]


def _check_text(document: Any, label: str, root: tuple[str, ...]) -> None:
    for path, value, is_key in _texts(document):
        problem = text_problem(value)
        if problem:
            where = _render(_under(root, path), label)
            raise BadInputError(f"{where}: {'a key ' if is_key else ''}{problem}")


def _texts(document: Any) -> Iterator[tuple[tuple[str | int, ...], str, bool]]:
    """Every string and object key with its path, depth first, without recursion."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), document)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            yield path, value, False
        elif isinstance(value, dict):
            for key, item in value.items():
                yield (*path, key), key, True
                stack.append(((*path, key), item))
        elif isinstance(value, list):
            stack.extend(((*path, index), item) for index, item in enumerate(value))


def _path_to(
    document: Any, wanted: Callable[[Any], bool], *, min_depth: int = 0
) -> tuple[str | int, ...] | None:
    """The path of the first value ``wanted`` accepts at least ``min_depth`` containers down, or None."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), document)]
    while stack:
        path, value = stack.pop()
        if len(path) >= min_depth and wanted(value):
            return path
        if isinstance(value, dict):
            stack.extend(((*path, key), item) for key, item in value.items())
        elif isinstance(value, list):
            stack.extend(((*path, index), item) for index, item in enumerate(value))
    return None


def _at(document: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        document = document[step]
    return document


def _render(path: tuple[str | int, ...] | None, label: str) -> str:
    """``("records", 0, "input")`` → ``records[0].input``; odd keys as ``["a b"]`` (ASCII-escaped)."""
    if not path:
        return label
    out = ""
    for step in path:
        if isinstance(step, int):
            out += f"[{step}]"
        elif _PLAIN_KEY.fullmatch(step):
            out += f".{step}" if out else step
        else:
            out += f"[{json.dumps(step)}]"
    return out


# --- protobuf messages ---------------------------------------------------------------------------


def check_message(message: Message, *, max_depth: int = MAX_MESSAGE_DEPTH) -> None:
    """Refuse a message with unstorable text, a non-finite float or nesting deeper than ``max_depth``.

    Paths use the JSON names (``records[0].input.text``); Struct, Value and ListValue read as the JSON they
    stand for (``metadata.a.b``), since that is how a caller wrote them.
    """
    stack: list[tuple[Message, tuple[str | int, ...], int]] = [(message, (), 1)]
    while stack:
        current, path, depth = stack.pop()
        if depth > max_depth:
            raise BadInputError(
                f"{_render(path, 'request')}: nested deeper than the limit of {max_depth} protobuf message levels "
                "(a JSON object inside a record takes 3 levels per level of nesting)"
            )
        transparent = current.DESCRIPTOR.full_name in _JSON_TYPES
        for field, value in current.ListFields():
            here = path if transparent else (*path, field.json_name)
            if is_map(field):
                value_field = message_type(field).fields_by_name["value"]
                for key, item in value.items():
                    item_path = (*here, key if isinstance(key, str) else str(key))
                    if isinstance(key, str):
                        _check_scalar(key, item_path, key_of_map=True)
                    if value_field.message_type is not None:  # the map entry is a message level of its own
                        stack.append((item, item_path, depth + 2))
                    else:
                        _check_scalar(item, item_path)
            elif is_repeated(field):
                for index, item in enumerate(value):
                    if field.message_type is not None:
                        stack.append((item, (*here, index), depth + 1))
                    else:
                        _check_scalar(item, (*here, index))
            elif field.message_type is not None:
                stack.append((value, here, depth + 1))
            elif field.type != FieldDescriptor.TYPE_BYTES:
                _check_scalar(value, here)


_JSON_TYPES = frozenset({"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"})


def _check_scalar(value: Any, path: tuple[str | int, ...], *, key_of_map: bool = False) -> None:
    if isinstance(value, str):
        problem = text_problem(value)
        if problem:
            raise BadInputError(f"{_render(path, 'request')}: {'a key ' if key_of_map else ''}{problem}")
    elif isinstance(value, float) and not math.isfinite(value):
        raise BadInputError(
            f"{_render(path, 'request')}: {value} is not accepted; a finite number is expected "
            "(NaN and Infinity are not)"
        )


def is_repeated(field: FieldDescriptor) -> bool:
    return field.is_repeated


def is_map(field: FieldDescriptor) -> bool:
    return is_repeated(field) and field.message_type is not None and field.message_type.GetOptions().map_entry


def descriptor_of(message: Message | type[Message]) -> Descriptor:
    """``message.DESCRIPTOR`` (of a message or its class), typed as the ``Descriptor`` it is.

    types-protobuf declares it as the union of the pure-Python and the upb descriptor classes; under upb the
    object passes ``isinstance(d, Descriptor)`` (the Python class's metaclass recognises upb descriptors), so
    the narrowing is exact: the stub is looser than the runtime.
    """
    return cast(Descriptor, message.DESCRIPTOR)


def message_type(field: FieldDescriptor) -> Descriptor:
    """The type of a message (or map) field; asking it of a scalar field is a bug in the caller."""
    if field.message_type is None:
        raise TypeError(f"{field.full_name} is not a message field")
    return field.message_type


def enum_type(field: FieldDescriptor) -> EnumDescriptor:
    """The type of an enum field; asking it of another field is a bug in the caller."""
    if field.enum_type is None:
        raise TypeError(f"{field.full_name} is not an enum field")
    return field.enum_type
