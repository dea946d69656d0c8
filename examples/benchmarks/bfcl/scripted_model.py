"""A scripted model on a local OpenAI-compatible server, for playing the example's BFCL multi-turn questions
offline (``evalsi.datasets.bfcl_multi_drive``): it answers in BFCL's call format.

    python examples/benchmarks/bfcl/scripted_model.py --port 8766

It answers ``multi_turn_base_0`` right. In ``multi_turn_miss_func_0`` it calls ``resolve_ticket`` a turn before
that function is offered, then has nothing left to do in the turn that offers it, which BFCL fails.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from typing import Any

from evalsi.testing import FakeOpenAI

RESULTS = "[{'role': 'tool'"  # BFCL's prompting mode hands a step's results back as a user message starting so
SCRIPT = {  # the start of a user turn -> the model's answers in that turn, in order
    "Send Bor the message": ["[get_user_id(user='Bor')]",
                             "[send_message(receiver_id='USR002', message='The printer on floor 2 is jammed again.')]",
                             "Sent."],
    "Raise the priority of ticket 1": ["[edit_ticket(ticket_id=1, updates={'priority': 4}), get_ticket(ticket_id=1)]",
                                       "Ticket 1 now has priority 4."],
    "Close it.": ["[close_ticket(ticket_id=1)]", "Closed."],
    "Open a ticket titled 'VPN down'": ["[create_ticket(title='VPN down', priority=3)]", "Opened ticket 2."],
    "Resolve ticket 2": ["[resolve_ticket(ticket_id=2, resolution='Restarted the VPN gateway')]", "Resolved."],
    "[{'name': 'resolve_ticket'": ["It is already resolved."],
    "Tell Cene the VPN works again": ["[get_user_id(user='Cene')]",
                                      "[send_message(receiver_id='USR003', message='VPN is back.')]", "Sent."],
}


def reply(body: dict[str, Any]) -> str:
    messages = body["messages"]
    turn = max(i for i, m in enumerate(messages) if m["role"] == "user" and not m["content"].startswith(RESULTS))
    answers = next((script for start, script in SCRIPT.items() if messages[turn]["content"].startswith(start)),
                   ["I cannot help with that."])
    return answers[min(sum(1 for m in messages[turn:] if m["role"] == "assistant"), len(answers) - 1)]


async def serve(port: int) -> None:
    async with FakeOpenAI(reply, port=port) as server:
        print(f"scripted BFCL model; base_url: {server.base_url}", flush=True)
        await asyncio.Event().wait()  # until Ctrl-C


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8766)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(parser.parse_args().port))
