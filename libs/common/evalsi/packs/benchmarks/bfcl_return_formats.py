"""A model's text answer decoded in the return format a BFCL prompt configuration asked for (format_sensitivity).

bfcl-eval 2026.3.23's prompting handlers decode with ``default_decode_ast_prompting(text, return_format,
has_tool_call_tag)``: backticks, newlines and spaces stripped and brackets added where missing (every format), the
text inside the first ``<TOOLCALL>...</TOOLCALL>`` when the configuration has the tag (none: a decode failure),
then ``ast_parse`` of the format: python calls (one call, or a list of them: ``bfcl_calls.python_calls``); json,
``[{"function": name, "parameters": {...}}]`` from the first bracketed list of objects (JSON that does not parse
is no call at all, an item that is not an object is skipped); verbose_xml, ``<functions><function name=..>
<params><param name=.. value=.. type=../>`` and concise_xml, ``<param name=.. type=..>value</param>``, each value
converted by its type (integer, float, boolean, null; array, tuple, object and dict read as Python literals;
anything else kept as text). Whatever fails there fails here (a missing name, an integer that is not one).
"""

from __future__ import annotations

import ast
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Any

from evalsi.datasets.bfcl_format_sensitivity import CONFIG_KEY  # the configuration a record was asked under
from evalsi.datasets.bfcl_formats import parse
from evalsi.errors import SkipRecord
from evalsi.packs.benchmarks.bfcl_calls import MAX_TEXT, Calls, DecodeError, python_calls
from evalsi.records import content_text, from_value
from evalsi.v1alpha1.record_pb2 import Record

# BFCL's own regular expressions (kept, so what they pick is what BFCL picks) take time quadratic in the text for
# some inputs (50,000 "[{" take 18 s): the JSON and XML formats decode at most this many characters, a few
# hundred calls' worth, and fail on more (BFCL would spend that time, and might decode it).
MAX_STRUCTURED = 20_000
_TOOL_CALL = re.compile(r"<TOOLCALL>(.*?)</TOOLCALL>", re.DOTALL)
_FUNCTIONS = re.compile(r"<functions>(.*?)</functions>", re.DOTALL)
_JSON_LIST = re.compile(r"\[.*\]", re.DOTALL)
_JSON_OBJECTS = re.compile(r"\[\s*{.*?}\s*(?:,\s*{.*?}\s*)*\]", re.DOTALL)


def format_calls(text: str, return_format: str, tool_call_tag: bool) -> Calls:
    """The calls in ``text`` as bfcl-eval decodes an answer to a prompt asking for ``return_format`` (python,
    json, verbose_xml, concise_xml), inside ``<TOOLCALL>`` tags when ``tool_call_tag``."""
    if len(text) > MAX_TEXT:
        raise DecodeError(f"output of {len(text)} characters; at most {MAX_TEXT} are decoded")
    source = text.strip("`\n ")
    source = source if source.startswith("[") else "[" + source
    source = source if source.endswith("]") else source + "]"
    if tool_call_tag:
        match = _TOOL_CALL.search(source)
        if match is None:
            raise DecodeError("no <TOOLCALL>...</TOOLCALL> in the output, which the prompt asked for")
        source = match.group(1).strip()
    decoder = _DECODERS.get(return_format)
    if decoder is None:
        raise ValueError(f"BFCL return format {return_format!r}; accepted: {', '.join(_DECODERS)}")
    if return_format != "python" and len(source) > MAX_STRUCTURED:
        raise DecodeError(f"{return_format} output of {len(source)} characters; at most {MAX_STRUCTURED} are "
                          "decoded in that format")
    return decoder(source)


def _python(source: str) -> Calls:
    return python_calls(source.strip().strip("'"))  # quotes a model wrapped its answer in dropped, as BFCL does


def _json(source: str) -> Calls:
    listed = _JSON_LIST.search(source)
    source = listed.group(0) if listed else source
    objects = _JSON_OBJECTS.search(source)
    source = objects.group(0) if objects else source
    try:
        value = json.loads(source)
    except (json.JSONDecodeError, RecursionError):
        return []  # BFCL reads JSON that does not parse as no call
    if isinstance(value, dict | str | list):
        items: Any = value  # a string or object is iterated as BFCL iterates it: its keys, characters: no call
    else:
        raise DecodeError(f"{type(value).__name__} is not iterable: not a list of calls")
    calls: Calls = []
    for item in items:
        if not isinstance(item, dict):
            continue
        if "function" not in item or "parameters" not in item:
            raise DecodeError(f"a call without {'function' if 'function' not in item else 'parameters'!r}: "
                              f"{json.dumps(item)[:100]}")
        name = item["function"]
        if isinstance(name, list | dict):
            raise DecodeError(f"a function name that is a {type(name).__name__}: unhashable")
        calls.append({name: item["parameters"]})
    return calls


def _functions_root(source: str) -> ET.Element:
    match = _FUNCTIONS.search(source)
    if match is None:
        raise DecodeError("no <functions>...</functions> in the output, which the prompt asked for")
    try:
        # the match starts at <functions>, so no DOCTYPE (nor an entity it declares) can be in what is parsed
        return ET.fromstring(match.group(0))
    except ET.ParseError as exc:
        raise DecodeError(f"the <functions> element is not XML: {exc}") from None


def _verbose_xml(source: str) -> Calls:
    calls: Calls = []
    for function in _functions_root(source).findall("function"):
        params = function.find("params")
        elements = params.findall("param") if params is not None else function.findall("param")
        arguments = {param.attrib.get("name"): _typed(param.attrib.get("value", ""), param.attrib.get("type",
                                                                                                     "string"))
                     for param in elements}
        calls.append({_name(function): arguments})
    return calls


def _concise_xml(source: str) -> Calls:
    calls: Calls = []
    for function in _functions_root(source).findall("function"):
        arguments: dict[Any, Any] = {}
        for param in function.findall("param"):
            if "name" not in param.attrib:
                raise DecodeError("a <param> without a name")
            arguments[param.attrib["name"]] = _typed((param.text or "").strip(), param.attrib.get("type", "string"))
        calls.append({_name(function): arguments})
    return calls


def _name(function: ET.Element) -> str:
    if "name" not in function.attrib:
        raise DecodeError("a <function> without a name")
    return function.attrib["name"]


def _typed(raw: str, type_name: str) -> Any:
    """bfcl-eval's ``convert_value_by_type``."""
    try:
        if type_name == "integer":
            return int(raw)
        if type_name == "float":
            return float(raw)
        if type_name == "boolean":
            return raw.lower() == "true"
        if type_name == "null":
            return None
        if type_name in ("array", "tuple", "object", "dict"):
            return ast.literal_eval(raw)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise DecodeError(f"{raw[:100]!r} is not a {type_name}: {exc}") from None
    return raw  # string, and any other type name, as text


_DECODERS: dict[str, Callable[[str], Calls]] = {
    "python": _python, "json": _json, "verbose_xml": _verbose_xml, "concise_xml": _concise_xml,
}



def configured_calls(record: Record) -> Calls | None:
    """The calls in a format_sensitivity record's output (its text, or last assistant message), decoded in the
    return format its metadata's :data:`CONFIG_KEY` names; None for a record asked under no configuration."""
    if CONFIG_KEY not in record.metadata:
        return None
    config = from_value(record.metadata[CONFIG_KEY])
    try:
        parsed = parse(str(config))
    except ValueError as exc:
        raise SkipRecord(f"metadata {CONFIG_KEY}: {exc}") from None
    if not record.HasField("output") or record.output.WhichOneof("kind") is None:
        raise DecodeError("the record has no output")
    return format_calls(content_text(record.output), parsed.return_format, parsed.tool_call_tag)
