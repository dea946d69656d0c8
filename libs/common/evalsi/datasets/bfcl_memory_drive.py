"""BFCL's memory questions played against a model as bfcl-eval plays its ``memory_kv``, ``memory_rec_sum`` and
``memory_vector`` categories, in its prompting or function-calling mode (the turn loop is ``bfcl_multi_drive``'s).

For each scenario (and backend) of the records, first its prerequisite conversations (metadata ``bfcl_prereq``),
one after another: each starts a fresh memory (``bfcl_memory``'s ``MemoryAPI_kv`` or ``MemoryAPI_rec_sum``,
``bfcl_memory_vector``'s ``MemoryAPI_vector``, which embeds with all-MiniLM-L6-v2 from its wheel) from
the snapshot the previous one left (none for the first), its first turn led by BFCL's memory system prompt (the
scenario's setting, how the memory works, and the memory's content as ``_dump_core_memory_to_context`` shows it),
and its turns are played with the memory's functions; the memory it leaves is the next snapshot (BFCL's
``_flush_memory_to_local_file``). Then each question of the scenario, from the last snapshot (each on its own copy,
so no question sees another's writes, as in BFCL, where questions do not flush): its system message is the memory
prompt and BFCL's agentic answer format, joined by a blank line (``add_memory_instruction_system_prompt``). In
prompting mode BFCL's prompting system prompt (``evalsi.datasets.bfcl_prompt``) comes first in the same system
message. The functions (as listed, or as tools) carry the language hint bfcl-eval adds to their descriptions.

The played question is the record with the conversation as its output (graded by ``builtin/bfcl-agentic``), the
messages sent first as its input, metadata ``bfcl_simulation`` (how it ended, the mode) and
``bfcl_memory_snapshot`` (the memory the question started from).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

from evalsi.datasets.bfcl_multi_drive import Mode, as_played, play_each, play_question, play_question_fc
from evalsi.datasets.bfcl_prompt import hinted, lead_system, prompting_turn
from evalsi.errors import InfraError
from evalsi.harness.models import ChatModel
from evalsi.judges import JudgeClient
from evalsi.packs.benchmarks.bfcl_memory_vector import require_model
from evalsi.packs.benchmarks.bfcl_multi_exec import Simulators
from evalsi.packs.benchmarks.bfcl_multi_sim import NotBuiltError
from evalsi.records import content_value, from_value, to_content, to_value
from evalsi.v1alpha1.record_pb2 import Record

SNAPSHOT_KEY = "bfcl_memory_snapshot"
# bfcl_eval.constants.default_prompts.MEMORY_AGENT_SETTINGS
AGENT_SETTINGS = {
    "student": "You are an academic-support assistant for college student. Remember key personal and academic "
    "details discussed across sessions, and draw on them to answer questions or give guidance.",
    "customer": "You are a general customer support assistant for an e-commerce platform. Your task is to "
    "understand and remember information that can be used to provide information about user inquiries, "
    "preferences, and offer consistent, helpful assistance over multiple interactions.",
    "finance": "You are a high-level executive assistant supporting a senior finance professional. Retain and "
    "synthesize both personal and professional information including facts, goals, prior decisions, and family "
    "life across sessions to provide strategic, context-rich guidance and continuity.",
    "healthcare": "You are a healthcare assistant supporting a patient across appointments. Retain essential "
    "medical history, treatment plans, and personal preferences to offer coherent, context-aware guidance and "
    "reminders.",
    "notetaker": "You are a personal organization assistant. Capture key information from conversations, like "
    "tasks, deadlines, and preferences, and use it to give reliable reminders and answers in future sessions.",
}
_PERSISTENT = ("is persistent across multiple conversations with the user, and can be accessed in a later "
               "interactions. You should actively manage your memory data to keep track of important information, "
               "ensure that it is up-to-date and easy to retrieve to provide personalized responses to the user "
               "later.")
# MEMORY_BACKEND_INSTRUCTION_CORE_ARCHIVAL (kv, vector) and MEMORY_BACKEND_INSTRUCTION_UNIFIED (rec_sum)
CORE_ARCHIVAL_PROMPT = (
    "{scenario_setting}\n\nYou have access to an advanced memory system, consisting of two memory types 'Core "
    "Memory' and 'Archival Memory'. Both type of memory " + _PERSISTENT + "\n\nThe Core memory is limited in size, "
    "but always visible to you in context. The Archival Memory has a much larger capacity, but will be held outside "
    "of your immediate context due to its size.\n\nHere is the content of your Core Memory from previous "
    "interactions:\n{memory_content}\n")
UNIFIED_PROMPT = (
    "{scenario_setting}\n\nYou have access to an advanced memory system, which " + _PERSISTENT + "\n\nHere is the "
    "content of your memory system from previous interactions:\n{memory_content}\n")


def memory_prompt(backend: str, scenario: str, memory: Any) -> str:
    """BFCL's memory system prompt for a scenario, showing ``memory`` (a ``bfcl_memory`` instance)."""
    template = UNIFIED_PROMPT if backend == "rec_sum" else CORE_ARCHIVAL_PROMPT
    return template.format(scenario_setting=AGENT_SETTINGS[scenario],
                           memory_content=memory._dump_core_memory_to_context())


def _first_turn(turn: list[dict[str, str]], prompt: str, functions: list[dict[str, Any]], mode: Mode
                ) -> list[dict[str, str]]:
    """The first turn with the memory prompt leading its system message (a new one when it has none,
    ``add_memory_instruction_system_prompt``), and in prompting mode BFCL's prompting system prompt listing
    ``functions`` (already hinted) before that (``system_prompt_pre_processing_chat_model``)."""
    turn = lead_system(turn, prompt)
    return prompting_turn(turn, functions) if mode == "prompting" else turn


async def _conversation(record_id: str, turns: list[list[dict[str, str]]], memory: dict[str, Any],
                        snapshot: dict[str, Any], model: JudgeClient | ChatModel, mode: Mode
                        ) -> tuple[Record, dict[str, Any]]:
    """One conversation played on a memory started from ``snapshot``: the played record and the memory's
    snapshot after it."""
    class_name = str(memory["class"])
    simulators = Simulators({class_name: snapshot}, [class_name], long_context=False)
    simulators.start()
    instance = simulators.instances[class_name]
    functions: list[dict[str, Any]] = memory["functions"]
    first = _first_turn(turns[0], memory_prompt(str(memory["backend"]), str(memory["scenario"]), instance),
                        functions, mode)
    record = Record(id=record_id)
    record.input.CopyFrom(to_content({"messages": first}))
    record.reference.CopyFrom(to_content(json.dumps({"initial_config": {class_name: snapshot},
                                                     "involved_classes": [class_name]})))
    record.metadata["bfcl_turns"].CopyFrom(to_value([first, *turns[1:]]))
    if mode == "fc":
        assert not isinstance(model, JudgeClient)
        played = await play_question_fc(record, model, simulators=simulators, functions=functions)
    else:
        played = await play_question(record, model, simulators=simulators)
    return played, instance._snapshot()


async def play_memory(records: Sequence[Record], model: JudgeClient | ChatModel, *, concurrency: int = 4,
                      mode: Mode = "prompting", on_done: Callable[[int], None] | None = None
                      ) -> tuple[list[Record], dict[str, str]]:
    """Each scenario's prerequisite conversations, then its questions (see the module's docstring),
    ``concurrency`` conversations at a time: the played questions, and why each question that could not be
    played could not (its id to the reason; a failed prerequisite conversation fails its scenario's questions).
    ``mode`` "fc" needs a model that takes tools (``evalsi.harness.models.ConnectorModel``)."""
    if mode == "fc" and isinstance(model, JudgeClient):
        raise TypeError("mode 'fc' needs a model that takes tools (evalsi.harness.models.ConnectorModel), "
                        "not a JudgeClient")
    if any(from_value(r.metadata["bfcl_memory"]).get("backend") == "vector" for r in records
           if "bfcl_memory" in r.metadata):
        require_model()  # the vector backend's model: a missing wheel is bad input, named before anything plays
    gate = asyncio.Semaphore(concurrency)
    errors: dict[str, str] = {}
    groups: dict[tuple[str, str], list[Record]] = {}
    for record in records:
        if "bfcl_memory" not in record.metadata or "bfcl_prereq" not in record.metadata:
            errors[record.id] = "not a BFCL memory question (read one from bfcl://DIR/memory_kv)"
            if on_done is not None:
                on_done(1)
            continue
        memory = from_value(record.metadata["bfcl_memory"])
        groups.setdefault((str(memory["class"]), str(memory["scenario"])), []).append(record)

    async def scenario(questions: list[Record]) -> list[Record]:
        first = questions[0]
        # offered as bfcl-eval offers them, listed or as tools: each description with its language hint
        memory = {**from_value(first.metadata["bfcl_memory"]),
                  "functions": hinted(json.loads(first.metadata["bfcl_functions"].string_value))}
        snapshot: dict[str, Any] = {}
        try:
            for prereq in from_value(first.metadata["bfcl_prereq"]):
                async with gate:
                    _played, snapshot = await _conversation(prereq["id"], prereq["turns"], memory, snapshot, model,
                                                            mode)
        except (InfraError, NotBuiltError, ValueError) as exc:
            for record in questions:
                errors[record.id] = f"prerequisite conversation: {exc}"
            if on_done is not None:
                on_done(len(questions))
            return []
        async def question(record: Record) -> Record:
            turns = [list(content_value(record.input)["messages"])]
            played, _after = await _conversation(record.id, turns, memory, snapshot, model, mode)
            result = as_played(record, played)
            result.metadata[SNAPSHOT_KEY].CopyFrom(to_value(snapshot))
            return result

        played, failed = await play_each(questions, question, concurrency=concurrency, on_done=on_done, gate=gate)
        errors.update(failed)
        return played

    done = await asyncio.gather(*(scenario(questions) for questions in groups.values()))
    return [record for played in done for record in played], errors
