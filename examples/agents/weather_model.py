"""A scripted stand-in for a chat model with tools, so agent-harness.yaml runs without an API key.

It asks for ``get_weather`` when the last user message names a city ("... weather in Paris?"), answers from the
tool's result once it has one, and greets otherwise. Its answers depend only on the request, so concurrent
trials each get theirs::

    python examples/agents/weather_model.py --port 8765
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from typing import Any

from evalsi.testing import FakeOpenAI

_CITY = re.compile(r"weather in ([A-Z][\w-]*)")


def reply(body: dict[str, Any]) -> Any:
    """Text, or a ``("tool_calls", [...])`` step (evalsi.testing.providers)."""
    last = body["messages"][-1]
    if last.get("role") == "tool":
        result = json.loads(last["content"])
        return f"It is {result['temperature']} C in {result['city']}."
    city = _CITY.search(str(last.get("content", "")))
    if city is None:
        return "Hello! Ask me about the weather."
    return ("tool_calls", [{"name": "get_weather", "arguments": {"city": city.group(1)}}])


async def _serve(port: int) -> None:
    async with FakeOpenAI(reply=reply, port=port) as server:
        print(f"model on {server.base_url}", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    asyncio.run(_serve(parser.parse_args().port))
