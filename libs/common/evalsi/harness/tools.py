"""Tools the agent can call: what the model is told (``ToolSpec``) and what a call gives back (``ToolResult``).

Python functions become tools here (``"package.module:function"``): the name is the function's, the
description its docstring's first paragraph, the JSON schema of the arguments comes from the signature and
annotations (``Args:`` lines of a Google-style docstring describe parameters). A function that raises gives
an error result the agent sees, as a real tool failure would; it never ends the trial.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from evalsi.errors import BadInputError


@dataclass(frozen=True)
class ToolSpec:
    """What the model is told about a tool: name, description, JSON schema of its arguments."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": dict(self.parameters)}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> ToolSpec:
        return cls(name=str(doc["name"]), description=str(doc.get("description", "")),
                   parameters=dict(doc.get("parameters") or {}))


@dataclass(frozen=True)
class ToolResult:
    """A tool's answer: any JSON value, or an error message the agent sees (``error`` set)."""

    value: Any = None
    error: str | None = None
    # A sandbox policy event the call caused (a denial: {"kind": "denied", "effect": ...}), recorded on its step.
    sandbox_event: Mapping[str, Any] | None = None

    @property
    def text(self) -> str:
        """What goes back to the model: strings as they are, anything else as JSON."""
        if self.error is not None:
            return f"error: {self.error}"
        return self.value if isinstance(self.value, str) else json.dumps(self.value, ensure_ascii=False)

    def to_dict(self) -> dict[str, Any]:
        out = {"value": self.value, "error": self.error}
        if self.sandbox_event is not None:  # only when set: older cassettes read the same
            out["sandbox_event"] = dict(self.sandbox_event)
        return out

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> ToolResult:
        return cls(value=doc.get("value"), error=doc.get("error"), sandbox_event=doc.get("sandbox_event"))


class Tool(Protocol):
    @property
    def spec(self) -> ToolSpec: ...

    async def call(self, arguments: Mapping[str, Any]) -> ToolResult: ...


# --- Python functions ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PythonTool:
    """A Python function as a tool; sync functions run on a thread so the loop keeps serving parallel calls."""

    spec: ToolSpec
    function: Callable[..., Any]

    async def call(self, arguments: Mapping[str, Any]) -> ToolResult:
        try:
            if inspect.iscoroutinefunction(self.function):
                value = await self.function(**arguments)
            else:
                value = await asyncio.to_thread(self.function, **arguments)
                if inspect.isawaitable(value):
                    value = await value
        except Exception as exc:  # the tool's failure is the agent's observation, not ours
            return ToolResult(error=f"{type(exc).__name__}: {exc}")
        return ToolResult(value=_jsonable(value))


def load_python_tool(spec: str, where: str) -> PythonTool:
    """``package.module:function`` (the attribute may be dotted) as a tool; ``where`` names the config field."""
    module_name, _, attr = spec.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise BadInputError(f"{where}: cannot import {module_name!r}: {exc}") from None
    for part in attr.split("."):
        if not hasattr(target, part):
            raise BadInputError(f"{where}: module {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    if not callable(target):
        raise BadInputError(f"{where}: {spec!r} is not a function")
    return PythonTool(spec=function_spec(target, where), function=target)


def function_spec(function: Callable[..., Any], where: str = "tool") -> ToolSpec:
    """The ToolSpec of a Python function, from its signature, annotations and docstring."""
    doc = inspect.getdoc(function) or ""
    described = _arg_descriptions(doc)
    hints = typing.get_type_hints(function)
    properties: dict[str, Any] = {}
    required = []
    for name, param in inspect.signature(function).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.kind == param.POSITIONAL_ONLY:
            raise BadInputError(f"{where}: parameter {name!r} is positional-only; tools are called with keywords")
        schema = _schema(hints.get(name, Any))
        if name in described:
            schema["description"] = described[name]
        if param.default is inspect.Parameter.empty:
            required.append(name)
        else:
            try:
                json.dumps(param.default)
                schema["default"] = param.default
            except TypeError:
                pass  # a default JSON cannot carry is still a default; the model need not see it
        properties[name] = schema
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    summary = doc.split("\n\n", 1)[0].strip()
    return ToolSpec(name=getattr(function, "__name__", "tool"), description=summary, parameters=parameters)


_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


def _schema(hint: Any) -> dict[str, Any]:
    """A JSON schema for an annotation; anything it does not know is left open (``{}``)."""
    if hint in _SIMPLE:
        return {"type": _SIMPLE[hint]}
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        options = [_schema(arg) for arg in args if arg is not type(None)]
        return options[0] if len(options) == 1 else {"anyOf": options}
    if hint in (list, tuple, set, frozenset) or origin in (list, tuple, set, frozenset):
        return {"type": "array", "items": _schema(args[0])} if args and origin is not tuple else {"type": "array"}
    if hint is dict or origin is dict or (isinstance(origin, type) and issubclass(origin, Mapping)):
        return {"type": "object"}
    return {}


_ARG_LINE = re.compile(r"^\s{2,}(\w+)(?:\s*\([^)]*\))?:\s*(.+)$")


def _arg_descriptions(doc: str) -> dict[str, str]:
    """Parameter descriptions from a Google-style ``Args:`` section."""
    out: dict[str, str] = {}
    in_args = False
    for line in doc.splitlines():
        if line.strip() in ("Args:", "Arguments:", "Parameters:"):
            in_args = True
            continue
        if in_args:
            if line and not line.startswith(" "):
                break
            match = _ARG_LINE.match(line)
            if match:
                out[match.group(1)] = match.group(2).strip()
    return out


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value
