"""A scripted model on a local OpenAI-compatible server that answers with tool calls, for playing the example's BFCL
multi-turn questions offline in function-calling mode (``evalsi cases play-bfcl --mode fc``).

    python examples/benchmarks/bfcl/scripted_fc_model.py --port 8766

It plays as ``scripted_model.py`` does in text: ``multi_turn_base_0`` right, and in ``multi_turn_miss_func_0`` it
calls ``resolve_ticket`` a turn before that function is offered, then has nothing left to do in the turn that offers
it, which BFCL fails. For ``memory/`` (``bfcl://examples/benchmarks/bfcl/memory/memory_kv``) it stores what the
prerequisite conversations say in its key-value memory and answers two of the three questions from it. For
``web_search/`` (``bfcl://examples/benchmarks/bfcl/web_search/web_search_base``, played against a search endpoint) it
searches, reads the first result's page and answers ``web_search_0``; it gives up on ``web_search_1``.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
from typing import Any

from evalsi.testing import FakeOpenAI

Answer = str | list[dict[str, Any]]  # text, or tool calls ({"name", "arguments"})
SCRIPT: dict[str, list[Answer]] = {  # the start of a user turn -> the model's answers in that turn, in order
    "Send Bor the message": [
        [{"name": "get_user_id", "arguments": {"user": "Bor"}}],
        [{"name": "send_message", "arguments": {"receiver_id": "USR002",
                                                "message": "The printer on floor 2 is jammed again."}}],
        "Sent."],
    "Raise the priority of ticket 1": [
        [{"name": "edit_ticket", "arguments": {"ticket_id": 1, "updates": {"priority": 4}}},
         {"name": "get_ticket", "arguments": {"ticket_id": 1}}],
        "Ticket 1 now has priority 4."],
    "Close it.": [[{"name": "close_ticket", "arguments": {"ticket_id": 1}}], "Closed."],
    "Open a ticket titled 'VPN down'": [
        [{"name": "create_ticket", "arguments": {"title": "VPN down", "priority": 3}}], "Opened ticket 2."],
    "Resolve ticket 2": [
        [{"name": "resolve_ticket", "arguments": {"ticket_id": 2, "resolution": "Restarted the VPN gateway"}}],
        "Resolved."],
    "I have updated some more functions": ["It is already resolved."],
    "Tell Cene the VPN works again": [
        [{"name": "get_user_id", "arguments": {"user": "Cene"}}],
        [{"name": "send_message", "arguments": {"receiver_id": "USR003", "message": "VPN is back."}}], "Sent."],
    # memory/ (memory_kv): the prerequisite conversations write the memory, the questions read it
    "My dentist appointment is on May 3.": [
        [{"name": "core_memory_add", "arguments": {"key": "dentist_appointment", "value": "May 3"}}], "Noted."],
    "Thanks!": ["You are welcome."],
    "Rent is due on the 1st.": [
        [{"name": "archival_memory_add", "arguments": {"key": "rent_due", "value": "the 1st"}}], "Noted."],
    "When is my dentist appointment?": ["{'answer': 'May 3', 'context': 'in my core memory'}"],
    "When is rent due?": [[{"name": "archival_memory_retrieve", "arguments": {"key": "rent_due"}}],
                          "{'answer': 'the 1st', 'context': 'in my archival memory'}"],
    "What is my cat's name?": ["{'answer': 'I do not know', 'context': 'I do not know'}"],
    # web_search/: FIRST_HREF stands for the first result's link in the search's answer
    "Some countries are known for producing luxury goods": [
        [{"name": "search_engine_query", "arguments": {"keywords": "richest billionaire China Forbes April 2025"}}],
        [{"name": "fetch_url_content", "arguments": {"url": "FIRST_HREF", "mode": "truncate"}}],
        "{'answer': 'Zhang Yiming', 'context': 'Forbes lists him as the richest person in China, where Da Hong Pao "
        "is grown'}"],
    "The Super Bowl halftime show": [
        [{"name": "search_engine_query", "arguments": {"keywords": "2024 Super Bowl halftime performer"}}],
        "{'answer': 'I do not know', 'context': 'I do not know'}"],
}
FIRST_HREF = "FIRST_HREF"


def reply(body: dict[str, Any]) -> Any:
    # In FC mode a step's results come back as tool messages: the last user message starts the turn.
    messages = body["messages"]
    turn = max(i for i, m in enumerate(messages) if m["role"] == "user")
    answers = next((script for start, script in SCRIPT.items() if messages[turn]["content"].startswith(start)),
                   ["I cannot help with that."])
    answer = answers[min(sum(1 for m in messages[turn:] if m["role"] == "assistant"), len(answers) - 1)]
    if isinstance(answer, str):
        return answer
    return "tool_calls", [{**call, "arguments": {key: _first_href(messages) if value == FIRST_HREF else value
                                                  for key, value in call["arguments"].items()}} for call in answer]


def _first_href(messages: list[dict[str, Any]]) -> str:
    """The first link in the last search results the conversation holds (a list's Python text, as BFCL's
    execution gives a result that is not a dict)."""
    for message in reversed(messages):
        if message["role"] == "tool" and message["content"].startswith("[{"):
            return str(ast.literal_eval(message["content"])[0]["href"])
    return "https://example.invalid/"


async def serve(port: int) -> None:
    async with FakeOpenAI(reply, port=port) as server:
        print(f"scripted BFCL model (tool calls); base_url: {server.base_url}", flush=True)
        await asyncio.Event().wait()  # until Ctrl-C


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8766)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(parser.parse_args().port))
