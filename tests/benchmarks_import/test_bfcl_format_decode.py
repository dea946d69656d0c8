"""builtin/bfcl-ast's decoders for format_sensitivity's return formats against bfcl-eval 2026.3.23's own
(``default_decode_ast_prompting`` with the format and tool-call tag, then ``is_function_calling_format_output`` and
``ast_checker``): the same verdict on answers to the listed questions written in every format, with and without
the tag, right and perturbed, and on hand-written answers at the edges of each decoder."""

from __future__ import annotations

import json
import random
import types
from typing import Any
from xml.sax.saxutils import escape, quoteattr

import pytest

from benchmarks_import.test_bfcl_prompt import bfcl, theirs
from benchmarks_import.test_bfcl_reference import reference
from evalsi.datasets import bfcl_formats
from evalsi.packs.benchmarks.bfcl_ast import check_calls
from evalsi.packs.benchmarks.bfcl_calls import DecodeError
from evalsi.packs.benchmarks.bfcl_return_formats import format_calls

__all__ = ["bfcl", "reference", "theirs"]

_XML_TYPES = {str: "string", int: "integer", float: "float", bool: "boolean", list: "array", dict: "dict",
              type(None): "null"}


def _answer(truth: list[dict[str, Any]], rng: random.Random) -> list[tuple[str, dict[str, Any]]]:
    """One right answer: each call's first possible value of each parameter (an optional one left out)."""
    calls = []
    for call in truth:
        name, params = next(iter(call.items()))
        arguments = {param: next(v for v in values if v != "") for param, values in params.items()
                     if any(v != "" for v in values)}
        calls.append((name, arguments))
    rng.shuffle(calls)
    return calls


def _perturbed(calls: list[tuple[str, dict[str, Any]]], rng: random.Random) -> list[tuple[str, dict[str, Any]]]:
    name, arguments = calls[0]
    arguments = dict(arguments)
    how = rng.choice(("drop", "value", "type", "name", "extra"))
    key = next(iter(arguments), None)
    if how == "drop" and key is not None:
        del arguments[key]
    elif how == "value" and key is not None:
        arguments[key] = "zzz" if isinstance(arguments[key], str) else 987654
    elif how == "type" and key is not None:
        arguments[key] = str(arguments[key])
    elif how == "name":
        name += "_x"
    else:
        arguments["unexpected"] = 1
    return [(name, arguments), *calls[1:]]


def _written(calls: list[tuple[str, dict[str, Any]]], return_format: str, rng: random.Random) -> str:
    if return_format == "python":
        text = "[" + ", ".join(f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})"
                               for name, args in calls) + "]"
        return rng.choice((text, text[1:-1], f"```\n{text}\n```"))
    if return_format == "json":
        text = json.dumps([{"function": name, "parameters": args} for name, args in calls])
        return rng.choice((text, f"```json\n{text}\n```", f"Here: {text}"))
    verbose = return_format == "verbose_xml"
    functions = []
    for name, args in calls:
        params = []
        for key, value in args.items():
            kind = _XML_TYPES.get(type(value), "string")
            raw = repr(value) if kind in ("array", "dict") else str(value)
            params.append(f"<param name={quoteattr(key)} value={quoteattr(raw)} type={quoteattr(kind)}/>" if verbose
                          else f"<param name={quoteattr(key)} type={quoteattr(kind)}>{escape(raw)}</param>")
        inner = f"<params>{''.join(params)}</params>" if verbose else "".join(params)
        functions.append(f"<function name={quoteattr(name)}>{inner}</function>")
    text = f"<functions>{''.join(functions)}</functions>"
    return rng.choice((text, f"```xml\n{text}\n```"))


def _bfcl_verdict(theirs: types.SimpleNamespace, reference: Any, text: str, config: bfcl_formats.Config,
                  functions: list[Any], truth: list[Any], category: str) -> bool:
    from bfcl_eval.constants.enums import ReturnFormat  # type: ignore[import-untyped]
    from bfcl_eval.utils import is_function_calling_format_output  # type: ignore[import-untyped]

    try:
        decoded = theirs.utils.default_decode_ast_prompting(text, ReturnFormat(config.return_format),
                                                            config.tool_call_tag)
    except Exception:
        return False
    return is_function_calling_format_output(decoded) and reference(functions, decoded, truth, category)


def _our_verdict(text: str, config: bfcl_formats.Config, functions: list[Any], truth: list[Any],
                 category: str) -> bool:
    try:
        calls = format_calls(text, config.return_format, config.tool_call_tag)
    except DecodeError:
        return False
    return check_calls(functions, calls, truth, category).valid


def test_generated_answers_in_every_format_get_bfcl_evals_verdict(theirs: types.SimpleNamespace,
                                                                   reference: Any) -> None:
    from bfcl_eval.utils import load_ground_truth_entry  # type: ignore[import-untyped]

    rng = random.Random(7)
    entries = theirs.load("format_sensitivity")[::26]  # each listed question once; configurations chosen below
    truths = {e["id"]: e["ground_truth"] for e in load_ground_truth_entry("format_sensitivity")[::26]}
    unhinted = {e["id"].split(":")[2]: e for e in entries}
    tally = {True: 0, False: 0}
    for entry in entries:
        question_id = entry["id"].split(":")[2]
        category = question_id.rsplit("_", 1)[0]
        truth = truths[question_id]
        functions = unhinted[question_id]["function"]
        for config_text in bfcl_formats.CONFIGS[:24]:  # the last two ask for python like the first
            config = bfcl_formats.parse(config_text)
            right = _answer(truth, rng)
            for calls in (right, _perturbed(right, rng)):
                text = _written(calls, config.return_format, rng)
                if config.tool_call_tag:
                    text = rng.choice((f"<TOOLCALL>{text}</TOOLCALL>", f"Sure. <TOOLCALL>{text}</TOOLCALL>", text))
                ours = _our_verdict(text, config, functions, truth, category)
                assert ours == _bfcl_verdict(theirs, reference, text, config, functions, truth, category), \
                    (question_id, config_text, text)
                tally[ours] += 1
    assert tally[True] > 2000 and tally[False] > 2000, tally  # both verdicts well exercised


EDGES = {  # hand-written answers at the edges of each decoder
    "python": ["f(a=1)", "[f(a=1), g(b='x')]", "f(a=1), g(b=2)", "'[f(a=1)]'", "[1]", "f(a=1) + 2", "not python(",
               "[f(a=x.y)]", "(f(a=1), f(a=2))", "{f(a=1)}", "[f(a=[1, 2], b={'k': 1.5})]"],
    "json": ['[{"function": "f", "parameters": {"a": 1}}]', '{"function": "f", "parameters": {"a": 1}}',
             '[{"function": "f"}]', '[1, {"function": "f", "parameters": {"a": 1}}]', "[not json]", "[]", "[5]",
             '[{"function": ["f"], "parameters": {}}]', '[{"function": "f", "parameters": [1]}]',
             '"[{\\"function\\": \\"f\\", \\"parameters\\": {\\"a\\": 1}}]"', "[1, 2] [3]"],
    "verbose_xml": ['<functions><function name="f"><params><param name="a" value="1" type="integer"/></params>'
                    '</function></functions>',
                    '<functions><function name="f"><param name="a" value="1" type="integer"/></function></functions>',
                    '<functions><function name="f"><params><param name="a" value="x" type="integer"/></params>'
                    '</function></functions>',
                    '<functions><function><params/></function></functions>', "<function name='f'/>",
                    '<functions><function name="f"><params><param value="1"/></params></function></functions>',
                    '<functions><function name="f"><params><param name="a" value="[1, 2" type="array"/></params>'
                    '</function></functions>', "<functions><broken></functions>",
                    '<functions><function name="f"><params><param name="a" value="True" type="boolean"/>'
                    '<param name="b" value="" type="null"/><param name="c" value="{1: 2}" type="dict"/>'
                    '<param name="d" value="1.5" type="float"/><param name="e" value="v" type="other"/>'
                    '</params></function></functions>'],
    "concise_xml": ['<functions><function name="f"><param name="a" type="integer"> 1 </param></function>'
                    '</functions>', '<functions><function name="f"><param type="integer">1</param></function>'
                    '</functions>', '<functions><function name="f"><param name="a">&lt;x&gt;</param></function>'
                    '</functions>', '<functions><function name="f"><param name="a" type="tuple">(1, 2)</param>'
                    '</function></functions>', "text only"],
}


@pytest.mark.parametrize("return_format", list(EDGES))
def test_edge_answers_decode_as_bfcl_eval_decodes_them(theirs: types.SimpleNamespace, return_format: str) -> None:
    from bfcl_eval.constants.enums import ReturnFormat

    for tag in (False, True):
        for text in EDGES[return_format]:
            answer = f"<TOOLCALL>{text}</TOOLCALL>" if tag else text
            try:
                expected: Any = theirs.utils.default_decode_ast_prompting(answer, ReturnFormat(return_format), tag)
            except Exception:
                expected = DecodeError
            try:
                ours: Any = format_calls(answer, return_format, tag)
            except DecodeError:
                ours = DecodeError
            assert ours == expected, (return_format, answer)
    with pytest.raises(DecodeError, match="TOOLCALL"):
        format_calls("[f(a=1)]", return_format, True)


def test_long_structured_answers_fail_fast() -> None:
    """BFCL's regular expressions are quadratic on some texts: past MAX_STRUCTURED characters, no decode."""
    import time

    from evalsi.packs.benchmarks.bfcl_return_formats import MAX_STRUCTURED

    started = time.monotonic()
    for return_format, text in (("json", "[{" * (MAX_STRUCTURED // 2)), ("json", "[{} ," * (MAX_STRUCTURED // 5)),
                                ("verbose_xml", "<functions>" * (MAX_STRUCTURED // 11))):
        try:  # within the bound: decoded, to nothing or a failure of BFCL's own
            assert format_calls(text[:MAX_STRUCTURED - 2], return_format, False) == []
        except DecodeError as exc:
            assert "at most" not in str(exc)
        with pytest.raises(DecodeError, match="at most"):
            format_calls(text + "x" * 100, return_format, False)
    assert time.monotonic() - started < 5
