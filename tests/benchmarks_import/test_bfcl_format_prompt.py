"""BFCL's format_sensitivity prompts against bfcl-eval 2026.3.23's own code: for every question its
format_sensitivity category lists, under every configuration of ``get_all_format_sensitivity_configs()``, the
system prompt and first turn ``bfcl_prompt`` writes equal bfcl-eval's ``formulate_system_prompt`` and
``system_prompt_pre_processing_chat_model`` (which reads the configuration from the question's id)."""

from __future__ import annotations

import copy
import types

import pytest

from benchmarks_import.test_bfcl_prompt import bfcl, theirs
from evalsi.datasets import bfcl_formats
from evalsi.datasets.bfcl_prompt import PROMPT, prompting_turn, system_prompt

__all__ = ["bfcl", "theirs"]  # bfcl-eval imported once its unused Java/JavaScript parsers are stood in for


def test_the_configurations_are_bfcl_evals(theirs: types.SimpleNamespace) -> None:
    from bfcl_eval.utils import get_all_format_sensitivity_configs  # type: ignore[import-untyped]

    assert list(bfcl_formats.CONFIGS) == get_all_format_sensitivity_configs()
    assert len(bfcl_formats.CONFIGS) == 26
    for config in bfcl_formats.CONFIGS:
        parsed = bfcl_formats.parse(config)
        assert (parsed.return_format, parsed.tool_call_tag, parsed.doc_format, parsed.prompt_format,
                parsed.style) == theirs.utils.parse_prompt_variation_params(config)
    assert theirs.prompts.DEFAULT_SYSTEM_PROMPT_FORMAT == bfcl_formats.DEFAULT
    with pytest.raises(ValueError, match="invalid BFCL prompt configuration"):
        bfcl_formats.parse("ret_fmt=yaml&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=classic")


def test_every_configuration_of_every_listed_question_is_bfcl_evals(theirs: types.SimpleNamespace) -> None:
    entries = theirs.load("format_sensitivity")  # 200 questions x 26 configurations, functions hinted
    assert len(entries) == 200 * 26
    for entry in entries:
        config = entry["id"].split(":")[1]
        functions = entry["function"]
        ours = system_prompt(functions, config)
        assert ours == theirs.utils.formulate_system_prompt(config, functions), entry["id"]
        assert prompting_turn(entry["question"][0], functions, config) == \
            theirs.utils.system_prompt_pre_processing_chat_model(
                copy.deepcopy(entry["question"][0]), functions, entry["id"]), entry["id"]
    # the default configuration is the prompt every other category is sent, written the one way it was
    functions = entries[0]["function"]
    assert system_prompt(functions) == system_prompt(functions, bfcl_formats.DEFAULT) == \
        bfcl_formats.formulate(bfcl_formats.DEFAULT, functions) == PROMPT.format(functions=bfcl_formats.function_doc(
            functions, "json"))


def test_the_function_docs_cover_nested_defaults_and_enums(theirs: types.SimpleNamespace) -> None:
    """Schema shapes the listed questions may not all hold: nested objects, defaults with commas, enums, maps,
    no ``required`` list (every parameter required in the XML doc)."""
    functions = [{"name": "a.b", "description": "D", "parameters": {"type": "dict", "properties": {
        "x": {"type": "array", "items": {"type": "integer"}, "default": [1, 2], "description": "xs"},
        "y": {"type": "dict", "properties": {"z": {"type": "string", "enum": ["p", "q"]}}, "required": ["z"]},
        "m": {"type": "object", "additionalProperties": {"type": "number"}},
        "t": {"type": "tuple", "items": {"type": "any"}}, "u": {}}}}]
    for doc_format in bfcl_formats.DOC_FORMATS:
        assert bfcl_formats.function_doc(functions, doc_format) == theirs.utils.format_function_doc(
            copy.deepcopy(functions), doc_format), doc_format
