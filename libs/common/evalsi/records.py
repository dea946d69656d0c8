"""Records and their content: building them from plain Python values, reading them back, hashing them.

The conventions (DESIGN.md): a string becomes ``Content.text``; an object with exactly one of
``text``/``messages``/``json``/``row`` becomes that content; anything else becomes ``json``. A ``row`` is a
tabular prediction: ``{"row": {"features": {...}, "prediction": ..., "probabilities": {"<class>": p}}}``, each
part optional.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
from collections.abc import Callable, Mapping
from operator import methodcaller
from typing import Any

from google.protobuf import json_format, struct_pb2

from evalsi.v1alpha1.record_pb2 import Content, Message, Messages, Record, TabularRow, ToolCall

RECORD_FIELDS = ("id", "input", "output", "reference", "context", "metadata")
ROW_PARTS = ("features", "prediction", "probabilities")


def to_value(obj: Any, *, into: struct_pb2.Value | None = None) -> struct_pb2.Value:
    """A plain JSON-like value as a ``Value``; written into ``into`` (an unset field) when given, saving a copy."""
    value = struct_pb2.Value() if into is None else into
    if obj is None:
        value.null_value = struct_pb2.NULL_VALUE
    elif isinstance(obj, bool):
        value.bool_value = obj
    elif isinstance(obj, int | float):
        value.number_value = obj
    elif isinstance(obj, str):
        value.string_value = obj
    elif isinstance(obj, Mapping):
        value.struct_value.SetInParent()  # so an empty object is still an object
        value.struct_value.update(obj)
    elif isinstance(obj, list | tuple):
        value.list_value.SetInParent()
        value.list_value.extend(obj)
    else:
        raise TypeError(f"cannot store a {type(obj).__name__} as JSON")
    return value


_WHOLE = 2.0**53  # a whole number below this comes back as an int: the double holds it exactly


def from_value(value: struct_pb2.Value) -> Any:
    """The plain value (what ``json_format.MessageToDict`` gives), whole numbers as ints (protobuf stores every
    number as a double). Read field by field: protobuf's JSON printer is several times slower, and metrics read a
    value a record. A NaN or infinite number is refused as the printer refuses it (``ValueError``)."""
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "number_value":
        number = value.number_value
        if number.is_integer() and abs(number) < _WHOLE:
            return int(number)
        return number if math.isfinite(number) else json_format.MessageToDict(value)  # raises, naming the number
    if kind == "list_value":  # a string item (an id, a label) read in place: no call an item
        return [item.string_value if item.WhichOneof("kind") == "string_value" else from_value(item)
                for item in value.list_value.values]
    if kind == "struct_value":
        return struct_to_dict(value.struct_value)
    if kind == "bool_value":
        return value.bool_value
    return None


def struct_to_dict(struct: struct_pb2.Struct) -> dict[str, Any]:
    """A Struct as a plain dict, whole numbers as ints (so an int param survives the round trip), its keys sorted.

    Sorted because a Struct keeps no order, and protobuf's map iterates in an order that changes from process to
    process: the same record would print differently in each (a judge's prompt missing the cache, output files
    that differ between runs). Sorting costs about 0.1 µs a struct."""
    fields = struct.fields
    return {key: from_value(fields[key]) for key in sorted(fields)}


def _messages(items: Any) -> Messages:
    out = Messages()
    for item in items:
        if not isinstance(item, Mapping) or "role" not in item:
            raise ValueError("each message needs a 'role'")
        message = Message(role=str(item["role"]), content=_message_text(item.get("content")))
        for key in ("tool_call_id", "name"):
            if item.get(key):
                setattr(message, key, str(item[key]))
        for call in item.get("tool_calls") or ():
            message.tool_calls.append(_tool_call(call))
        out.messages.append(message)
    return out


def _message_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    # OpenAI-style content parts: keep the text parts.
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return json.dumps(content, sort_keys=True)


def _tool_call(call: Mapping[str, Any]) -> ToolCall:
    nested = call.get("function")
    function = nested if isinstance(nested, Mapping) else call
    arguments = function.get("arguments", call.get("arguments"))
    if isinstance(arguments, str):
        with contextlib.suppress(json.JSONDecodeError):
            arguments = json.loads(arguments)
    tool_call = ToolCall(id=str(call.get("id", "")), name=str(function.get("name", "")))
    if arguments is not None:
        tool_call.arguments.CopyFrom(to_value(arguments))
    return tool_call


def to_content(obj: Any) -> Content:
    """Build a Content from a plain value, following the record conventions."""
    if isinstance(obj, Content):
        return obj
    if isinstance(obj, str):
        return Content(text=obj)
    if isinstance(obj, Mapping) and len(obj) == 1:
        ((key, inner),) = obj.items()
        if key == "text" and isinstance(inner, str):
            return Content(text=inner)
        if key == "messages" and isinstance(inner, list):
            return Content(messages=_messages(inner))
        if key == "json":
            return Content(json=to_value(inner))
        if key == "row" and is_row(inner):
            return Content(row=tabular_row(inner))
    return Content(json=to_value(obj))


def is_row(inner: Any) -> bool:
    """Whether ``{"row": inner}`` is a tabular row: an object of ``features``/``prediction``/``probabilities``
    (another object under ``row`` is JSON, as ``{"text": 5}`` is)."""
    return isinstance(inner, Mapping) and bool(inner) and set(inner) <= set(ROW_PARTS)


def tabular_row(parts: Mapping[str, Any]) -> TabularRow:
    """A ``TabularRow`` from ``{"features": {name: value}, "prediction": value, "probabilities": {class: p}}``."""
    row = TabularRow()
    features = parts.get("features")
    if features is not None:
        if not isinstance(features, Mapping):
            raise ValueError(f"row.features must be an object of feature name to value, got {type(features).__name__}")
        for name, value in features.items():
            to_value(value, into=row.features[str(name)])
    if "prediction" in parts:
        to_value(parts["prediction"], into=row.prediction)
    probabilities = parts.get("probabilities")
    if probabilities is not None:
        if not isinstance(probabilities, Mapping):
            raise ValueError("row.probabilities must be an object of class to probability, got "
                             f"{type(probabilities).__name__}")
        for label, probability in probabilities.items():
            if isinstance(probability, bool) or not isinstance(probability, int | float):
                raise ValueError(f"row.probabilities[{label!r}] must be a number, got {probability!r}")
            row.probabilities[str(label)] = probability
    return row


ROW_ATTRIBUTE = "evalsi.row."


def row_from_attributes(attributes: Mapping[str, Any]) -> dict[str, Any] | None:
    """The row parts a traced prediction carries as span attributes (plain values): ``evalsi.row.prediction``,
    ``evalsi.row.features.<name>`` and ``evalsi.row.probabilities.<class>`` (a number, or a string that parses as
    one); None when it has none. For ``tabular_row``, which refuses a probability that is not a number."""
    parts: dict[str, Any] = {}
    for key, value in attributes.items():
        if not key.startswith(ROW_ATTRIBUTE):
            continue
        part, _, name = key[len(ROW_ATTRIBUTE):].partition(".")
        if part == "prediction" and not name:
            parts["prediction"] = value
        elif part in ("features", "probabilities") and name:
            if part == "probabilities" and isinstance(value, str):
                with contextlib.suppress(ValueError):
                    value = float(value)
            parts.setdefault(part, {})[name] = value
    return parts or None


def row_value(row: TabularRow) -> dict[str, Any]:
    """A ``TabularRow`` as plain values: ``features`` and ``prediction`` (whole numbers as ints) and
    ``probabilities``; a part the row does not hold is left out."""
    out: dict[str, Any] = {}
    if row.features:
        out["features"] = {name: from_value(value) for name, value in row.features.items()}
    if row.HasField("prediction"):
        out["prediction"] = from_value(row.prediction)
    if row.probabilities:
        out["probabilities"] = dict(row.probabilities)
    return out


def content_text(content: Content) -> str:
    """The text an evaluator compares: text as is, the last assistant message, a row's prediction (a string as is,
    else canonical JSON), or canonical JSON."""
    kind = content.WhichOneof("kind")
    if kind == "text":
        return content.text
    if kind == "messages":
        messages = content.messages.messages
        for message in reversed(messages):
            if message.role == "assistant":
                return message.content
        return messages[-1].content if messages else ""
    if kind == "json":
        value = content.json
        if value.WhichOneof("kind") == "string_value":
            return value.string_value
        return canonical_json(from_value(value))
    if kind == "row":
        prediction = content.row.prediction
        if prediction.WhichOneof("kind") == "string_value":
            return prediction.string_value
        return canonical_json(from_value(prediction)) if content.row.HasField("prediction") else ""
    if kind is None:
        return ""
    return canonical_json(json_format.MessageToDict(content))


def content_value(content: Content) -> Any:
    """The plain Python value of a content (a string for text, the decoded JSON for json, ``row_value`` of a row)."""
    kind = content.WhichOneof("kind")
    if kind == "text":
        return content.text
    if kind == "json":
        return from_value(content.json)
    if kind == "row":
        return row_value(content.row)
    if kind is None:
        return None
    return json_format.MessageToDict(getattr(content, kind))


def has_content(record: Record, field: str) -> bool:
    """Whether the record carries a field an evaluator may require (``metadata.<key>`` for one metadata key)."""
    if field.startswith("metadata."):
        return field[9:] in record.metadata
    if field == "context":
        return len(record.context) > 0
    if field == "metadata":
        return len(record.metadata) > 0
    # HasField is several times cheaper than inspecting the oneof, and exact once clear_empty_contents has
    # run at the edge where records enter (loaders, the API): a present Content then always has a kind.
    return record.HasField(field)


def content_test(field: str) -> Callable[[Record], bool]:
    """``has_content(record, field)`` as a predicate of the record, its kind of field decided once: the runner
    tests every record against each evaluator's requirements."""
    if field.startswith("metadata."):
        key = field[9:]
        return lambda record: key in record.metadata
    if field == "context":
        return lambda record: len(record.context) > 0
    if field == "metadata":
        return lambda record: len(record.metadata) > 0
    return methodcaller("HasField", field)


def clear_empty_contents(record: Record) -> Record:
    """Drop input/output/reference contents that hold no value, so presence means content (see has_content)."""
    for field in ("input", "output", "reference"):
        if record.HasField(field) and getattr(record, field).WhichOneof("kind") is None:
            record.ClearField(field)
    return record


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def record_hash(record: Record) -> str:
    """sha256 of the record's canonical JSON form (the protobuf JSON mapping, keys sorted)."""
    as_dict = json_format.MessageToDict(record, preserving_proto_field_name=True)
    return hashlib.sha256(canonical_json(as_dict).encode()).hexdigest()


def make_record(
    *,
    id: str = "",
    input: Any = None,
    output: Any = None,
    reference: Any = None,
    context: Any = None,
    metadata: Mapping[str, Any] | None = None,
) -> Record:
    """A Record from plain Python values."""
    record = Record(id=id)
    for name, value in (("input", input), ("output", output), ("reference", reference)):
        if value is not None:
            getattr(record, name).CopyFrom(to_content(value))
    if context is not None:
        items = context if isinstance(context, list) else [context]
        record.context.extend(to_content(item) for item in items)
    for key, value in (metadata or {}).items():
        record.metadata[str(key)].CopyFrom(to_value(value))
    return record


def struct_dict(message: Any, field: str) -> dict[str, Any]:
    """The Struct field ``field`` of ``message`` as plain values (``{}`` when unset), whole numbers as ints."""
    return struct_to_dict(getattr(message, field)) if message.HasField(field) else {}
