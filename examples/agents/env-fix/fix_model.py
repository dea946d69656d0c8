"""A scripted stand-in for a coding model, so env-fix.yaml runs without an API key.

It works the environment's bug like a careful agent would, one tool per turn: read calc.py, write it back with
``a - b`` replaced by its fix, run the tests, then answer with what the tests printed. ``make_reply("a * b")``
makes a model whose fix is wrong (the checker fails it)::

    python examples/agents/env-fix/fix_model.py --port 8766
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable
from typing import Any

from evalsi.testing import FakeOpenAI


def make_reply(fix: str = "a + b") -> Callable[[dict[str, Any]], Any]:
    def reply(body: dict[str, Any]) -> Any:
        """Text, or a ``("tool_calls", [...])`` step (evalsi.testing.providers)."""
        results = [m["content"] for m in body["messages"] if m.get("role") == "tool"]
        if not results:
            return ("tool_calls", [{"name": "read_file", "arguments": {"path": "calc.py"}}])
        if len(results) == 1:
            fixed = results[0].replace("a - b", fix)
            return ("tool_calls", [{"name": "write_file", "arguments": {"path": "calc.py", "content": fixed}}])
        if len(results) == 2:
            return ("tool_calls", [{"name": "run_shell", "arguments": {"command": "python3 test_calc.py"}}])
        ran = json.loads(results[2])
        return f"Changed calc.py; the tests say: {ran['stdout'].strip()}"

    return reply


reply = make_reply()


async def _serve(port: int) -> None:
    async with FakeOpenAI(reply=reply, port=port) as server:
        print(f"model on {server.base_url}", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8766)
    asyncio.run(_serve(parser.parse_args().port))
