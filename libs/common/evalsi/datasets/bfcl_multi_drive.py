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

The finished conversation becomes the record's output messages, graded by ``builtin/bfcl-multi-turn``. There the
results are ``tool`` messages (one per call), so that every ``user`` message starts a turn.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from evalsi.errors import InfraError
from evalsi.judges import JudgeClient
from evalsi.packs.benchmarks.bfcl_multi import decode_step
from evalsi.packs.benchmarks.bfcl_multi_exec import Simulators, call_source
from evalsi.packs.benchmarks.bfcl_multi_sim import NotBuiltError
from evalsi.records import content_value, from_value, to_content, to_value
from evalsi.v1alpha1.record_pb2 import Record

MAX_STEPS = 20  # BFCL's MAXIMUM_STEP_LIMIT: answers with calls in one turn before the question is given up
SIMULATION_KEY = "bfcl_simulation"  # the metadata saying how the conversation ended


async def play_question(record: Record, model: JudgeClient) -> Record:
    """The record with the model's conversation as its output (see the module's docstring). Raises ``InfraError``
    when the model fails after retries, and ``NotBuiltError`` or ``ValueError`` for a question that cannot be
    played (a class with no simulator, a record not read from a BFCL multi-turn file)."""
    reference = json.loads(record.reference.text) if record.reference.WhichOneof("kind") == "text" else {}
    if "bfcl_turns" not in record.metadata or not {"initial_config", "involved_classes"} <= set(reference):
        raise ValueError(f"{record.id}: not a BFCL multi-turn question (read one from bfcl://DIR/multi_turn_base)")
    turns = from_value(record.metadata["bfcl_turns"])
    simulators = Simulators(reference["initial_config"], reference["involved_classes"],
                            long_context="long_context" in str(reference.get("category", "")))
    simulators.start()  # a class with no simulator is refused before the model is asked anything
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
            results = simulators.execute(calls)
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
    played = Record()
    played.CopyFrom(record)
    played.output.CopyFrom(to_content({"messages": output}))
    played.metadata[SIMULATION_KEY].CopyFrom(to_value(stop))
    return played


async def play_questions(records: Sequence[Record], model: JudgeClient, *, concurrency: int = 4
                         ) -> tuple[list[Record], dict[str, str]]:
    """Each question played (:func:`play_question`), ``concurrency`` at a time: the conversations as records, and
    why each question that could not be played could not (its id to the reason)."""
    gate = asyncio.Semaphore(concurrency)
    errors: dict[str, str] = {}

    async def one(record: Record) -> Record | None:
        async with gate:
            try:
                return await play_question(record, model)
            except (InfraError, NotBuiltError, ValueError) as exc:
                errors[record.id] = str(exc)
                return None

    played = await asyncio.gather(*(one(record) for record in records))
    return [record for record in played if record is not None], errors
