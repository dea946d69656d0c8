"""BFCL's multi-turn questions played against a model, as bfcl-eval's prompting-mode inference loop plays them
(``BaseHandler.inference_multi_turn_prompting``).

The model sees the record's input (the system message listing the functions, then the first turn). Each of its
answers is decoded in BFCL's call format. One that decodes to calls has them run on the question's simulators
(``bfcl_multi_exec.Simulators``, kept for the whole question, started from its ``initial_config``), and the results
go back to it as BFCL's prompting mode sends them: one user message holding the Python text of
``[{"role": "tool", "name": <call>, "content": <result>}, ...]``. An answer with no call ends the turn, and the next
turn's messages follow (a turn that adds held-back functions brings BFCL's message listing them). A turn in which the
model keeps calling past :data:`MAX_STEPS` answers ends the question (BFCL's force quit), so the conversation has
fewer turns than the question and grades ``multi_turn:force_terminated``.

In function-calling mode (``mode="fc"``, as ``BaseHandler.inference_multi_turn_FC`` with bfcl-eval's OpenAI
chat-completions handler) the model sees the turns' messages alone (no system prompt) and the functions as tools
(``bfcl_multi_fc.fc_tools``); it answers with tool calls, each call's result goes back as a ``tool`` message with the
call's id, and a turn that adds held-back functions sends them as tools, its user message BFCL's FC one. An answer
with no tool call, or one whose arguments are not JSON objects, ends the turn; the step limit is the same.

The finished conversation becomes the record's output messages, graded by ``builtin/bfcl-multi-turn``. There the
results are ``tool`` messages (one per call), so that every ``user`` message starts a turn; in FC mode the
assistant messages carry their tool calls, which the grader reads as the steps' calls.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from evalsi.datasets.bfcl_multi_fc import ADDED_FUNCTIONS_FC, fc_calls, fc_tools
from evalsi.datasets.bfcl_prompt import listed_functions
from evalsi.errors import InfraError
from evalsi.harness.models import ChatModel
from evalsi.judges import JudgeClient
from evalsi.packs.benchmarks.bfcl_multi import decode_step
from evalsi.packs.benchmarks.bfcl_multi_exec import Simulators, call_source
from evalsi.packs.benchmarks.bfcl_multi_sim import NotBuiltError
from evalsi.records import content_value, from_value, to_content, to_value
from evalsi.v1alpha1.record_pb2 import Record

MAX_STEPS = 20  # BFCL's MAXIMUM_STEP_LIMIT: answers with calls in one turn before the question is given up
SIMULATION_KEY = "bfcl_simulation"  # the metadata saying how the conversation ended
Mode = Literal["prompting", "fc"]
MODES: tuple[Mode, ...] = ("prompting", "fc")


def _question(record: Record, simulators: Simulators | None = None
              ) -> tuple[list[list[dict[str, Any]]], Simulators]:
    """A question's turns and its simulators, started (a class with no simulator is refused before the model is
    asked anything); ``simulators`` given (the memory driver's, whose state it reads afterwards) are used as
    they are."""
    reference = json.loads(record.reference.text) if record.reference.WhichOneof("kind") == "text" else {}
    if "bfcl_turns" not in record.metadata or not {"initial_config", "involved_classes"} <= set(reference):
        raise ValueError(f"{record.id}: not a BFCL multi-turn question (read one from bfcl://DIR/multi_turn_base)")
    turns = from_value(record.metadata["bfcl_turns"])
    if simulators is not None:
        return turns, simulators
    simulators = Simulators(reference["initial_config"], reference["involved_classes"],
                            long_context="long_context" in str(reference.get("category", "")))
    simulators.start()
    return turns, simulators


async def _execute(simulators: Simulators, calls: list[Any]) -> list[str]:
    """The calls' results; simulators that do network work (``blocking``: the web search's) run in a thread, so a
    slow page does not hold up the other questions played at the same time."""
    if getattr(simulators, "blocking", False):
        return await asyncio.to_thread(simulators.execute, calls)
    return simulators.execute(calls)


def _played(record: Record, output: list[dict[str, Any]], stop: dict[str, Any], mode: Mode,
            sent_input: list[dict[str, Any]] | None = None) -> Record:
    played = Record()
    played.CopyFrom(record)
    if sent_input is not None:  # FC mode: the model saw no system prompt listing the functions
        played.input.CopyFrom(to_content({"messages": sent_input}))
    played.output.CopyFrom(to_content({"messages": output}))
    played.metadata[SIMULATION_KEY].CopyFrom(to_value({**stop, "mode": mode}))
    return played


async def play_question(record: Record, model: JudgeClient | ChatModel, *,
                        simulators: Simulators | None = None) -> Record:
    """The record with the model's conversation in BFCL's prompting mode as its output (see the module's
    docstring). Raises ``InfraError`` when the model fails after retries, and ``NotBuiltError`` or ``ValueError``
    for a question that cannot be played (a class with no simulator, a record not read from a BFCL multi-turn
    file). ``simulators``: the calls run on these (already started) rather than on new ones."""
    turns, simulators = _question(record, simulators)
    sent: list[dict[str, Any]] = list(content_value(record.input)["messages"])
    output: list[dict[str, Any]] = []
    stop = {"reason": "done", "turns": len(turns)}
    for index, turn in enumerate(turns):
        if index:
            sent.extend(turn)
            output.extend(turn)
        steps = 0
        while True:
            answer = (await model.complete(sent)).text
            sent.append({"role": "assistant", "content": answer})
            output.append({"role": "assistant", "content": answer})
            calls = decode_step(answer)
            if not calls:
                break
            names = [call_source(call) for call in calls]
            results = await _execute(simulators, calls)
            sent.append({"role": "user", "content": repr([{"role": "tool", "name": name, "content": result}
                                                         for name, result in zip(names, results, strict=True)])})
            output.extend({"role": "tool", "name": name, "content": result}
                          for name, result in zip(names, results, strict=True))
            steps += 1
            if steps > MAX_STEPS:
                stop = {"reason": "step_limit", "turns": index + 1}
                break
        if stop["reason"] == "step_limit":
            break
    return _played(record, output, stop, "prompting")


async def play_question_fc(record: Record, model: ChatModel, *, simulators: Simulators | None = None,
                           functions: list[dict[str, Any]] | None = None) -> Record:
    """The record with the model's conversation in BFCL's function-calling mode as its output (see the module's
    docstring); raises as :func:`play_question` does. ``model`` speaks OpenAI chat completions (the tool calls are
    read from its answer's body, their arguments as the model wrote them). ``simulators`` as in
    :func:`play_question`; ``functions``: the tools' functions when the record's system message does not list them
    (a memory question's, whose system message is the memory's)."""
    turns, simulators = _question(record, simulators)
    if functions is None:
        functions = listed_functions(content_value(record.input)["messages"][0]["content"])
    missed: dict[str, list[dict[str, Any]]] = from_value(record.metadata["bfcl_missed_functions"]) if (
        "bfcl_missed_functions" in record.metadata) else {}
    tools = fc_tools(functions)
    sent: list[dict[str, Any]] = []
    output: list[dict[str, Any]] = []
    stop = {"reason": "done", "turns": len(turns)}
    for index, turn in enumerate(turns):
        if str(index) in missed:  # BFCL adds the held-back functions to the tools, and says so in FC's words
            functions = [*functions, *missed[str(index)]]
            tools = fc_tools(functions)
            turn = [{"role": "user", "content": ADDED_FUNCTIONS_FC}]
        sent.extend(turn)
        if index:
            output.extend(turn)
        steps = 0
        while True:
            answer = await model.complete(sent, tools=tools)
            raw_calls = answer.raw["choices"][0]["message"].get("tool_calls") or []
            message: dict[str, Any] = {"role": "assistant", "content": answer.text}
            if raw_calls:
                message["tool_calls"] = [{"id": call["id"], "name": call["function"]["name"],
                                          "arguments": call["function"].get("arguments", "")} for call in raw_calls]
            sent.append(message)
            output.append(message)
            calls = fc_calls(raw_calls)
            if not calls:  # no tool call, or one BFCL cannot decode: the turn ends (no results are sent)
                break
            results = await _execute(simulators, calls)
            for call, result in zip(message["tool_calls"], results, strict=True):
                result_message = {"role": "tool", "tool_call_id": call["id"], "name": call["name"], "content": result}
                sent.append(result_message)
                output.append(result_message)
            steps += 1
            if steps > MAX_STEPS:
                stop = {"reason": "step_limit", "turns": index + 1}
                break
        if stop["reason"] == "step_limit":
            break
    return _played(record, output, stop, "fc", sent_input=turns[0])


async def play_questions(records: Sequence[Record], model: JudgeClient | ChatModel, *, concurrency: int = 4,
                         mode: Mode = "prompting", on_done: Callable[[int], None] | None = None
                         ) -> tuple[list[Record], dict[str, str]]:
    """Each question played in ``mode`` (:func:`play_question`, :func:`play_question_fc`, which needs a model
    that takes tools: ``evalsi.harness.models.ConnectorModel``), ``concurrency`` at a time: the conversations as
    records, and why each question that could not be played could not (its id to the reason). ``on_done`` is told
    of each question finished, played or not (a progress bar)."""
    if mode == "fc" and isinstance(model, JudgeClient):
        raise TypeError("mode 'fc' needs a model that takes tools (evalsi.harness.models.ConnectorModel), "
                        "not a JudgeClient")

    async def play(record: Record) -> Record:
        if mode == "fc":
            assert not isinstance(model, JudgeClient)
            return await play_question_fc(record, model)
        return await play_question(record, model)

    return await play_each(records, play, concurrency=concurrency, on_done=on_done)


async def play_each(records: Sequence[Record], play: Callable[[Record], Awaitable[Record]], *, concurrency: int,
                    on_done: Callable[[int], None] | None = None,
                    gate: asyncio.Semaphore | None = None) -> tuple[list[Record], dict[str, str]]:
    """``play`` of each record, ``concurrency`` at a time (or under ``gate``, shared with other calls): the played
    records in order, and the reason of each that could not be played (a model failing after retries, a class
    with no simulator, a record that is not a question), by its id. ``on_done`` is told of each one finished."""
    gate = gate or asyncio.Semaphore(concurrency)
    errors: dict[str, str] = {}

    async def one(record: Record) -> Record | None:
        async with gate:
            try:
                return await play(record)
            except (InfraError, NotBuiltError, ValueError) as exc:
                errors[record.id] = str(exc)
                return None
            finally:
                if on_done is not None:
                    on_done(1)

    played = await asyncio.gather(*(one(record) for record in records))
    return [record for record in played if record is not None], errors


def as_played(record: Record, played: Record) -> Record:
    """The question's record with what was played: the messages sent first as its input, the conversation as its
    output, and how it ended (``bfcl_simulation``)."""
    result = Record()
    result.CopyFrom(record)
    result.input.CopyFrom(played.input)
    result.output.CopyFrom(played.output)
    result.metadata[SIMULATION_KEY].CopyFrom(played.metadata[SIMULATION_KEY])
    return result
