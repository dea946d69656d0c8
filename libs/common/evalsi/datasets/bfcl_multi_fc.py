"""BFCL's function-calling mode for the multi-turn driver (``evalsi.datasets.bfcl_multi_drive``): the question's
functions as the tools bfcl-eval's OpenAI chat-completions handler sends (``convert_to_tool`` with
``GORILLA_TO_OPENAPI``, ``ModelStyle.OPENAI_COMPLETIONS``), and the model's tool calls as the calls that run on the
simulators (``convert_to_function_call``, which fails the whole answer when one call's arguments are not a JSON
object: the turn then ends, as in BFCL's FC loop).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalsi.harness.tools import ToolSpec
from evalsi.packs.benchmarks.bfcl_multi_exec import Call

# BFCL's DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC: the user message of a turn that adds held-back functions
# (in FC mode the functions come as tools, so the message does not list them as the prompting one does)
ADDED_FUNCTIONS_FC = "I have updated some more functions you can choose from. What about now?"
# bfcl_eval.constants.type_mappings.GORILLA_TO_OPENAPI
GORILLA_TO_OPENAPI = {
    "integer": "integer", "number": "number", "float": "number", "string": "string", "boolean": "boolean",
    "bool": "boolean", "array": "array", "list": "array", "dict": "object", "object": "object", "tuple": "array",
    "any": "string", "byte": "integer", "short": "integer", "long": "integer", "double": "number",
    "char": "string", "ArrayList": "array", "Array": "array", "HashMap": "object", "Hashtable": "object",
    "Queue": "array", "Stack": "array", "Any": "string", "String": "string", "Bigint": "integer",
}


@dataclass(frozen=True)
class BfclTool(ToolSpec):
    """A tool sent as BFCL sends it: the converted function whole (its ``response`` schema too, which BFCL's
    OpenAI handler keeps), not only the name, description and parameters a ``ToolSpec`` carries."""

    function: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(dict(self.function))


def fc_tools(functions: Sequence[Mapping[str, Any]]) -> list[BfclTool]:
    """The functions as BFCL's ``convert_to_tool`` makes them for OpenAI chat completions: dots in names as ``_``
    (OpenAI's names match ``^[a-zA-Z0-9_-]{1,64}$``), the parameters an ``object`` whose properties' types are
    mapped by :data:`GORILLA_TO_OPENAPI` (an unknown one as ``string``; a float also gets ``format: float`` and
    its description " This is a float type value."). Raises ``ValueError`` for a function BFCL's conversion
    fails on (no parameters' properties, an array's item type it cannot map)."""
    tools = []
    for original in functions:
        item = copy.deepcopy(dict(original))
        name = str(item.get("name", ""))
        item["name"] = name.replace(".", "_")
        parameters = item.get("parameters")
        if not isinstance(parameters, dict) or not isinstance(parameters.get("properties"), dict):
            raise ValueError(f"function {name!r}: no parameters.properties (BFCL's conversion needs them)")
        parameters["type"] = "object"
        parameters["properties"] = _cast(parameters["properties"], name)
        tools.append(BfclTool(name=item["name"], description=str(item.get("description", "")),
                              parameters=parameters, function=item))
    return tools


def _cast(properties: dict[str, Any], name: str) -> dict[str, Any]:
    """BFCL's ``_cast_to_openai_type`` (in place, as it is): it goes into an array's items and an object's
    properties, two levels of arrays deep."""
    for key, value in properties.items():
        if not isinstance(value, dict):
            raise ValueError(f"function {name!r}: parameter {key!r}: expected a schema object")
        if "type" not in value:
            value["type"] = "string"
        else:
            kind = value["type"]
            if kind == "float":
                value["format"] = "float"
                # BFCL appends to the description (a KeyError when there is none; every function of BFCL's has one)
                value["description"] = str(value.get("description", "")) + " This is a float type value."
            value["type"] = GORILLA_TO_OPENAPI.get(kind, "string") if isinstance(kind, str) else "string"
        if value["type"] in ("array", "object"):
            if isinstance(value.get("properties"), dict):
                value["properties"] = _cast(value["properties"], name)
            elif isinstance(value.get("items"), dict):
                items = value["items"]
                items["type"] = _mapped(items.get("type"), name, key)
                if items["type"] == "array" and isinstance(items.get("items"), dict):
                    items["items"]["type"] = _mapped(items["items"].get("type"), name, key)
                elif items["type"] == "object" and isinstance(items.get("properties"), dict):
                    items["properties"] = _cast(items["properties"], name)
    return properties


def _mapped(kind: Any, name: str, key: str) -> str:
    # BFCL indexes the map here (no default): an item type it does not know fails the conversion
    if not isinstance(kind, str) or kind not in GORILLA_TO_OPENAPI:
        raise ValueError(f"function {name!r}: parameter {key!r}: item type {kind!r} is not one BFCL maps")
    return GORILLA_TO_OPENAPI[kind]


def fc_calls(tool_calls: Sequence[Mapping[str, Any]]) -> list[Call]:
    """The calls of one answer's OpenAI ``tool_calls``, as BFCL's ``convert_to_function_call`` reads them (each
    call's arguments JSON text loaded; a dict argument is a dict, never a nested call); [] when one call's
    arguments are not a JSON object, which BFCL fails to decode (the turn ends)."""
    calls = []
    for call in tool_calls:
        function = call.get("function") or {}
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                return []
        if not isinstance(arguments, dict):
            return []
        calls.append(Call(str(function.get("name", "")), arguments))
    return calls
