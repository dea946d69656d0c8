"""Agent cases: 200 replayed cases against the local scripted agent, graded by deterministic checks only.

    python benchmarks/cases.py [--cases 200] [--rounds 3]

Target (docs/cases.md): the runner's overhead per turn, beyond the agent's own time, under 5 ms. Cases per
second is reported beside it (no target: it is mostly the agent's speed).

The scripted agent (evalsi.cases.testing, the one the cases tests use) runs in its own process, as a deployment
would, and times every request it serves (describe, seed, turn) from its handler's start to its return. Two
figures stand for "the agent's own time" per turn:
- server: that handler time, summed over the run, per turn. Runner time minus it is the overhead of
  everything on our side of the handler: HTTP on both ends, SSE parsing, the transcript, the graders, the report.
- no-op client: the same requests (seed, then each turn's POST, the stream read whole and discarded) from a
  bare aiohttp session with no runner around it. Runner time minus it is what the runner adds over the
  cheapest client that could drive this agent.
The target is checked against the stricter first one. Each round replays every case in a fresh conversation;
the figures are the median round.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import aiohttp
from aiohttp import web

from evalsi.cases import Case, HttpTransport, load_text, run_cases
from evalsi.cases.testing import Conversation, ScriptedAgent

TARGET_OVERHEAD_MS = 5.0
AGENT = "loja-chocolates"

CASE = """\
id: bench-{index}
agent: loja-chocolates
requires:
  tools: [search_products, add_to_cart]
{state}turns:
  - user: "quero chocolate amargo"
    tools_called: [search_products]
  - user: "adiciona uma unidade no carrinho"
expect:
  tools_called: [add_to_cart]
  never_calls: [create_order]
  calls_one_of: [add_to_cart, create_order]
  first_tool: add_to_cart
  max_tool_calls: 2
  reply_includes: ["adicionei"]
  reply_omits: ["SKU-70-DARK"]
  must_not: [pii_leak, tool_error, phantom_action]
  claims:
    add_to_cart: '\\b(?:adicion(?:ei|ad[oa]s?)|coloquei)\\b'
  policy: ask_once
"""
# Every fourth case starts from a snapshot, so seeding is part of the measured path.
STATE = """\
state:
  history:
    - { role: user, content: "oi" }
    - { role: assistant, content: "Olá! Em que posso ajudar?" }
"""


def _reply(message: str, conversation: Conversation) -> dict[str, Any]:
    if "carrinho" in message:
        return {"calls": [{"name": "add_to_cart", "arguments": {"sku": "SKU-70-DARK", "qty": 1}, "status": "ok"}],
                "reply": "Adicionei uma unidade do chocolate 70% ao seu carrinho. Quer mais alguma coisa?"}
    return {"calls": [{"name": "search_products", "arguments": {"query": message}, "status": "ok"}],
            "ui": [{"component": "product_card", "items": [{"id": "p1"}]}],
            "reply": "Temos o chocolate amargo 70%, uma barra de 100 g por R$ 19,90."}


class TimedAgent(ScriptedAgent):
    """The scripted agent, timing its own handlers; ``GET /bench/stats`` reads and resets the totals."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(agents={AGENT: {"tools": ["search_products", "add_to_cart", "create_order"]}},
                         default=_reply, **kwargs)
        self.handled_s = 0.0
        self.handled = 0

    def app(self) -> web.Application:
        app = super().app()
        app.middlewares.append(self._timed)
        app.router.add_get("/bench/stats", self._stats)
        return app

    @web.middleware
    async def _timed(self, request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
        if request.path.startswith("/bench/"):
            return await handler(request)
        started = time.perf_counter()
        try:
            return await handler(request)
        finally:
            self.handled_s += time.perf_counter() - started
            self.handled += 1

    async def _stats(self, request: web.Request) -> web.Response:
        body = {"seconds": self.handled_s, "requests": self.handled}
        self.handled_s, self.handled = 0.0, 0
        self.conversations.clear()  # a long benchmark must not grow the agent's memory round after round
        self.requests.clear()
        return web.json_response(body)


def serve_agent() -> None:
    agent = TimedAgent()

    async def main() -> None:
        async with agent:
            print(agent.port, flush=True)
            await asyncio.Event().wait()

    asyncio.run(main())


async def _stats(session: aiohttp.ClientSession, base_url: str) -> dict[str, Any]:
    async with session.get(f"{base_url}/bench/stats") as response:
        return await response.json()


async def _noop_round(base_url: str, cases: list[Case], round_index: int) -> float:
    """The same requests as the runner's, from a bare session: seed, then each turn's POST read whole."""
    async with aiohttp.ClientSession() as session:
        started = time.perf_counter()
        for case in cases:
            conversation = f"noop-{round_index}-{case.id}"
            if case.state:
                async with session.post(f"{base_url}/v1/conversations/{conversation}/seed",
                                        json={"agent": case.agent, "state": case.state}) as response:
                    await response.read()
            for turn in case.turns:
                body = {"agent": case.agent, "conversation": conversation, "input": turn.user, "stream": True}
                async with session.post(f"{base_url}/v1/responses", json=body) as response:
                    await response.read()
        return time.perf_counter() - started


async def _runner_round(base_url: str, cases: list[Case]) -> tuple[float, int]:
    started = time.perf_counter()
    report = await run_cases(cases, HttpTransport(base_url))
    elapsed = time.perf_counter() - started
    passed = report.summary.counts["pass"]
    if passed != len(cases):
        failed = next(r for r in report.results if r.status != "pass")
        raise SystemExit(f"expected every case to pass, got {report.summary.counts}: {failed.id} {failed.reason}")
    return elapsed, passed


async def _measure(base_url: str, cases: list[Case], rounds: int) -> list[dict[str, float]]:
    turns = sum(len(case.turns) for case in cases)
    out = []
    async with aiohttp.ClientSession() as stats:
        await _runner_round(base_url, cases)  # warm-up: imports, connections, the agent's first requests
        await _noop_round(base_url, cases, -1)
        await _stats(stats, base_url)
        for index in range(rounds):
            runner_s, _ = await _runner_round(base_url, cases)
            agent_s = (await _stats(stats, base_url))["seconds"]
            noop_s = await _noop_round(base_url, cases, index)
            noop_agent_s = (await _stats(stats, base_url))["seconds"]
            out.append({
                "runner_ms": runner_s * 1000 / turns, "agent_ms": agent_s * 1000 / turns,
                "noop_ms": noop_s * 1000 / turns, "noop_agent_ms": noop_agent_s * 1000 / turns,
                "cases_per_s": len(cases) / runner_s,
            })
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--serve-agent", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="Print the median round as JSON too.")
    args = parser.parse_args()
    if args.serve_agent:
        serve_agent()
        return

    cases = []
    for index in range(args.cases):
        (case,) = load_text(CASE.format(index=index, state=STATE if index % 4 == 0 else ""), f"bench-{index}.yaml")
        assert isinstance(case, Case), case
        cases.append(case)
    turns = sum(len(case.turns) for case in cases)
    agent = subprocess.Popen([sys.executable, __file__, "--serve-agent"], stdout=subprocess.PIPE, text=True)
    try:
        assert agent.stdout is not None
        base_url = f"http://127.0.0.1:{agent.stdout.readline().strip()}"
        rounds = asyncio.run(_measure(base_url, cases, args.rounds))
    finally:
        agent.terminate()
        agent.wait(timeout=10)

    median = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    overhead = median["runner_ms"] - median["agent_ms"]
    over_noop = median["runner_ms"] - median["noop_ms"]
    verdict = "meets" if overhead < TARGET_OVERHEAD_MS else "MISSES"
    seeded = sum(1 for case in cases if case.state)
    print(f"cases replayed:                    {args.cases:>6} ({turns} turns, {seeded} seeded), deterministic graders "
          f"only, median of {args.rounds} rounds")
    print(f"cases per second:                  {median['cases_per_s']:>9.1f}  (no target)")
    print(f"runner time per turn:              {median['runner_ms']:>9.3f} ms")
    print(f"agent's own time per turn:         {median['agent_ms']:>9.3f} ms  (its handlers, timed in its process)")
    print(f"runner overhead per turn:          {overhead:>9.3f} ms  (target < {TARGET_OVERHEAD_MS:g} ms: {verdict})")
    print(f"no-op client time per turn:        {median['noop_ms']:>9.3f} ms  (agent {median['noop_agent_ms']:.3f} ms "
          "of it)")
    print(f"runner time beyond a no-op client: {over_noop:>9.3f} ms per turn")
    if args.json:
        print(json.dumps({**median, "overhead_ms": overhead, "over_noop_ms": over_noop}))


if __name__ == "__main__":
    main()
