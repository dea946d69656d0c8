"""BFCL's prompt configurations (format_sensitivity): the system prompt bfcl-eval 2026.3.23 writes for each.

A configuration is bfcl-eval's query string ``ret_fmt=…&tool_call_tag=…&func_doc_fmt=…&prompt_fmt=…&style=…``
(``parse_prompt_variation_params``): the format the calls must be returned in (python, json, verbose_xml,
concise_xml), whether they go inside ``<TOOLCALL>`` tags, the format the functions are listed in (python, xml,
json), plain text or markdown, and the classic or experimental wording. :func:`formulate` is bfcl-eval's
``formulate_system_prompt``; :data:`CONFIGS` its ``get_all_format_sensitivity_configs()`` (26, in its order). The
texts are copied from ``bfcl_eval.constants.default_prompts``; tests compare every configuration with bfcl-eval's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT = "ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=classic"
RETURN_FORMATS = ("python", "json", "verbose_xml", "concise_xml")
DOC_FORMATS = ("python", "xml", "json")
# get_all_format_sensitivity_configs(): 4 return formats x tag or not x 3 doc formats, then markdown, experimental
CONFIGS = (
    *(f"ret_fmt={ret}&tool_call_tag={tag}&func_doc_fmt={doc}&prompt_fmt=plaintext&style=classic"
      for ret in RETURN_FORMATS for tag in ("True", "False") for doc in DOC_FORMATS),
    "ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=markdown&style=classic",
    "ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=experimental",
)
_PATTERN = re.compile(
    r"^ret_fmt=(python|json|verbose_xml|concise_xml)&tool_call_tag=(True|False)&func_doc_fmt=(python|xml|json)"
    r"&prompt_fmt=(plaintext|markdown)&style=(classic|experimental)$")

_OUTPUT_FORMATS = {
    "python": "[func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)]",
    "json": '```json\n[{"function":"func_name1","parameters":{"param1":"value1","param2":"value2"...}},'
            '{"function":"func_name2","parameters":{"param":"value"}}]\n```',
    "verbose_xml": '<functions><function name="func_name1"><params><param name="param1" value="value1" '
                   'type="type1"/><param name="param2" value="value2" type="type2"/>...</params></function>'
                   '<function name="func_name2"><params><param name="param3" value="value3" type="type3"/>'
                   '</params></function></functions>',
    "concise_xml": '<functions><function name="func_name1"><param name="param1" type="type1">value1</param>'
                   '<param name="param2" type="type2">value2</param>...</function><function name="func_name2">'
                   '<param name="param3" type="type3">value</param></function></functions>',
}
_XML_TYPES = ("The type fields of the parameters in your function calls must be one of: string, integer, float, "
              "boolean, array, dict, or tuple.")
_PARAM_TYPES = {"python": "", "json": "", "verbose_xml": _XML_TYPES, "concise_xml": _XML_TYPES}
_STYLES = {
    "classic": {
        "persona": "You are an expert in composing functions.",
        "task": "You are given a question and a set of possible functions. Based on the question, you will need to "
                "make one or more function/tool calls to achieve the purpose. If none of the functions can be used, "
                "point it out. If the given question lacks the parameters required by the function, also point it "
                "out.",
        "no_tag": "You should only return the function calls in your response.\n\nIf you decide to invoke any of "
                  "the function(s), you MUST put it in the format of {output_format}. {param_types} You SHOULD NOT "
                  "include any other text in the response.",
        "tag": "You should only return the function calls in the <TOOLCALL> section. If you decide to invoke any of "
               "the function(s), you MUST put it in the format of <TOOLCALL>{output_format}</TOOLCALL>. "
               "{param_types} You SHOULD NOT include any other text in the response.",
        "multiturn": "At each turn, you should try your best to complete the tasks requested by the user within the "
                     "current turn. Continue to output functions to call until you have fulfilled the user's "
                     "request to the best of your ability. Once you have no more functions to call, the system will "
                     "consider the current turn complete and proceed to the next turn or task.",
        "tools": "Here is a list of functions in {format} format that you can invoke.\n{functions}\n",
    },
    "experimental": {
        "persona": "You are an expert in generating structured function calls.",
        "task": "You are given a user query and a set of available functions. Your task is to produce one or more "
                "function/tool calls to fulfill the user's request. If no suitable function exists, or required "
                "parameters are missing, clearly indicate this.",
        "no_tag": "Respond with only the function calls.\n\nYou MUST format it exactly as {output_format}. "
                  "{param_types} Do NOT include any other text.",
        "tag": "Return only the function calls enclosed in <TOOLCALL> tags.\n\nYou MUST format it exactly as "
               "<TOOLCALL>{output_format}</TOOLCALL>. {param_types} Do NOT include any other text.",
        "multiturn": "At every turn, aim to complete the user's tasks within that turn. Continue emitting function "
                     "calls until the request is satisfied to the best of your ability. Once no more calls are "
                     "needed, the system will proceed to the next turn.",
        "tools": "Below is a list of callable functions in the {format} style:\n{functions}\n",
    },
}
_LAYOUTS = {
    "plaintext": "{persona}{task}\n\n{tool_call_format}\n\n{multiturn_behavior}\n\n{available_tools}",
    "markdown": "{persona}\n\n## Task\n{task}\n\n## Tool Call Format\n{tool_call_format}\n\n## Multi-turn Behavior\n"
                "{multiturn_behavior}\n\n## Available Tools\n{available_tools}",
}


@dataclass(frozen=True)
class Config:
    """One prompt configuration, parsed (bfcl-eval's ``parse_prompt_variation_params``)."""

    return_format: str
    tool_call_tag: bool
    doc_format: str
    prompt_format: str
    style: str


def parse(config: str) -> Config:
    """The configuration a query string names; ``ValueError`` for one bfcl-eval would refuse."""
    match = _PATTERN.match(config)
    if not match:
        raise ValueError(f"invalid BFCL prompt configuration {config!r}; expected e.g. {DEFAULT!r}")
    ret, tag, doc, layout, style = match.groups()
    return Config(ret, tag == "True", doc, layout, style)


def formulate(config: str, functions: Sequence[Mapping[str, Any]]) -> str:
    """bfcl-eval's ``formulate_system_prompt(config, functions)``."""
    parsed = parse(config)
    style = _STYLES[parsed.style]
    call_format = style["tag" if parsed.tool_call_tag else "no_tag"].format(
        output_format=_OUTPUT_FORMATS[parsed.return_format], param_types=_PARAM_TYPES[parsed.return_format])
    tools = style["tools"].format(format=parsed.doc_format, functions=function_doc(functions, parsed.doc_format))
    return _LAYOUTS[parsed.prompt_format].format(
        persona=style["persona"], task=style["task"], tool_call_format=call_format,
        multiturn_behavior=style["multiturn"], available_tools=tools)


def function_doc(functions: Sequence[Mapping[str, Any]], doc_format: str) -> str:
    """bfcl-eval's ``format_function_doc``: the functions as JSON indented by 4, as XML, or as Python docstrings."""
    if doc_format == "json":
        return json.dumps(list(functions), indent=4)
    if doc_format == "xml":
        return "\n".join(_xml_function(function) for function in functions)
    if doc_format == "python":
        docs: list[str] = []
        for function in functions:
            docs += [_python_function(function), "\n"]
        return "\n\n".join(docs)
    raise ValueError(f"invalid function doc format {doc_format!r}; accepted: {', '.join(DOC_FORMATS)}")


def _xml_function(function: Mapping[str, Any]) -> str:
    schema = function["parameters"]
    required = schema.get("required", None)
    params = "".join(_xml_param(name, meta, required, 2) for name, meta in schema.get("properties", {}).items())
    return (f'<function name="{function["name"]}">\n  <desc>{function.get("description", "")}</desc>\n'
            f"  <params>\n{params}  </params>\n</function>\n")


def _xml_param(name: str, meta: Mapping[str, Any], required: Sequence[str] | None, level: int) -> str:
    indent = " " * level * 2
    p_type = meta.get("type", "string")
    desc = meta.get("description", "")
    is_required = "true" if required is None or name in required else "false"  # no list: all required
    if "enum" in meta:
        desc += f" Enum values: {meta['enum']}."
    if "items" in meta and "type" in meta["items"]:
        p_type = f"{p_type}[{meta['items']['type']}]"
    elif "additionalProperties" in meta:
        p_type = f"{p_type}[{meta['additionalProperties'].get('type', 'string')}]"
    attrs = [f'name="{name}", type="{p_type}", required="{is_required}"']
    if "default" in meta:
        attrs.append(f'default="{meta["default"]!r}"')
    # bfcl-eval drops every comma of the attributes, a default's own included ([1, 2] is written [1 2])
    parts = [f"{indent}<param " + " ".join(attrs).replace(",", "") + ">\n", f"{indent}  <desc>{desc}</desc>\n"]
    if "properties" in meta:
        parts.append(f"{indent}  <params>\n")
        parts += [_xml_param(child, child_meta, meta.get("required", None), level + 2)
                  for child, child_meta in meta["properties"].items()]
        parts.append(f"{indent}  </params>\n")
    parts.append(f"{indent}</param>\n")
    return "".join(parts)


_PY_PRIMITIVES = {"string": "str", "number": "float", "integer": "int", "boolean": "bool"}


def _py_type(meta: Mapping[str, Any]) -> str:
    kind = meta.get("type", "string")
    if kind in _PY_PRIMITIVES:
        return _PY_PRIMITIVES[kind]
    if kind in {"array", "list", "tuple"} and "items" in meta:
        return f"list[{_py_type(meta['items'])}]"
    if kind in {"object", "dict"}:
        if "additionalProperties" in meta:
            return f"dict[str, {_py_type(meta['additionalProperties'])}]"
        return "dict"
    return str(kind)


def _py_param(name: str, meta: Mapping[str, Any], depth: int) -> list[str]:
    desc = meta.get("description", "")
    if "enum" in meta:
        desc += f" Enum values: {meta['enum']}."
    default = f", default={meta['default']!r}" if "default" in meta else ""
    lines = [f"{' ' * (8 + 4 * depth)}{name} ({_py_type(meta)}{default}): {desc}\n"]
    for child, child_meta in meta.get("properties", {}).items():
        lines += _py_param(child, child_meta, depth + 1)
    return lines


def _python_function(function: Mapping[str, Any]) -> str:
    lines = [f"# Function: {function['name']}\n", '    """\n', f"    {function.get('description', '')}\n\n"]
    properties = function.get("parameters", {}).get("properties", {})
    if properties:
        lines.append("    Args:\n")
        for name, meta in properties.items():
            lines += _py_param(name, meta, 0)
    lines.append('    """\n')
    return "".join(lines)
