"""BFCL's prompting-mode system prompt, as bfcl-eval 2026.3.23 writes it for every category (single-turn AST,
relevance, live, multi-turn, memory): the one place that text is built.

bfcl-eval loads a question (``load_dataset_entry``) with each function's description ending in a language hint
(``add_language_specific_hint_to_function_doc``; every category read here is a Python one: :func:`hinted`), then,
in prompting mode, puts ``formulate_system_prompt`` of its default format (``DEFAULT_SYSTEM_PROMPT_FORMAT``: Python
calls, no tool-call tag, the functions as JSON indented by 4, plain text, classic style: :data:`PROMPT`) first in
the first turn's system message, before what that message said, or as a new system message when the turn has none
(``system_prompt_pre_processing_chat_model``: :func:`prompting_turn`). The memory categories' own prompt is put
first the same way, before the listing is (``add_memory_instruction_system_prompt``: :func:`lead_system`).
The format_sensitivity category asks under other prompt configurations (``evalsi.datasets.bfcl_formats``): given
one, :func:`system_prompt` and :func:`prompting_turn` write that configuration's prompt instead.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from evalsi.datasets import bfcl_formats

# bfcl_eval.utils._get_language_specific_hint for a Python category (not Java's, not JavaScript's)
PYTHON_HINT = " Note that the provided function is in Python 3 syntax."
# formulate_system_prompt(DEFAULT_SYSTEM_PROMPT_FORMAT, functions): the classic style's persona and task joined with
# no space, the Python format's empty parameter-type note leaving two spaces, as bfcl-eval's templates make it
LISTING_INTRO = "Here is a list of functions in json format that you can invoke.\n"
PROMPT = (
    "You are an expert in composing functions.You are given a question and a set of possible functions. Based on "
    "the question, you will need to make one or more function/tool calls to achieve the purpose. If none of the "
    "functions can be used, point it out. If the given question lacks the parameters required by the function, "
    "also point it out.\n\nYou should only return the function calls in your response.\n\nIf you decide to invoke "
    "any of the function(s), you MUST put it in the format of [func_name1(params_name1=params_value1, "
    "params_name2=params_value2...), func_name2(params)].  You SHOULD NOT include any other text in the "
    "response.\n\nAt each turn, you should try your best to complete the tasks requested by the user within the "
    "current turn. Continue to output functions to call until you have fulfilled the user's request to the best of "
    "your ability. Once you have no more functions to call, the system will consider the current turn complete and "
    "proceed to the next turn or task.\n\n" + LISTING_INTRO + "{functions}\n")


def hinted(functions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The functions as bfcl-eval offers them to a model (listed in the prompt, or as tools in FC mode): copies,
    each description ending in :data:`PYTHON_HINT`. (The possible answers are checked against the functions
    without it, as bfcl-eval's checker loads them.)"""
    out = [copy.deepcopy(dict(function)) for function in functions]
    for function in out:
        function["description"] = str(function.get("description", "")) + PYTHON_HINT
    return out


def system_prompt(functions: Sequence[Mapping[str, Any]], config: str | None = None) -> str:
    """:data:`PROMPT` listing ``functions`` as given (already :func:`hinted`), their keys in order; or, given a
    prompt configuration (``ret_fmt=...&...``), bfcl-eval's prompt for it (:func:`bfcl_formats.formulate`)."""
    if config is not None and config != bfcl_formats.DEFAULT:
        return bfcl_formats.formulate(config, functions)
    return PROMPT.format(functions=json.dumps(list(functions), indent=4))


def lead_system(turn: Sequence[Mapping[str, str]], text: str) -> list[dict[str, str]]:
    """A copy of ``turn`` with ``text`` leading its system message (a blank line between), or, when its first
    message is not a system one, with ``text`` as a new system message first (as bfcl-eval's prompt helpers do)."""
    messages = [dict(message) for message in turn]
    if messages and messages[0]["role"] == "system":
        messages[0]["content"] = text + "\n\n" + messages[0]["content"]
    else:
        messages.insert(0, {"role": "system", "content": text})
    return messages


def prompting_turn(turn: Sequence[Mapping[str, str]], functions: Sequence[Mapping[str, Any]],
                   config: str | None = None) -> list[dict[str, str]]:
    """The first turn as bfcl-eval's prompting mode sends it: :func:`system_prompt` of ``functions`` (already
    :func:`hinted`) under ``config`` (the default one when None) leading it (:func:`lead_system`)."""
    return lead_system(turn, system_prompt(functions, config))


def listed_functions(system_message: str) -> list[dict[str, Any]]:
    """The functions a system message that :func:`prompting_turn` wrote lists (what followed the listing, a
    question's own system message, is left). Raises ``ValueError`` for a message that is not one."""
    head = PROMPT.partition("{functions}")[0]
    if not system_message.startswith(head):
        raise ValueError("the record's first message is not BFCL's system prompt listing the functions "
                         "(read the question from bfcl://DIR/multi_turn_base)")
    try:
        functions, _end = json.JSONDecoder().raw_decode(system_message, len(head))
    except json.JSONDecodeError as exc:
        raise ValueError(f"the record's system message does not list the functions as JSON: {exc}") from exc
    if not isinstance(functions, list) or not all(isinstance(f, dict) for f in functions):
        raise ValueError("the record's system message does not list the functions as a JSON list")
    return functions
