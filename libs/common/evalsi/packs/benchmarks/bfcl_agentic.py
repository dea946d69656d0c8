"""``builtin/bfcl-agentic``: BFCL's agentic checker (its ``memory`` category) over a record imported from
``bfcl://DIR/memory_kv`` (or ``memory_rec_sum``, ``memory_vector``; ``evalsi.datasets.bfcl_memory``) and played by
``evalsi.datasets.bfcl_memory_drive``.

As bfcl-eval's ``_evaluate_single_agentic_entry``: the question is one turn of steps (the model's answers); the
steps that decode to calls are the model's memory work, and the last one that does not decode is its final answer
(none: ``agentic:no_last_message``; more than one turn: ``agentic:inference_error``). ``agentic_checker`` then looks
for one of the possible answers in it, both standardized (``,./-_*^()`` removed, lower case, ``'`` as ``"``), as a
whole-word match (``agentic:answer_not_found``).

How a step decodes depends on the mode it was played in (metadata ``bfcl_simulation.mode``; without it, FC when an
assistant message has tool calls): in FC mode an answer with tool calls is calls (unless an argument is not a JSON
object) and any text is not; in prompting mode the text is decoded in BFCL's call format. The output is the
conversation's messages, or text (a target that answered directly: one step).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from evalsi.errors import SkipRecord
from evalsi.evaluators import evaluator
from evalsi.packs.benchmarks.bfcl_ast import Verdict
from evalsi.packs.benchmarks.bfcl_multi import decode_step
from evalsi.records import content_text, content_value, from_value
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

_PUNCTUATION = re.compile(r"[\,\.\/\-\_\*\^\(\)]")
MAX_STEPS = 1_000  # assistant messages read from one output


def standardize_string(input_string: str) -> str:
    """BFCL's ``standardize_string``: ``,./-_*^()`` removed, lower case, single quotes as double ones."""
    return _PUNCTUATION.sub("", input_string).lower().replace("'", '"')


def agentic_checker(model_response: Any, possible_answer_list: Sequence[str]) -> Verdict:
    """BFCL's ``agentic_checker``: whether one of the possible answers is in the response, standardized, as a
    whole word (a list response is its first item; anything not text is its ``str()``)."""
    standardized_answers = [standardize_string(answer) for answer in possible_answer_list]
    if type(model_response) is list:
        model_response = model_response[0]
    if type(model_response) is not str:
        model_response = str(model_response)
    standardized = standardize_string(model_response)
    for answer in standardized_answers:
        if re.search(rf"\b{re.escape(answer)}\b", standardized):
            return Verdict(True)
    return Verdict(False, "agentic:answer_not_found",
                   "None of the expected answers were found in the model response.")


def final_answer(steps: Sequence[Any], mode: str) -> tuple[bool, Any]:
    """``(found, answer)``: the last step that does not decode to calls (BFCL's ``last_unsuccessful_decoding_
    message``); ``found`` is False when there is none or it is empty, as BFCL's ``not`` test finds it."""
    last: Any = None
    for raw in steps:
        if not _decodes(raw, mode):
            last = raw
    return bool(last), last


def _decodes(raw: Any, mode: str) -> bool:
    if mode == "fc":
        # BFCL's convert_to_function_call: a list of {name: arguments} decodes when each arguments' JSON text is
        # an object; text fails (it iterates the characters), and an empty text decodes to nothing
        return isinstance(raw, list) and bool(raw) and bool(decode_step(raw))
    return isinstance(raw, str) and bool(decode_step(raw))


def _steps(record: Record) -> tuple[list[Any], str, int]:
    """The model's steps (raw, as BFCL records them), the mode they were played in, and the number of turns."""
    simulation = from_value(record.metadata["bfcl_simulation"]) if "bfcl_simulation" in record.metadata else {}
    mode = str(simulation.get("mode", "")) if isinstance(simulation, Mapping) else ""
    output = record.output
    if output.WhichOneof("kind") != "messages":
        value = content_value(output)
        return [value if isinstance(value, str) else json.dumps(value)], mode or "prompting", 1
    steps: list[Any] = []
    turns = 1
    for message in output.messages.messages:
        if message.role == "user":
            turns += 1
        elif message.role == "assistant":
            if message.tool_calls:
                steps.append([{call.name: _arguments(call.arguments)} for call in message.tool_calls])
            else:
                steps.append(message.content)
        if len(steps) > MAX_STEPS:
            raise SkipRecord(f"the output has more than {MAX_STEPS} assistant messages")
    if not mode:
        mode = "fc" if any(isinstance(step, list) for step in steps) else "prompting"
    return steps, mode, turns


def _arguments(value: Any) -> Any:
    arguments = from_value(value) if value.WhichOneof("kind") else {}
    return json.dumps(arguments) if isinstance(arguments, Mapping) else arguments  # BFCL's FC form: JSON text


def check_agentic(steps: Sequence[Any], mode: str, turns: int, possible_answers: Sequence[str]) -> Verdict:
    """BFCL's verdict for one agentic question (see the module's docstring)."""
    if turns != 1:
        return Verdict(False, "agentic:inference_error",
                       "Error during inference phase. Model did not output a list of model responses.")
    found, answer = final_answer(steps, mode)
    if not found:
        return Verdict(False, "agentic:no_last_message",
                       "Cannot find the last chat message that is not a function call.")
    return agentic_checker(answer, possible_answers)


def _reference(record: Record) -> list[str]:
    text = content_text(record.reference) if record.reference.WhichOneof("kind") == "text" else json.dumps(
        content_value(record.reference))
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    truth = value.get("ground_truth") if isinstance(value, Mapping) else None
    if not isinstance(truth, list) or not all(isinstance(answer, str) for answer in truth):
        raise SkipRecord("the reference is not a BFCL agentic reference: expected a JSON object with ground_truth, "
                         "a list of possible answers (records read from bfcl://DIR/memory_kv carry one)")
    return truth


@evaluator(
    "builtin/bfcl-agentic",
    version="1.0.0",
    pack="benchmarks",
    requires=["output", "reference"],
    cheap=True,  # pure; bounded by MAX_STEPS
    description="BFCL's agentic checker (the memory category): the model's last answer that is not a call must "
    "contain one of the possible answers, both standardized (punctuation ,./-_*^() dropped, lower case), as a "
    "whole word.",
)
def bfcl_agentic(record: Record) -> Score:
    """Pass when BFCL's agentic checker finds a possible answer in the model's final answer."""
    truth = _reference(record)
    steps, mode, turns = _steps(record)
    verdict = check_agentic(steps, mode, turns, truth)
    if verdict.valid:
        return Score(passed=True)
    return Score(passed=False, explanation=f"{verdict.error_type}: {verdict.error}"[:2000])


EVALUATORS = (bfcl_agentic,)
