"""HTTP/JSON ⇄ protobuf, derived from the ``google.api.http`` options of the service descriptors.

Routes are never written by hand: each RPC's rule (verb, path template, body) becomes a
:class:`Route`. Path templates follow google/api/http.proto: literal segments, ``*`` and ``**``,
``{field}`` and ``{field=pattern}`` captures and a ``:verb`` suffix (``/v1alpha1/runs/{id}:cancel``).
Request messages are built from the JSON body (``body: "*"`` or one field), the path captures and, for
fields neither of those bind, the query string (snake_case or lowerCamel names, dotted for nested
fields, repeated by repeating the parameter, enums by name). Every error names the field at fault.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from google.api import annotations_pb2, http_pb2
from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message

from evalsi.edge_checks import check_message, descriptor_of, enum_type, is_map, is_repeated, load_json, message_type
from evalsi.errors import BadInputError

_VERBS = ("get", "put", "post", "delete", "patch")
_INT_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}
_FLOATS = (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT)
# Well-known types have their own JSON forms; they are leaves when locating an error.
_WKT_HELP = {
    "google.protobuf.Timestamp": 'an RFC 3339 timestamp string such as "2024-05-01T12:00:00Z"',
    "google.protobuf.Duration": 'a duration string such as "1.5s"',
    "google.protobuf.Struct": "a JSON object",
    "google.protobuf.Value": "any JSON value",
    "google.protobuf.ListValue": "a JSON array",
    "google.protobuf.FieldMask": 'a comma-separated string of field paths such as "name,labels"',
    "google.protobuf.Any": 'an object with "@type"',
    "google.protobuf.DoubleValue": "a number",
    "google.protobuf.FloatValue": "a number",
    "google.protobuf.Int64Value": "an integer",
    "google.protobuf.UInt64Value": "a non-negative integer",
    "google.protobuf.Int32Value": "an integer",
    "google.protobuf.UInt32Value": "a non-negative integer",
    "google.protobuf.BoolValue": "true or false",
    "google.protobuf.StringValue": "a string",
    "google.protobuf.BytesValue": "a base64 string",
}


# --- path templates ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PathTemplate:
    """A compiled ``google.api.http`` path template."""

    text: str
    regex: re.Pattern[str]
    verb: str
    # The field path each capture group (v0, v1, ...) sets.
    variables: tuple[str, ...]
    literals: int

    @classmethod
    def parse(cls, text: str) -> PathTemplate:
        if not text.startswith("/"):
            raise ValueError(f"path template {text!r} must start with '/'")
        path, verb = _split_template_verb(text)
        pattern = ["^"]
        variables: list[str] = []
        literals = 0
        for segment in _split_top(path[1:], "/"):
            pattern.append("/")
            if segment.startswith("{"):
                if not segment.endswith("}"):
                    raise ValueError(f"path template {text!r}: bad variable segment {segment!r}")
                field, _, sub = segment[1:-1].partition("=")
                if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", field):
                    raise ValueError(f"path template {text!r}: bad field path {field!r}")
                inner = "/".join(_segment_regex(part, text) for part in (sub or "*").split("/"))
                pattern.append(f"(?P<v{len(variables)}>{inner})")
                variables.append(field)
            else:
                if segment not in ("*", "**"):
                    literals += 1
                pattern.append(_segment_regex(segment, text))
        pattern.append("$")
        return cls(text, re.compile("".join(pattern)), verb, tuple(variables), literals)

    def match(self, path: str, verb: str) -> dict[str, str] | None:
        """Captures by field path, percent-decoded, or None when the (raw) path does not match."""
        if verb != self.verb:
            return None
        found = self.regex.match(path)
        if found is None:
            return None
        return {field: unquote(found.group(f"v{index}")) for index, field in enumerate(self.variables)}


def _segment_regex(segment: str, template: str) -> str:
    if segment == "*":
        return "[^/]+"
    if segment == "**":
        return ".+"
    if not segment or any(char in segment for char in "{}*"):
        raise ValueError(f"path template {template!r}: bad segment {segment!r}")
    return re.escape(segment)


def _split_top(text: str, separator: str) -> list[str]:
    """Split at separators outside braces."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        depth += {"{": 1, "}": -1}.get(char, 0)
        if char == separator and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _split_template_verb(text: str) -> tuple[str, str]:
    depth, colon, slash = 0, -1, -1
    for index, char in enumerate(text):
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth == 0 and char == "/":
            slash = index
        elif depth == 0 and char == ":":
            colon = index
    if colon > slash:
        return text[:colon], text[colon + 1 :]
    return text, ""


def split_verb(raw_path: str) -> tuple[str, str]:
    """``/v1alpha1/runs/r1:cancel`` → (``/v1alpha1/runs/r1``, ``cancel``), on the raw (encoded) path."""
    slash = raw_path.rfind("/")
    colon = raw_path.rfind(":")
    if colon > slash:
        return raw_path[:colon], raw_path[colon + 1 :]
    return raw_path, ""


# --- routes --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    """One HTTP binding of one RPC."""

    http_method: str
    template: PathTemplate
    body: str
    rpc: str
    method: MethodDescriptor

    @property
    def path(self) -> str:
        return self.template.text


def http_rules(method: MethodDescriptor) -> list[http_pb2.HttpRule]:
    """The method's rule and its additional bindings; empty when it has no ``google.api.http`` option."""
    options = method.GetOptions()
    if not options.HasExtension(annotations_pb2.http):
        return []
    rule = options.Extensions[annotations_pb2.http]
    return [rule, *rule.additional_bindings]


def routes_for(methods: Iterable[MethodDescriptor]) -> list[Route]:
    """Every HTTP route of these methods. Client-streaming RPCs have none (gRPC only)."""
    routes: list[Route] = []
    for method in methods:
        rpc = f"{method.containing_service.full_name}/{method.name}"
        for rule in http_rules(method):
            if method.client_streaming:
                raise ValueError(f"{rpc}: client-streaming RPCs cannot have an HTTP binding")
            pattern = rule.WhichOneof("pattern")
            if pattern in _VERBS:
                verb, path = pattern.upper(), getattr(rule, pattern)
            elif pattern == "custom":
                verb, path = rule.custom.kind.upper(), rule.custom.path
            else:
                raise ValueError(f"{rpc}: google.api.http rule without a pattern")
            if rule.body not in ("", "*"):
                field = method.input_type.fields_by_name.get(rule.body)
                if field is None or field.message_type is None or is_repeated(field):
                    raise ValueError(f"{rpc}: body {rule.body!r} must name a singular message field")
            routes.append(Route(verb, PathTemplate.parse(path), rule.body, rpc, method))
    return routes


class RouteNotFound(LookupError):
    pass


class MethodNotAllowed(LookupError):
    def __init__(self, allowed: Sequence[str]) -> None:
        super().__init__(", ".join(allowed))
        self.allowed = list(allowed)


class Router:
    """Finds the route of an HTTP request: 404 when no template matches, 405 when only the verb differs."""

    def __init__(self, routes: Iterable[Route]) -> None:
        # Templates with more literal segments win over broader ones.
        self.routes = sorted(routes, key=lambda r: (-r.template.literals, len(r.template.variables)))

    def match(self, http_method: str, raw_path: str) -> tuple[Route, dict[str, str]]:
        path, verb = split_verb(raw_path)
        allowed: list[str] = []
        for route in self.routes:
            captures = route.template.match(path, verb)
            if captures is None:
                continue
            if route.http_method == http_method.upper():
                return route, captures
            allowed.append(route.http_method)
        if allowed:
            raise MethodNotAllowed(sorted(set(allowed)))
        raise RouteNotFound(raw_path)


# --- building requests ---------------------------------------------------------------------------


def build_request(
    route: Route,
    captures: Mapping[str, str],
    query: Iterable[tuple[str, str]],
    body: bytes,
) -> Message:
    """The request message of an HTTP call: body first, then path captures, then the query string."""
    message = message_factory.GetMessageClass(route.method.input_type)()
    if route.body == "*":
        parse_json_into(body, message)
    elif route.body:
        parse_json_into(body, getattr(message, route.body), where=route.body)
    for field_path, value in captures.items():
        _set_capture(message, field_path, value)
    params: dict[str, list[str]] = {}
    for key, value in query:
        params.setdefault(key, []).append(value)
    if params and route.body == "*":
        name = next(iter(params))
        raise BadInputError(
            f"{name}: query parameters are not accepted by {route.http_method} {route.path}; "
            "put the fields in the JSON body"
        )
    bound = set(captures) | ({route.body} if route.body else set())
    spelled: dict[str, str] = {}
    for name, values in params.items():
        proto_path = ".".join(f.name for f in _resolve(descriptor_of(message), name, what="query parameter"))
        if proto_path in spelled:
            raise BadInputError(f"{name}: {spelled[proto_path]} names the same field; give it once")
        spelled[proto_path] = name
        set_query_param(message, name, values, bound=bound)
    # Path and query strings reach the stores as they are: the same checks as the body, on the whole message.
    check_message(message)
    return message


def _set_capture(message: Message, field_path: str, value: str) -> None:
    fields = _resolve(descriptor_of(message), field_path, what="path field")
    target = _descend(message, fields)
    field = fields[-1]
    current = getattr(target, field.name)
    converted = _convert(field, value, field_path)
    if current and current != converted:
        raise BadInputError(f"{field_path}: the path says {value!r} but the body says {current!r}; give one")
    setattr(target, field.name, converted)


def set_query_param(message: Message, name: str, values: Sequence[str], *, bound: Iterable[str] = ()) -> None:
    """Set the field a query parameter names (``page_size`` or ``pageSize``, ``a.b`` for nested)."""
    fields = _resolve(descriptor_of(message), name, what="query parameter")
    proto_path = ".".join(field.name for field in fields)
    if proto_path in set(bound):
        raise BadInputError(f"{name}: already given in the path; do not repeat it as a query parameter")
    target = _descend(message, fields)
    field = fields[-1]
    if is_map(field):
        raise BadInputError(f"{name}: map fields cannot be set from the query string")
    if is_repeated(field):
        container = getattr(target, field.name)
        for value in values:
            if field.message_type is not None:
                _parse_wkt(container.add(), field, value, name)
            else:
                container.append(_convert(field, value, name))
        return
    if len(values) > 1:
        raise BadInputError(f"{name}: given {len(values)} times, but it takes one value")
    if field.message_type is not None:
        _parse_wkt(getattr(target, field.name), field, values[0], name)
    else:
        setattr(target, field.name, _convert(field, values[0], name))


def _resolve(descriptor: Descriptor, dotted: str, *, what: str) -> list[FieldDescriptor]:
    fields: list[FieldDescriptor] = []
    current: Descriptor | None = descriptor
    for index, part in enumerate(dotted.split(".")):
        if current is None:
            raise BadInputError(f"{dotted}: unknown {what}; {'.'.join(dotted.split('.')[:index])} has no fields")
        field = current.fields_by_name.get(part) or _by_json_name(current).get(part)
        if field is None:
            accepted = ", ".join(sorted(f.json_name for f in current.fields))
            raise BadInputError(f"{dotted}: unknown {what}; accepted: {accepted}")
        last = index == len(dotted.split(".")) - 1
        if not last and (field.message_type is None or is_repeated(field) or _is_wkt(field)):
            raise BadInputError(f"{dotted}: {field.name} is not a message whose fields can be named")
        fields.append(field)
        current = field.message_type
    return fields


def _by_json_name(descriptor: Descriptor) -> dict[str, FieldDescriptor]:
    return {field.json_name: field for field in descriptor.fields}


def _descend(message: Message, fields: Sequence[FieldDescriptor]) -> Message:
    for field in fields[:-1]:
        message = getattr(message, field.name)
    return message


def _convert(field: FieldDescriptor, text: str, name: str) -> Any:
    """A query or path string as the field's Python value."""
    kind = field.type
    try:
        if kind == FieldDescriptor.TYPE_STRING:
            return text
        if kind == FieldDescriptor.TYPE_BOOL:
            lowered = text.strip().lower()
            if lowered in ("true", "1"):
                return True
            if lowered in ("false", "0", ""):
                return False
            raise ValueError
        if kind in _INT_RANGES:
            number = int(text.strip())
            low, high = _INT_RANGES[kind]
            if not low <= number <= high:
                raise ValueError
            return number
        if kind in _FLOATS:
            real = float(text.strip())
            if math.isnan(real) and text.strip() not in ("NaN", "nan"):
                raise ValueError
            return real
        if kind == FieldDescriptor.TYPE_BYTES:
            padded = text + "=" * (-len(text) % 4)
            return base64.urlsafe_b64decode(padded.replace("+", "-").replace("/", "_"))
        if kind == FieldDescriptor.TYPE_ENUM:
            return _enum_number(field, text)
    except (ValueError, binascii.Error):
        pass
    raise BadInputError(f"{name}: expected {_expected(field)}, got {text!r}")


def _enum_number(field: FieldDescriptor, text: str) -> int:
    values = enum_type(field).values
    wanted = text.strip()
    for value in values:
        if value.name == wanted:
            return value.number
    upper = wanted.upper()
    matches = [value for value in values if value.name == upper or value.name.endswith("_" + upper)]
    if len(matches) == 1:
        return matches[0].number
    if wanted.lstrip("-").isdigit() and int(wanted) in enum_type(field).values_by_number:
        return int(wanted)
    raise ValueError(text)


def _parse_wkt(target: Message, field: FieldDescriptor, text: str, name: str) -> None:
    if not _is_wkt(field) or message_type(field).full_name in (
        "google.protobuf.Struct",
        "google.protobuf.ListValue",
        "google.protobuf.Any",
    ):
        raise BadInputError(f"{name}: a message; set its fields as {name}.<field>")
    try:
        json_format.Parse(json.dumps(text), target)
    except json_format.ParseError:
        raise BadInputError(f"{name}: expected {_expected(field)}, got {text!r}") from None


# --- JSON bodies ---------------------------------------------------------------------------------


def parse_json_into(body: bytes, message: Message, *, where: str = "") -> None:
    """Fill ``message`` from a protobuf-JSON body; unknown fields and wrong types name their path.

    An empty body is an empty object, so ``POST /v1alpha1/runs/{id}:cancel`` needs none.
    """
    label = where or "request body"
    if not body.strip():
        return
    try:
        obj = load_json(body, label=label, object_pairs_hook=_no_duplicates, root=(where,) if where else ())
    except UnicodeDecodeError as exc:
        raise BadInputError(f"{label}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise BadInputError(f"{label}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except _DuplicateKey as exc:
        raise BadInputError(f"{label}: key {exc.args[0]!r} appears twice in one object") from None
    if not isinstance(obj, dict):
        raise BadInputError(
            f"{label}: expected a JSON object ({message.DESCRIPTOR.full_name}), got {_describe(obj)}"
        )
    try:
        json_format.ParseDict(obj, message, ignore_unknown_fields=False)
    except json_format.ParseError as exc:
        problem = _locate(obj, descriptor_of(message), where)
        raise BadInputError(problem or f"{label}: {_clean(str(exc))}") from None


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _locate(obj: Mapping[str, Any], descriptor: Descriptor, path: str) -> str | None:
    """The first problem in ``obj`` as ``path: what is wrong``, found by parsing field by field."""
    by_json = _by_json_name(descriptor)
    oneofs: dict[str, str] = {}
    for key, value in obj.items():
        here = f"{path}.{key}" if path else key
        field = descriptor.fields_by_name.get(key) or by_json.get(key)
        if field is None:
            accepted = ", ".join(sorted(f.json_name for f in descriptor.fields))
            return f"{here}: unknown field; accepted fields of {descriptor.name}: {accepted}"
        oneof = field.containing_oneof
        if oneof is not None and value is not None:
            if oneof.name in oneofs:
                return f"{here}: {oneofs[oneof.name]} is already set; give only one of {oneof.name}"
            oneofs[oneof.name] = key
        if value is None:
            continue
        problem = _locate_field(field, key, value, here)
        if problem:
            return problem
    return None


def _locate_field(field: FieldDescriptor, key: str, value: Any, here: str) -> str | None:
    if is_map(field):
        if not isinstance(value, dict):
            return f"{here}: expected a JSON object (a map), got {_describe(value)}"
        value_field = message_type(field).fields_by_name["value"]
        for map_key, item in value.items():
            item_path = f"{here}[{json.dumps(map_key)}]"
            if _is_plain_message(value_field) and isinstance(item, dict):
                problem = _locate(item, message_type(value_field), item_path)
            else:
                problem = _try(field, key, {map_key: item}, item_path, value_field)
            if problem:
                return problem
        return None
    if is_repeated(field):
        if not isinstance(value, list):
            return f"{here}: expected a JSON array, got {_describe(value)}"
        for index, item in enumerate(value):
            item_path = f"{here}[{index}]"
            if _is_plain_message(field) and isinstance(item, dict):
                problem = _locate(item, message_type(field), item_path)
            else:
                problem = _try(field, key, [item], item_path, field)
            if problem:
                return problem
        return None
    if _is_plain_message(field):
        if not isinstance(value, dict):
            return f"{here}: expected a JSON object ({message_type(field).name}), got {_describe(value)}"
        return _locate(value, message_type(field), here)
    return _try(field, key, value, here, field)


def _try(field: FieldDescriptor, key: str, value: Any, here: str, shown: FieldDescriptor) -> str | None:
    owner = field.containing_type
    assert owner is not None  # fields found through a message's descriptor all belong to it
    container = message_factory.GetMessageClass(owner)()
    try:
        json_format.ParseDict({key: value}, container, ignore_unknown_fields=False)
    except json_format.ParseError:
        item = next(iter(value.values())) if isinstance(value, dict) and is_map(field) else value
        item = item[0] if isinstance(item, list) and is_repeated(field) and not is_map(field) else item
        return f"{here}: expected {_expected(shown)}, got {_describe(item)}"
    return None


def _expected(field: FieldDescriptor) -> str:
    if field.message_type is not None:
        return _WKT_HELP.get(field.message_type.full_name, f"a JSON object ({field.message_type.name})")
    kind = field.type
    if kind == FieldDescriptor.TYPE_STRING:
        return "a string"
    if kind == FieldDescriptor.TYPE_BOOL:
        return "true or false"
    if kind in _INT_RANGES:
        low, high = _INT_RANGES[kind]
        return f"an integer from {low} to {high}"
    if kind in _FLOATS:
        return "a number"
    if kind == FieldDescriptor.TYPE_BYTES:
        return "a base64 string"
    if kind == FieldDescriptor.TYPE_ENUM:
        names = [value.name for value in enum_type(field).values]
        return "one of " + ", ".join(names)
    return "a value of another type"


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _clean(message: str) -> str:
    """json_format's message without its 'Failed to parse x field:' chain and trailing noise."""
    message = re.sub(r"^(Failed to parse \S+ field: )+", "", message.strip())
    return message.split("\n")[0].rstrip(".")


def _is_wkt(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.full_name in _WKT_HELP


def _is_plain_message(field: FieldDescriptor) -> bool:
    return field.message_type is not None and not _is_wkt(field)


# --- responses -----------------------------------------------------------------------------------


def to_json(message: Message) -> str:
    """The protobuf JSON mapping of a response, on one line (so it also serves as an NDJSON line)."""
    return json_format.MessageToJson(message, indent=None)
