"""Reading a record's trajectory: its tool calls, expected calls, usage figures and checker verdicts."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf import struct_pb2

from evalsi.errors import BadInputError
from evalsi.records import canonical_json, content_value, from_value
from evalsi.v1alpha1.record_pb2 import (
    STEP_STATUS_ERROR,
    STEP_TYPE_TOOL,
    TOOL_CALL_STATUS_BLOCKED,
    TOOL_CALL_STATUS_ERROR,
    TOOL_CALL_STATUS_UNSPECIFIED,
    Record,
    Step,
    ToolCall,
    Trajectory,
)


@dataclass(frozen=True)
class Call:
    """One tool call the agent made, in trajectory order."""

    name: str
    arguments: Any
    status: int
    step: int  # its step's index in trajectory.steps, so findings can point at the step
    error: str = ""

    @property
    def errored(self) -> bool:
        return self.status == TOOL_CALL_STATUS_ERROR

    @property
    def blocked(self) -> bool:
        return self.status == TOOL_CALL_STATUS_BLOCKED

    @property
    def key(self) -> str:
        """Name and canonical arguments: two calls with the same key are the same call."""
        return f"{self.name}({canonical_json(self.arguments if self.arguments is not None else {})})"

    def __str__(self) -> str:
        return self.key


@dataclass(frozen=True)
class Expected:
    """One expected tool call: a name, and optionally arguments the actual call must contain."""

    name: str
    arguments: Any = None

    def __str__(self) -> str:
        return self.name if self.arguments is None else f"{self.name}({canonical_json(self.arguments)})"


def _started(step: Step) -> float:
    return step.start_time.seconds + step.start_time.nanos / 1e9


def _indexed_tool_steps(trajectory: Trajectory) -> list[tuple[int, Step]]:
    """(index in trajectory.steps, step) for the tool steps, in the order ``tool_steps`` gives."""
    steps = [(i, s) for i, s in enumerate(trajectory.steps) if s.HasField("tool_call") or s.type == STEP_TYPE_TOOL]
    if steps and all(s.HasField("start_time") for _, s in steps):
        steps.sort(key=lambda item: _started(item[1]))
    return steps


def tool_steps(trajectory: Trajectory) -> list[Step]:
    """Steps that are tool calls (a ``tool_call`` set, or type TOOL), ordered by start time when all have one."""
    return [step for _, step in _indexed_tool_steps(trajectory)]


def tool_calls(trajectory: Trajectory) -> list[Call]:
    """The trajectory's tool calls. A call without a name takes its step's; a call without a status
    takes error from an errored step. Blocked calls stay blocked: they are the agent's, not the tool's, failure."""
    calls = []
    for index, step in _indexed_tool_steps(trajectory):
        call: ToolCall = step.tool_call
        status = call.status
        error = call.error
        if status == TOOL_CALL_STATUS_UNSPECIFIED and step.status == STEP_STATUS_ERROR:
            status, error = TOOL_CALL_STATUS_ERROR, error or step.error
        arguments = from_value(call.arguments) if call.HasField("arguments") else None
        calls.append(
            Call(name=call.name or step.name, arguments=arguments, status=status, step=index, error=error)
        )
    return calls


def _decode(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def reference_object(record: Record) -> Any:
    """The reference as plain JSON (a text reference holding JSON is decoded), or None without one."""
    if not record.HasField("reference"):
        return None
    return _decode(content_value(record.reference))


def reference_field(record: Record, *keys: str) -> Any:
    """The first of ``keys`` present in a JSON-object reference, or None."""
    reference = reference_object(record)
    if isinstance(reference, Mapping):
        for key in keys:
            if key in reference:
                return reference[key]
    return None


def parse_expected(items: Any, source: str, evaluator: str) -> list[Expected]:
    """Expected calls from a list of names or ``{"name": ..., "arguments": {...}}`` objects (OpenAI
    ``{"function": {...}}`` too). Bad params are a BadInputError; a bad reference fails only its record."""
    error = BadInputError if source.startswith("param") else ValueError
    if not isinstance(items, list | tuple):
        raise error(f"evaluator {evaluator}: {source} must be a list of tool calls, got {type(items).__name__}")
    expected = []
    for item in items:
        if isinstance(item, str):
            expected.append(Expected(item))
            continue
        if isinstance(item, Mapping):
            nested = item.get("function")
            function = nested if isinstance(nested, Mapping) else item
            name = function.get("name")
            arguments = function.get("arguments", function.get("args"))
            if isinstance(name, str) and name:
                expected.append(Expected(name, _decode(arguments)))
                continue
        raise error(
            f"evaluator {evaluator}: each entry of {source} must be a tool name or an object with a 'name', "
            f"got {item!r}"
        )
    return expected


def expected_calls(record: Record, given: Sequence[Any] | None, evaluator: str, *keys: str) -> list[Expected] | None:
    """Expected calls from the param when given, else from the reference's first present key; None when neither."""
    if given is not None:
        return parse_expected(given, "param 'expected'", evaluator)
    reference = reference_object(record)
    if isinstance(reference, Mapping):
        for key in keys:
            if key in reference:
                return parse_expected(reference[key], f"reference '{key}'", evaluator)
    return None


def arguments_match(expected: Any, actual: Any) -> bool:
    """Subset match: every key of an expected object is in the actual one with a matching value (recursively);
    lists match element by element; other values must be equal."""
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(
            key in actual and arguments_match(value, actual[key]) for key, value in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(arguments_match(e, a) for e, a in zip(expected, actual, strict=True))
        )
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual
    return bool(expected == actual)


def edit_distance(a: Sequence[str], b: Sequence[str]) -> int:
    """Levenshtein distance between two sequences of names."""
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def _seconds(duration: Any) -> float:
    return duration.seconds + duration.nanos / 1e9


def _step_tokens(step: Step) -> int:
    usage = step.usage
    return usage.total_tokens or usage.input_tokens + usage.output_tokens


def _leaf_usage_steps(steps: Sequence[Step]) -> list[Step]:
    """Steps carrying usage that no descendant repeats: a parent's usage is usually its children's sum."""
    with_usage = [s for s in steps if _step_tokens(s) or s.usage.cost_usd]
    parents = {s.id: s.parent_id for s in steps if s.id}
    covered: set[str] = set()
    for step in with_usage:
        parent, seen = step.parent_id, set()
        while parent and parent not in seen:
            seen.add(parent)
            covered.add(parent)
            parent = parents.get(parent, "")
    return [s for s in with_usage if not (s.id and s.id in covered)]


def usage_figures(record: Record) -> dict[str, float | None]:
    """Tokens, USD and seconds: from record.usage where set, else summed over the trajectory's steps."""
    usage = record.usage
    tokens: float | None = float(usage.total_tokens or usage.input_tokens + usage.output_tokens) or None
    usd: float | None = usage.cost_usd or None
    seconds: float | None = _seconds(usage.latency) if usage.HasField("latency") else None
    steps = list(record.trajectory.steps)
    leaves = _leaf_usage_steps(steps)
    if tokens is None:
        tokens = float(sum(_step_tokens(s) for s in leaves)) or None
    if usd is None:
        usd = sum(s.usage.cost_usd for s in leaves) or None
    if seconds is None:
        timed = [s for s in steps if s.HasField("start_time")]
        if timed:
            start = min(_started(s) for s in timed)
            end = max(_started(s) + _seconds(s.duration) for s in timed)
            seconds = end - start if end > start else None
        else:
            ids = {s.id for s in steps if s.id}
            roots = [s for s in steps if s.HasField("duration") and s.parent_id not in ids]
            seconds = sum(_seconds(s.duration) for s in roots) or None
    return {"tokens": tokens, "usd": usd, "seconds": seconds}


def bool_metadata(record: Record, *keys: str) -> tuple[str, bool] | None:
    """The first of ``keys`` in metadata, as (key, value); a present key that is not a boolean fails the record."""
    for key in keys:
        if key in record.metadata:
            value: struct_pb2.Value = record.metadata[key]
            if value.WhichOneof("kind") != "bool_value":
                raise ValueError(f"metadata '{key}' must be a boolean, got {from_value(value)!r}")
            return key, value.bool_value
    return None


def text_metadata(record: Record, key: str) -> str:
    value = record.metadata.get(key)
    return value.string_value if value is not None and value.WhichOneof("kind") == "string_value" else ""
