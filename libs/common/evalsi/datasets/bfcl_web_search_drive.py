"""BFCL's web search questions played against a model as bfcl-eval plays its ``web_search_base`` and
``web_search_no_snippet`` categories, in its prompting or function-calling mode (the turn loop is
``bfcl_multi_drive``'s).

Each question runs on its own ``WebSearchAPI`` (``packs.benchmarks.bfcl_web_search``), started with the record's
``show_snippet``, its searches going to the operator's :class:`SearchEndpoint` (none comes from a record). The
question's first message is BFCL's agentic answer format; in prompting mode BFCL's prompting system prompt
(``evalsi.datasets.bfcl_prompt``) leads that system message; the functions (listed, or as tools) carry bfcl-eval's
language hint. The played question is the record with the conversation as its output (graded by
``builtin/bfcl-agentic``), the messages sent first as its input, and metadata ``bfcl_simulation``.

Its simulators are marked ``blocking``, so the drivers run its searches and page fetches in a worker thread and a
slow page holds up only its own question.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from evalsi.datasets.bfcl_multi_drive import Mode, as_played, play_each, play_question, play_question_fc
from evalsi.datasets.bfcl_prompt import hinted, prompting_turn
from evalsi.harness.models import ChatModel
from evalsi.judges import JudgeClient
from evalsi.packs.benchmarks.bfcl_multi_exec import Simulators
from evalsi.packs.benchmarks.bfcl_web_search import SearchEndpoint, WebSearchAPI
from evalsi.records import content_value, from_value, to_content, to_value
from evalsi.v1alpha1.record_pb2 import Record

CLASS_NAME = "WebSearchAPI"


@dataclass
class NetworkSimulators(Simulators):
    """Simulators whose calls go over the network: the drivers run them in a worker thread."""

    blocking: ClassVar[bool] = True


def _simulators(config: dict[str, Any], endpoint: SearchEndpoint) -> Simulators:
    """The question's simulators: its one ``WebSearchAPI`` on the operator's endpoint, already started (``start``
    keeps the instances it finds), so the registry of BFCL's classes is not asked for it."""
    simulators = NetworkSimulators({CLASS_NAME: config}, [CLASS_NAME], long_context=False)
    instance = WebSearchAPI(endpoint)
    instance._load_scenario(config)
    simulators.instances[CLASS_NAME] = instance
    simulators.methods.update(search_engine_query=instance.search_engine_query,
                              fetch_url_content=instance.fetch_url_content)
    return simulators


async def _question(record: Record, model: JudgeClient | ChatModel, mode: Mode, endpoint: SearchEndpoint
                    ) -> Record:
    config = {"show_snippet": bool(from_value(record.metadata["bfcl_web_search"])["show_snippet"])}
    functions = hinted(json.loads(record.metadata["bfcl_functions"].string_value))
    turn = list(content_value(record.input)["messages"])
    first = prompting_turn(turn, functions) if mode == "prompting" else turn
    simulators = _simulators(config, endpoint)
    asked = Record(id=record.id)
    asked.input.CopyFrom(to_content({"messages": first}))
    asked.reference.CopyFrom(to_content(json.dumps({"initial_config": {CLASS_NAME: config},
                                                    "involved_classes": [CLASS_NAME]})))
    asked.metadata["bfcl_turns"].CopyFrom(to_value([first]))
    if mode == "fc":
        assert not isinstance(model, JudgeClient)
        return await play_question_fc(asked, model, simulators=simulators, functions=functions)
    return await play_question(asked, model, simulators=simulators)


async def play_web_search(records: Sequence[Record], model: JudgeClient | ChatModel, endpoint: SearchEndpoint, *,
                          concurrency: int = 4, mode: Mode = "prompting",
                          on_done: Callable[[int], None] | None = None) -> tuple[list[Record], dict[str, str]]:
    """Each web search question played in ``mode`` against ``endpoint``, ``concurrency`` at a time: the played
    questions, and why each one that could not be played could not (its id to the reason). ``mode`` "fc" needs a
    model that takes tools (``evalsi.harness.models.ConnectorModel``)."""
    if mode == "fc" and isinstance(model, JudgeClient):
        raise TypeError("mode 'fc' needs a model that takes tools (evalsi.harness.models.ConnectorModel), "
                        "not a JudgeClient")

    async def play(record: Record) -> Record:
        if "bfcl_web_search" not in record.metadata or "bfcl_functions" not in record.metadata:
            raise ValueError("not a BFCL web search question (read one from bfcl://DIR/web_search_base)")
        return as_played(record, await _question(record, model, mode, endpoint))

    return await play_each(records, play, concurrency=concurrency, on_done=on_done)
