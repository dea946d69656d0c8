"""Two scripted models on one local OpenAI-compatible server, for trying `evalsi cases simulate-tau2` offline on
the library domain: model ``user`` plays tau2's simulated user, model ``agent`` the librarian under test.

    python examples/benchmarks/tau2/scripted_models.py --port 8765

The user asks for the book its scenario names, gives its member id when asked and ends with ###STOP###; the
agent asks for the member id, looks the member up, tries to lend the book and says what happened.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from typing import Any

from evalsi.testing import FakeOpenAI


def user(body: dict[str, Any]) -> str:
    scenario = body["messages"][0]["content"]
    said = sum(1 for m in body["messages"] if m["role"] == "assistant")
    book = "Alamut" if "Alamut" in scenario else "book b2"
    return [f"Hi, I would like to borrow {book}.", "My member id is m1.", "Thanks, bye! ###STOP###"][min(said, 2)]


def agent(body: dict[str, Any]) -> Any:
    messages = body["messages"]
    asked = [str(m.get("content")) for m in messages if m["role"] == "user"]
    results = [str(m.get("content")) for m in messages if m["role"] == "tool"]
    if not any("m1" in text for text in asked):
        return "Sure. What is your member id?"
    if not results:
        return ("tool_calls", [{"name": "tau2_get_member", "arguments": {"member_id": "m1"}}])
    if len(results) == 1:
        book = "b1" if any("Alamut" in text for text in asked) else "b2"
        return ("tool_calls", [{"name": "tau2_lend_book", "arguments": {"member_id": "m1", "book_id": book}}])
    if "on loan" in results[1]:
        return "Sorry, that book is on loan."
    return f"Done ({results[1]}): it is due back in 14 days."


async def serve(port: int) -> None:
    async with FakeOpenAI(lambda body: user(body) if body["model"] == "user" else agent(body), port=port) as server:
        print(f"scripted user and agent; base_url: {server.base_url}", flush=True)
        await asyncio.Event().wait()  # until Ctrl-C


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(parser.parse_args().port))
