"""A local agent deployment that obeys docs/agent-protocol.md, with scripted behaviour per user message.

For tests, examples and CLI smoke runs; nothing in it calls a model::

    agent = ScriptedAgent(
        agents={"shop": {"tools": ["search_voucher"], "capabilities": ["promotions"]}},
        replies={"any coupon?": {"calls": [{"name": "search_voucher", "status": "ok"}], "reply": "CHOCO10"}},
    )
    async with agent:
        transport = HttpTransport(agent.base_url)

A reply entry (keyed by the exact user message; ``default`` answers the rest) may hold ``reply`` (text),
``calls`` (``name``, ``arguments``, ``status`` ok/error/blocked, ``gate``, ``error``), ``ui`` (``component``,
``items``), ``delay`` (seconds before answering), ``stream_delay`` (seconds between the stream's first event and
the rest), ``drop`` (cut the connection after the tool calls, before
``response.completed``), ``fail`` (an ``error`` event with this message) or ``http_status`` (answer the POST
with that status). An entry may also be a function ``(message, conversation) -> entry``.

From a shell: ``python -m evalsi.cases.testing --script examples/cases/agent.yaml --port 8765``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Self

import yaml
from aiohttp import web

Entry = Mapping[str, Any] | Callable[[str, "Conversation"], Mapping[str, Any]]


@dataclass
class Conversation:
    agent: str
    tenant: str
    state: dict[str, Any] = field(default_factory=dict)
    messages: list[dict[str, str]] = field(default_factory=list)


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status)


class ScriptedAgent:
    """The protocol's three endpoints on loopback, answering from a script."""

    def __init__(
        self,
        *,
        agents: Mapping[str, Mapping[str, Any]] | None = None,
        replies: Mapping[str, Entry] | None = None,
        default: Entry | None = None,
        seeding: bool = True,
        seed_support: bool = True,
        token: str | None = None,
        describe_status: int | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.agents = {name: dict(d) for name, d in (agents or {}).items()}
        self.replies = dict(replies or {})
        self.default: Entry = default if default is not None else {"reply": "ok"}
        self.seeding = seeding
        self.seed_support = seed_support
        self.token = token
        self.describe_status = describe_status
        self.host, self.port = host, port
        self.conversations: dict[tuple[str, str], Conversation] = {}
        self.requests: list[tuple[str, str]] = []  # (method, path), in arrival order
        self._runner: web.AppRunner | None = None

    @classmethod
    def from_file(cls, path: str, **kwargs: Any) -> ScriptedAgent:
        with open(path, encoding="utf-8") as handle:
            script = yaml.safe_load(handle) or {}
        return cls(agents=script.get("agents"), replies=script.get("replies"), default=script.get("default"),
                   seeding=script.get("seeding", True), **kwargs)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._auth])
        app.router.add_get("/v1/agents/{agent}", self._describe)
        app.router.add_post("/v1/conversations/{conversation}/seed", self._seed)
        app.router.add_post("/v1/responses", self._respond)
        return app

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- handlers ----------------------------------------------------------------------------------------

    @web.middleware
    async def _auth(self, request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
        self.requests.append((request.method, request.path))
        if self.token and request.headers.get("Authorization") != f"Bearer {self.token}":
            return _error(401, "unauthorized", "a valid Bearer token is required")
        return await handler(request)

    async def _describe(self, request: web.Request) -> web.Response:
        if self.describe_status is not None:
            return _error(self.describe_status, "unavailable", "description unavailable (scripted)")
        name = request.match_info["agent"]
        if name not in self.agents:
            return _error(404, "unknown_agent", f"no agent {name!r}")
        agent = self.agents[name]
        return web.json_response({
            "id": name, "tools": list(agent.get("tools", [])), "tools_open": bool(agent.get("tools_open", False)),
            "capabilities": list(agent.get("capabilities", [])),
            "side_effect_tools": list(agent.get("side_effect_tools", [])),
        })

    async def _seed(self, request: web.Request) -> web.Response:
        if not self.seed_support:
            return _error(501, "seeding_unsupported", "this deployment has no seed support")
        if not self.seeding:
            return _error(403, "seeding_disabled", "the evals.seeding setting is off")
        body = await request.json()
        key = (request.headers.get("x-evalsi-tenant", "platform"), request.match_info["conversation"])
        conversation = self.conversations.get(key)
        if conversation is not None and conversation.messages:
            return _error(409, "conversation_not_empty", "the conversation already has messages")
        self.conversations[key] = Conversation(body.get("agent", ""), key[0], dict(body.get("state") or {}))
        return web.Response(status=204)

    async def _respond(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        message, agent = str(body.get("input", "")), str(body.get("agent", ""))
        if self.agents and agent not in self.agents:
            return _error(404, "unknown_agent", f"no agent {agent!r}")
        key = (request.headers.get("x-evalsi-tenant", "platform"), str(body.get("conversation", "")))
        conversation = self.conversations.setdefault(key, Conversation(agent, key[0]))
        entry: Any = self.replies.get(message, self.default)
        if callable(entry):
            entry = entry(message, conversation)
        if entry.get("delay"):
            await asyncio.sleep(float(entry["delay"]))
        if entry.get("http_status"):
            return _error(int(entry["http_status"]), "scripted", "scripted failure")
        conversation.messages.append({"role": "user", "content": message})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)

        async def send(event: str, **data: Any) -> None:
            payload = json.dumps({"type": event, **data})
            await response.write(f"event: {event}\ndata: {payload}\n\n".encode())

        await send("response.created", conversation=key[1])
        await response.write(b": keep-alive\n\n")
        if entry.get("stream_delay"):  # the first byte is out; the rest of the answer takes this long
            await asyncio.sleep(float(entry["stream_delay"]))
        for index, call in enumerate(entry.get("calls") or []):
            call_id = f"c{index + 1}"
            await send("tool_call.started", call_id=call_id, name=call["name"], arguments=call.get("arguments", {}))
            if call.get("status", "ok") is None:
                continue  # scripted: the completion never arrives
            done: dict[str, Any] = {"call_id": call_id, "status": call.get("status", "ok")}
            for extra in ("gate", "error"):
                if call.get(extra) is not None:
                    done[extra] = call[extra]
            await send("tool_call.completed", **done)
        if entry.get("drop"):
            if request.transport is not None:
                request.transport.close()
            return response
        if entry.get("fail"):
            await send("error", message=str(entry["fail"]))
            return response
        for ui in entry.get("ui") or []:
            await send("ui", component=ui["component"], items=list(ui.get("items", [])))
        reply = str(entry.get("reply", ""))
        half = len(reply) // 2
        for piece in (reply[:half], reply[half:]):
            if piece:
                await send("output_text.delta", delta=piece)
        await send("response.completed", reply=reply)
        conversation.messages.append({"role": "assistant", "content": reply})
        return response


class ThreadedAgent:
    """A ``ScriptedAgent`` served from a background thread, for code under test that blocks (the CLI)."""

    def __init__(self, agent: ScriptedAgent) -> None:
        self.agent = agent
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> ScriptedAgent:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.agent.start(), self._loop).result(timeout=10)
        return self.agent

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self.agent.close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description="A scripted agent speaking docs/agent-protocol.md.")
    parser.add_argument("--script", required=True, help="YAML with agents, replies, default, seeding")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    agent = ScriptedAgent.from_file(args.script, host=args.host, port=args.port)
    web.run_app(agent.app(), host=args.host, port=args.port, print=lambda _: print(f"agent on {agent.base_url}"))


if __name__ == "__main__":
    main()
