"""``builtin/bfcl-multi-turn``: BFCL's multi-turn checker over a record imported from ``bfcl://`` (a
``multi_turn_base``, ``miss_func``, ``miss_param`` or ``long_context`` question, ``evalsi.datasets.bfcl_multi``).

The reference carries the possible answer's calls per turn, the involved classes and the initial config; the
output carries the model's calls per turn, in one of two forms:

- JSON (or text holding it), BFCL's result form: a list of turns, each a list of steps (the model's answers in that
  turn), each step either text in BFCL's call format (``"[send_message(receiver_id='USR002', message='hi')]"``) or a
  list of calls (``[{"send_message": {"receiver_id": "USR002", ...}}]``, arguments an object or its JSON text);
- messages: the conversation after the record's input. Assistant messages before the first user message answer
  turn 0; each user message starts the next turn. Each assistant message is a step: its tool calls, else its text
  in BFCL's call format. Tool messages (the results the model saw) are not read: the grader runs the calls again.

A step that does not decode, or decodes to no call, is left out, as BFCL leaves it out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from evalsi.errors import SkipRecord
from evalsi.evaluators import evaluator
from evalsi.packs.benchmarks.bfcl_calls import DecodeError, json_calls, text_calls
from evalsi.packs.benchmarks.bfcl_multi_exec import MAX_CALLS, Call, Step, Turn, check_multi_turn, parse_ground_truth
from evalsi.packs.benchmarks.bfcl_multi_sim import NotBuiltError
from evalsi.records import content_text, content_value, from_value
from evalsi.v1alpha1.record_pb2 import Content, Record
from evalsi.v1alpha1.score_pb2 import Score

REFERENCE_KEYS = ("category", "ground_truth", "initial_config", "involved_classes")
MAX_TURNS = 100  # turns read from an output (BFCL's questions have at most 8)
MAX_STEPS = 1_000  # steps read from an output, all turns together


@lru_cache(maxsize=256)
def _reference(text: str) -> tuple[str, tuple[tuple[Call, ...], ...], Any, tuple[str, ...]] | str:
    """A reference's JSON text read once (the records of a question share it): its parts, or what is wrong."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, Mapping) or not set(REFERENCE_KEYS) <= set(value):
        return (f"the reference is not a BFCL multi-turn reference: expected a JSON object with "
                f"{', '.join(REFERENCE_KEYS)} (records read from bfcl:// multi_turn files carry one)")
    truth, classes, config = value["ground_truth"], value["involved_classes"], value["initial_config"]
    if not isinstance(truth, list) or not all(isinstance(turn, list) and all(isinstance(c, str) for c in turn)
                                             for turn in truth):
        return "reference ground_truth: expected a list of turns, each a list of call strings"
    if not isinstance(classes, list) or not all(isinstance(c, str) for c in classes) or not isinstance(config,
                                                                                                       Mapping):
        return "reference involved_classes: expected a list of class names; initial_config: an object"
    try:
        calls = tuple(tuple(parse_ground_truth(call) for call in turn) for turn in truth)
    except ValueError as exc:
        return f"reference ground_truth: {exc}"
    return str(value["category"]), calls, config, tuple(classes)


def model_turns(output: Content) -> list[Turn]:
    """The model's decoded calls per turn and step (see the module's docstring)."""
    if output.WhichOneof("kind") == "messages":
        return _message_turns(output)
    value = content_value(output)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise SkipRecord("the output is neither messages nor JSON turns: expected a list of turns, each a list "
                             "of steps (text in BFCL's call format, or a list of calls); a model target answers the "
                             "first turn only: play the questions with evalsi.datasets.bfcl_multi_drive") from None
    if not isinstance(value, list) or not all(isinstance(turn, list) for turn in value):
        raise SkipRecord("the output's JSON is not a list of turns, each a list of steps")
    if len(value) > MAX_TURNS or sum(len(turn) for turn in value) > MAX_STEPS:
        raise SkipRecord(f"the output has more than {MAX_TURNS} turns or {MAX_STEPS} steps")
    return [[step for raw in turn if (step := decode_step(raw))] for turn in value]


def _message_turns(output: Content) -> list[Turn]:
    turns: list[Turn] = [[]]
    steps = 0
    for message in output.messages.messages:
        if message.role == "user":
            turns.append([])
        elif message.role == "assistant":
            steps += 1
            if message.tool_calls:
                raw: Any = [{call.name: from_value(call.arguments) if call.arguments.WhichOneof("kind") else {}}
                            for call in message.tool_calls]
            else:
                raw = message.content
            step = decode_step(raw)
            if step:
                turns[-1].append(step)
        if len(turns) > MAX_TURNS or steps > MAX_STEPS:
            raise SkipRecord(f"the output has more than {MAX_TURNS} turns or {MAX_STEPS} steps")
    return turns


def decode_step(raw: Any) -> Step:
    """One answer's calls; [] when it does not decode (BFCL then leaves the answer out)."""
    try:
        if isinstance(raw, str):
            decoded = text_calls(raw)
            if any(_empty_dict(value) for call in decoded for arguments in call.values()
                   for value in arguments.values()):
                return []  # BFCL's prompting decoder fails on an empty dict argument
            return [Call(name, arguments, nested_calls=True) for call in decoded for name, arguments in call.items()]
        calls = json_calls(raw)
    except DecodeError:
        return []
    step = []
    for call in calls:
        for name, arguments in call.items():
            if isinstance(arguments, str):  # BFCL's function-calling result: the arguments' JSON text
                try:
                    arguments = json.loads(arguments)
                except json.JSONDecodeError:
                    return []
            if not isinstance(arguments, Mapping):
                return []
            step.append(Call(str(name), arguments))
    return step


def _empty_dict(value: Any) -> bool:
    """Whether BFCL's ``parse_nested_value`` fails on the value: an empty dict where it reads a dict (a dict's
    values, a nested call's arguments; not inside a list, which it writes with ``repr``)."""
    if not isinstance(value, dict):
        return False
    if not value:
        return True
    if all(isinstance(item, dict) for item in value.values()):  # a nested call: its first key's arguments
        return any(_empty_dict(item) for item in next(iter(value.values())).values())
    return any(_empty_dict(item) for item in value.values())


@evaluator(
    "builtin/bfcl-multi-turn",
    version="1.2.0",  # 1.1.0: TwitterAPI, TravelAPI and the long-context variants graded; 1.2.0: GorillaFileSystem
    # and MathAPI, so every class of BFCL's
    pack="benchmarks",
    requires=["output", "reference"],
    cheap=True,  # pure; bounded by MAX_TURNS, MAX_STEPS and the executor's MAX_CALLS
    description="BFCL's multi-turn checker (multi_turn_base, miss_func, miss_param, long_context): the model's "
    "calls per turn and the possible answer's replayed on fresh API simulators (native ports of BFCL's classes, "
    "long-context variants included); after each turn the simulators' states must be equal and every expected "
    "call's result among the model's. A question involving a class with no simulator is skipped, naming it.",
)
def bfcl_multi_turn(record: Record) -> Score:
    """Pass when BFCL's multi-turn checker finds the model's calls leave the simulators as the possible answer's do
    and produce every expected result, turn by turn."""
    text = content_text(record.reference) if record.reference.WhichOneof("kind") == "text" else json.dumps(
        content_value(record.reference))
    reference = _reference(text)
    if isinstance(reference, str):
        raise SkipRecord(reference)
    category, truth, config, classes = reference
    turns = model_turns(record.output)
    try:
        verdict = check_multi_turn(turns, [list(calls) for calls in truth], config, classes, category)
    except NotBuiltError as exc:
        raise SkipRecord(str(exc)) from None
    except ValueError as exc:  # more than MAX_CALLS
        raise SkipRecord(f"{exc} (MAX_CALLS {MAX_CALLS})") from None
    if verdict.valid:
        return Score(passed=True)
    return Score(passed=False, explanation=f"{verdict.error_type}: {verdict.error}"[:2000])


EVALUATORS = (bfcl_multi_turn,)
