"""YAML (or JSON) documents into protobuf messages, with errors that name the file, the line and the field path.

Run specs and online policies are the protobuf JSON mapping of their message with two conveniences: human
durations (``10m``, ``250ms``) in Duration fields, and either spelling of a field (``wallClock`` or
``wall_clock``). ``to_message_dict`` walks a document against the message descriptors before protobuf parses it,
so an unknown or mistyped field is a ``BadInputError`` such as ``run.yaml:12: spec.evaluators[1].parms: unknown
field; did you mean params?``; every problem of a document is reported at once (``SpecProblems``).
``apply_overrides`` sets dotted paths (``--set``) before parsing.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from evalsi.durations import parse_duration
from evalsi.edge_checks import enum_type, message_type
from evalsi.errors import BadInputError

API_VERSION = "evals.si/v1alpha1"

FieldPath = tuple[str | int, ...]
Lines = Mapping[FieldPath, int]

_INTS = {
    FieldDescriptor.TYPE_INT32,
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT32,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED32,
    FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_SFIXED32,
    FieldDescriptor.TYPE_SFIXED64,
}
_FLOATS = {FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT}
_ANY_JSON = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}


def read_text(path: str | Path) -> str:
    file = Path(path)
    try:
        return file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInputError(f"{file}: no such file") from None
    except IsADirectoryError:
        raise BadInputError(f"{file}: is a directory; expected an EvalRun YAML file") from None
    except UnicodeDecodeError as exc:
        raise BadInputError(f"{file}: not UTF-8 text ({exc.reason})") from None


def parse_document(text: str, source: str, *, kind: str = "EvalRun") -> tuple[dict[str, Any], dict[FieldPath, int]]:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        document = yaml.safe_load(text) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        if text.lstrip().startswith("{"):  # JSON that YAML refuses (tab indentation): JSON's own errors
            return _json_document(text, source, kind), {}
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        raise BadInputError(f"{where}: invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise BadInputError(f"{source}: invalid YAML: {exc}") from None
    if document is None or node is None:
        raise BadInputError(f"{source}: empty; expected an {kind} document (apiVersion: {API_VERSION})")
    if not isinstance(document, dict):
        raise BadInputError(f"{source}: expected a mapping (an {kind} document), got {kind_of(document)}")
    lines: dict[FieldPath, int] = {}
    _node_lines(node, (), lines, source)
    return document, lines


def _json_document(text: str, source: str, kind: str) -> dict[str, Any]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInputError(f"{source}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    if not isinstance(document, dict):
        raise BadInputError(f"{source}: expected a mapping (an {kind} document), got {kind_of(document)}")
    return document


def _node_lines(node: yaml.Node, path: FieldPath, lines: dict[FieldPath, int], source: str) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key_node, value_node in node.value:
            key = key_node.value
            here = (*path, key)
            if key in seen:
                raise BadInputError(f"{source}:{key_node.start_mark.line + 1}: {_format_path(here)}: duplicate key")
            seen.add(key)
            lines[here] = key_node.start_mark.line + 1
            _node_lines(value_node, here, lines, source)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines[(*path, index)] = item.start_mark.line + 1
            _node_lines(item, (*path, index), lines, source)


class SpecProblems(BadInputError):
    """Every problem of a spec document at once, each naming its field path (and its file and line when known)."""

    def __init__(self, problems: Sequence[str], *, source: str = "", what: str = "the spec") -> None:
        self.problems = list(problems)
        prefix = f"{source}: " if source else ""
        if len(self.problems) == 1:
            text = prefix + self.problems[0]
        else:
            text = f"{prefix}{len(self.problems)} problems in {what}:\n" + "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(text)


def problems_of(error: BadInputError) -> list[str]:
    """The problems an error lists: a ``SpecProblems``' own, or its message as one."""
    return list(error.problems) if isinstance(error, SpecProblems) else [str(error)]


class Where:
    """Formats errors with the source and, when known, the YAML line of a path; ``report`` collects them, so a
    document's every problem is listed at once (``refuse_reported``)."""

    def __init__(self, source: str, lines: Lines) -> None:
        self.source = source
        self.lines = lines
        self.problems: list[str] = []
        self.paths: list[FieldPath] = []  # where each reported problem is

    def text(self, path: FieldPath, message: str) -> str:
        line = None
        probe = path
        while probe and line is None:
            line = self.lines.get(probe)
            probe = probe[:-1]
        prefix = f"{self.source}:{line}" if line is not None else self.source
        return f"{prefix}: {_format_path(path)}: {message}"

    def error(self, path: FieldPath, message: str) -> BadInputError:
        return BadInputError(self.text(path, message))

    def report(self, path: FieldPath, message: str, *, about: FieldPath | None = None) -> Any:
        """Record a problem; returns the marker that drops the value at fault from the converted document.
        ``about``: what the problem makes unreliable, when more than the field itself."""
        self.problems.append(self.text(path, message))
        self.paths.append(path if about is None else about)
        return _DROPPED

    def locate(self, problem: str) -> str:
        """A problem that starts with a field path (``spec.gates[1]: ...``), prefixed with the file and the line."""
        path = leading_path(problem)
        line = None
        while path and line is None:
            line = self.lines.get(path)
            path = path[:-1]
        return f"{self.source}:{line}: {problem}" if line is not None else f"{self.source}: {problem}"

    def covers(self, problem: str) -> bool:
        """Whether a problem is about a field already reported (or one inside or around it): it would repeat it."""
        return _overlaps(leading_path(problem), self.paths)

    def refuse_reported(self, what: str) -> None:
        """One ``SpecProblems`` with every problem reported so far (each already names the file and line)."""
        if self.problems:
            raise SpecProblems(self.problems, what=what)


_DROPPED = object()  # a value with a problem: left out, so the rest of the document is still checked
_LEADING_PATH = re.compile(r"^[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w/.-]*?(?=[.\[:\s(]|$)|\[\d+\])*")


def leading_path(problem: str) -> FieldPath:
    """The field path a problem starts with: ``spec.evaluators[1] (x): ...`` gives ("spec", "evaluators", 1)."""
    match = _LEADING_PATH.match(problem)
    if match is None:
        return ()
    parts: list[str | int] = []
    for piece in re.findall(r"[^.\[\]]+|\[\d+\]", match.group(0)):
        parts.append(int(piece[1:-1]) if piece.startswith("[") else piece)
    return tuple(parts)


def merge_problems(first: Sequence[str], more: Sequence[str]) -> list[str]:
    """``first``, then those of ``more`` that are not about a field ``first`` already speaks of."""
    reported = [leading_path(problem) for problem in first]
    return [*first, *(p for p in more if not _overlaps(leading_path(p), reported))]


def _overlaps(path: FieldPath, reported: Sequence[FieldPath]) -> bool:
    mine = _comparable(path)
    if not mine:
        return False
    for other in map(_comparable, reported):
        common = min(len(mine), len(other))
        if common and mine[:common] == other[:common]:
            return True
    return False


def _comparable(path: FieldPath) -> FieldPath:
    # wallClock and wall_clock name one field
    return tuple(p.replace("_", "").lower() if isinstance(p, str) else p for p in path)


def _format_path(path: FieldPath) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(document)"


def kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def _fields(descriptor: Descriptor) -> dict[str, FieldDescriptor]:
    out: dict[str, FieldDescriptor] = {}
    for field in descriptor.fields:
        out[field.name] = field
        out[field.json_name] = field
    return out


def to_message_dict(value: Any, descriptor: Descriptor, path: FieldPath, where: Where) -> Any:
    """Check ``value`` against a message type and return it with durations converted.

    Problems are reported to ``where`` (``where.refuse_reported`` raises them all at once); a value at fault is
    left out of the result, so the rest of the document is still checked."""
    name = descriptor.full_name
    if name in _ANY_JSON:
        if name == "google.protobuf.Struct" and not isinstance(value, Mapping):
            return where.report(path, f"must be a mapping, got {kind_of(value)}")
        if name == "google.protobuf.ListValue" and not isinstance(value, list):
            return where.report(path, f"must be a list, got {kind_of(value)}")
        return _check_json(value, path, where)
    if name == "google.protobuf.Duration":
        try:
            return parse_duration(value)
        except ValueError as exc:
            return where.report(path, str(exc))
    if name == "google.protobuf.Timestamp":
        if not isinstance(value, str):
            return where.report(path, f"must be an RFC 3339 timestamp string, got {kind_of(value)}")
        return value
    if not isinstance(value, Mapping):
        return where.report(path, f"must be a mapping ({descriptor.name}), got {kind_of(value)}")
    fields = _fields(descriptor)
    out: dict[str, Any] = {}
    chosen: dict[str, tuple[str, FieldPath]] = {}
    for key, item in value.items():
        here = (*path, key)
        if not isinstance(key, str):
            where.report(here, f"keys must be strings, got {kind_of(key)}")
            continue
        field = fields.get(key)
        if field is None:
            # A misspelt field of a list item (spec.evaluators[2].reff) leaves that item's other problems moot.
            about = path if path and isinstance(path[-1], int) else None
            where.report(here, "unknown field" + _suggestion(key, fields, descriptor), about=about)
            continue
        if item is None:  # `key:` with nothing after it: the field stays unset
            continue
        if field.json_name in out:
            where.report(here, f"given twice (as {field.name} and {field.json_name})")
            continue
        oneof = field.containing_oneof
        if oneof is not None and len(oneof.fields) > 1:
            if oneof.name in chosen:
                other, _ = chosen[oneof.name]
                members = ", ".join(f.json_name for f in oneof.fields)
                where.report(here, f"conflicts with {other}: set only one of {members}")
                continue
            chosen[oneof.name] = (key, here)
        converted = _convert_field(item, field, here, where)
        if converted is not _DROPPED:
            out[field.json_name] = converted
    return out


def _suggestion(key: str, fields: Mapping[str, FieldDescriptor], descriptor: Descriptor) -> str:
    # Suggest in the writer's style: snake_case when they used an underscore, else the camelCase of the docs.
    snake = "_" in key
    preferred = [f.name if snake else f.json_name for f in descriptor.fields]
    close = difflib.get_close_matches(key, preferred, n=1, cutoff=0.6) or difflib.get_close_matches(
        key, list(fields), n=1, cutoff=0.6
    )
    if close:
        return f"; did you mean {close[0]}?"
    known = ", ".join(f.json_name for f in descriptor.fields)
    return f"; {descriptor.name} fields: {known}"


def _convert_field(value: Any, field: FieldDescriptor, path: FieldPath, where: Where) -> Any:
    message = field.message_type
    if message is not None and message.GetOptions().map_entry:
        if not isinstance(value, Mapping):
            return where.report(path, f"must be a mapping, got {kind_of(value)}")
        value_field = message.fields_by_name["value"]
        out = {}
        for key, item in value.items():
            if item is None:
                where.report((*path, key), "has no value")
                continue
            converted = _convert_single(item, value_field, (*path, key), where)
            if converted is not _DROPPED:
                out[str(key)] = converted
        return out
    if field.is_repeated:
        if not isinstance(value, list):
            return where.report(path, f"must be a list, got {kind_of(value)}")
        items = [_convert_single(item, field, (*path, index), where) for index, item in enumerate(value)]
        # A list with an item at fault is left out whole: dropping the item would renumber the rest.
        return _DROPPED if any(item is _DROPPED for item in items) else items
    return _convert_single(value, field, path, where)


def _convert_single(value: Any, field: FieldDescriptor, path: FieldPath, where: Where) -> Any:
    kind = field.type
    if kind == FieldDescriptor.TYPE_MESSAGE:
        return to_message_dict(value, message_type(field), path, where)
    if kind == FieldDescriptor.TYPE_STRING:
        if not isinstance(value, str):
            return where.report(path, f"must be a string, got {kind_of(value)} {value!r}")
        return value
    if kind == FieldDescriptor.TYPE_BOOL:
        if not isinstance(value, bool):
            return where.report(path, f"must be true or false, got {kind_of(value)} {value!r}")
        return value
    if kind in _INTS:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            return where.report(path, f"must be an integer, got {kind_of(value)} {value!r}")
        return value
    if kind in _FLOATS:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return where.report(path, f"must be a number, got {kind_of(value)} {value!r}")
        return value
    if kind == FieldDescriptor.TYPE_ENUM:
        names = [v.name for v in enum_type(field).values]
        if value not in names and not (isinstance(value, int) and not isinstance(value, bool)):
            return where.report(path, f"must be one of {', '.join(names)}, got {value!r}")
        return value
    if kind == FieldDescriptor.TYPE_BYTES:
        if not isinstance(value, str):
            return where.report(path, f"must be base64 text, got {kind_of(value)}")
        return value
    return where.report(path, f"unsupported field type {kind}")  # pragma: no cover - no such field in the API


def _check_json(value: Any, path: FieldPath, where: Where) -> Any:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return where.report(path, f"must be plain JSON values (strings, numbers, booleans, lists, maps): {exc}")
    return value


def apply_overrides(document: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``document`` with dotted paths set: ``{"spec.trials": 5, "spec.evaluators.0.alias": "em"}``.

    A numeric part indexes a list (the index must exist); missing mapping keys are created. The result is
    parsed like the file, so a misspelt path is reported as an unknown field.
    """
    result = json.loads(json.dumps(document, default=str))
    for dotted, value in overrides.items():
        parts = [p for p in dotted.split(".") if p]
        if not parts:
            raise BadInputError(f"--set {dotted!r}: expected a dotted path such as spec.trials")
        node: Any = result
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            where = ".".join(parts[: index + 1])
            if isinstance(node, list):
                if not part.isdigit() or int(part) >= len(node):
                    raise BadInputError(f"--set {dotted}: {where}: no such list item (the list has {len(node)})")
                if last:
                    node[int(part)] = value
                else:
                    node = node[int(part)]
            elif isinstance(node, dict):
                if last:
                    node[part] = value
                else:
                    if not isinstance(node.get(part), dict | list):
                        node[part] = {}
                    node = node[part]
            else:
                raise BadInputError(f"--set {dotted}: {'.'.join(parts[:index])} is not a mapping or a list")
    return result
