"""Local agents speaking the OpenAI Responses API and A2A, with scripted behaviour per user message.

For tests of ``ResponsesTransport`` and ``A2ATransport``; nothing here calls a model. Both serve on loopback
(``async with``), or from a thread for the blocking CLI (``evalsi.cases.testing.ThreadedAgent``).

``ScriptedResponses`` answers ``POST /v1/responses`` (``base_url`` ends in ``/v1``), streamed (SSE, the Responses
event types) when the request asks for it, else a JSON response object; ``stream`` forces one or the other. A
reply entry (keyed by the user message; ``default`` answers the rest) may hold ``reply``, ``calls`` (``name``,
``arguments``, ``status`` ok/error/blocked/None (no output item), ``error``, ``gate``), ``fail`` (a failed
response), ``drop`` (cut the stream before ``response.completed``), ``malformed`` (a data line that is not JSON,
or a body that is not a response object), ``http_status`` and ``delay``. An entry may also be a function
``(message, inputs so far in the chain) -> entry``. ``previous_response_id`` must name a stored response.

``ScriptedA2A`` serves the agent card at ``/.well-known/agent.json`` and JSON-RPC (``message/send``,
``tasks/get``, ``tasks/cancel``) at ``/``. An entry may hold ``reply`` (an artifact's text), ``message`` (the
final status message's text), ``state`` (the final state, default ``completed``), ``calls`` (tool-call ``data``
parts, each reported started and then ended, as the docs describe), ``ui``, ``polls`` (``tasks/get`` answers
still ``working`` before the final state, default 1), ``never`` (stays ``working``), ``direct`` (answer with a
Message, no task), ``malformed`` (``json``: a body that is not JSON; ``result``: no result; ``state``: an unknown
state) or ``rpc_error``. A function entry gets ``(message, the context's user messages so far)``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Self

from aiohttp import web

Entry = Mapping[str, Any] | Callable[[str, list[str]], Mapping[str, Any]]


class _Server:
    def __init__(self, *, replies: Mapping[str, Entry] | None, default: Entry | None, host: str,
                 port: int) -> None:
        self.replies = dict(replies or {})
        self.default: Entry = default if default is not None else {"reply": "ok"}
        self.host, self.port = host, port
        self.requests: list[tuple[str, Any]] = []  # (path, JSON body or None), in arrival order
        self._runner: web.AppRunner | None = None

    def app(self) -> web.Application:
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def entry(self, message: str, earlier: list[str]) -> Mapping[str, Any]:
        entry: Any = self.replies.get(message, self.default)
        return entry(message, earlier) if callable(entry) else entry

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
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


# --- OpenAI Responses ------------------------------------------------------------------------------------


class ScriptedResponses(_Server):
    """``POST /v1/responses`` as an OpenAI Responses-compatible endpoint whose agent runs its tools itself."""

    def __init__(self, *, replies: Mapping[str, Entry] | None = None, default: Entry | None = None,
                 stream: bool | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(replies=replies, default=default, host=host, port=port)
        self.stream = stream
        self.chains: dict[str, list[str]] = {}  # response id -> the user inputs of its chain, this one last
        self._ids = itertools.count(1)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/responses", self._respond)
        return app

    def _output(self, entry: Mapping[str, Any], n: int) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for index, call in enumerate(entry.get("calls") or []):
            call_id = f"call_{n}_{index}"
            items.append({"type": "function_call", "id": f"fc_{n}_{index}", "call_id": call_id,
                          "name": call["name"], "arguments": json.dumps(call.get("arguments", {})),
                          "status": "completed"})
            status = call.get("status", "ok")
            if status is None:
                continue
            output: Any = {"result": "done"}
            if status == "error":
                output = {"error": {"message": call.get("error", "tool failed")}}
            elif status == "blocked":
                output = {"status": "blocked", "gate": call.get("gate")}
            items.append({"type": "function_call_output", "id": f"fco_{n}_{index}", "call_id": call_id,
                          "output": json.dumps(output)})
        reply = str(entry.get("reply", ""))
        items.append({"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
                      "content": [{"type": "output_text", "text": reply, "annotations": []}]})
        return items

    async def _respond(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append((request.path, body))
        if not isinstance(body.get("model"), str) or not isinstance(body.get("input"), str):
            return web.json_response({"error": {"type": "invalid_request_error", "message": "model and input"}},
                                     status=400)
        previous = body.get("previous_response_id")
        if previous is not None and previous not in self.chains:
            return web.json_response({"error": {"type": "invalid_request_error", "code": "previous_response_not_found",
                                                "message": f"Previous response {previous!r} not found."}}, status=400)
        earlier = list(self.chains.get(previous, [])) if previous else []
        message = body["input"]
        entry = self.entry(message, earlier)
        if entry.get("delay"):
            await asyncio.sleep(float(entry["delay"]))
        if entry.get("http_status"):
            return web.json_response({"error": {"message": "scripted failure"}}, status=int(entry["http_status"]))
        n = next(self._ids)
        response_id = f"resp_{n}"
        self.chains[response_id] = [*earlier, message]
        output = self._output(entry, n)
        base = {"id": response_id, "object": "response", "created_at": 0, "model": body["model"],
                "previous_response_id": previous, "error": None, "incomplete_details": None}
        final = {**base, "status": "completed", "output": output}
        if entry.get("fail"):
            final = {**base, "status": "failed", "output": [],
                     "error": {"code": "server_error", "message": str(entry["fail"])}}
        stream = body.get("stream", False) if self.stream is None else self.stream
        if not stream:
            if entry.get("malformed"):
                return web.json_response({"id": response_id, "status": "completed", "output": "not a list"})
            return web.json_response(final)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        sequence = itertools.count()

        async def send(kind: str, **data: Any) -> None:
            payload = json.dumps({"type": kind, "sequence_number": next(sequence), **data})
            await response.write(f"event: {kind}\ndata: {payload}\n\n".encode())

        await send("response.created", response={**base, "status": "in_progress", "output": []})
        await send("response.in_progress", response={**base, "status": "in_progress", "output": []})
        if entry.get("fail"):
            await send("response.failed", response=final)
            return response
        for index, item in enumerate(output):
            if item["type"] == "message":
                break
            if item["type"] == "function_call":
                await send("response.output_item.added", output_index=index,
                           item={**item, "arguments": "", "status": "in_progress"})
                await send("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                           delta=item["arguments"])
                await send("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                           arguments=item["arguments"])
            else:
                await send("response.output_item.added", output_index=index, item=item)
            await send("response.output_item.done", output_index=index, item=item)
        if entry.get("malformed"):
            await response.write(b"event: response.output_text.delta\ndata: {not json\n\n")
            return response
        if entry.get("drop"):
            if request.transport is not None:
                request.transport.close()
            return response
        index, message_item = len(output) - 1, output[-1]
        text = message_item["content"][0]["text"]
        await send("response.output_item.added", output_index=index,
                   item={**message_item, "status": "in_progress", "content": []})
        await send("response.content_part.added", item_id=message_item["id"], output_index=index, content_index=0,
                   part={"type": "output_text", "text": "", "annotations": []})
        half = len(text) // 2
        for piece in (text[:half], text[half:]):
            if piece:
                await send("response.output_text.delta", item_id=message_item["id"], output_index=index,
                           content_index=0, delta=piece)
        await send("response.output_text.done", item_id=message_item["id"], output_index=index, content_index=0,
                   text=text)
        await send("response.content_part.done", item_id=message_item["id"], output_index=index, content_index=0,
                   part=message_item["content"][0])
        await send("response.output_item.done", output_index=index, item=message_item)
        await send("response.completed", response=final)
        return response


# --- A2A -------------------------------------------------------------------------------------------------


def _rpc_error(request_id: Any, code: int, message: str) -> web.Response:
    return web.json_response({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


def _message(role: str, parts: list[dict[str, Any]], context_id: str, task_id: str | None = None) -> dict[str, Any]:
    message = {"kind": "message", "role": role, "messageId": uuid.uuid4().hex, "parts": parts,
               "contextId": context_id}
    if task_id:
        message["taskId"] = task_id
    return message


class ScriptedA2A(_Server):
    """An A2A agent: the agent card, and JSON-RPC ``message/send`` / ``tasks/get`` / ``tasks/cancel``."""

    def __init__(self, *, card: Mapping[str, Any] | None = None, replies: Mapping[str, Entry] | None = None,
                 default: Entry | None = None, card_status: int | None = None, host: str = "127.0.0.1",
                 port: int = 0) -> None:
        super().__init__(replies=replies, default=default, host=host, port=port)
        self.card = dict(card or {"name": "scripted", "skills": []})
        self.card_status = card_status
        self.contexts: dict[str, list[str]] = {}  # contextId -> the user messages sent into it
        self.tasks: dict[str, dict[str, Any]] = {}
        self._pending: dict[str, tuple[Mapping[str, Any], int]] = {}  # task id -> (entry, polls left)
        self.canceled: list[str] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/.well-known/agent.json", self._card)
        app.router.add_post("/", self._rpc)
        return app

    async def _card(self, request: web.Request) -> web.Response:
        self.requests.append((request.path, None))
        if self.card_status is not None:
            return web.json_response({"error": "scripted"}, status=self.card_status)
        card = {"protocolVersion": "0.3.0", "description": "a scripted agent", "url": f"{self.base_url}/",
                "version": "1.0.0", "capabilities": {"streaming": False, "pushNotifications": False},
                "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain", "application/json"],
                **self.card}
        return web.json_response(card)

    async def _rpc(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return _rpc_error(None, -32700, "parse error")
        self.requests.append((request.path, body))
        request_id = body.get("id") if isinstance(body, dict) else None
        if not isinstance(body, dict) or body.get("jsonrpc") != "2.0" or not isinstance(body.get("params"), dict):
            return _rpc_error(request_id, -32600, "invalid request")
        method, params = body.get("method"), body["params"]
        if method == "message/send":
            return self._send(request_id, params)
        if method in ("tasks/get", "tasks/cancel"):
            task = self.tasks.get(str(params.get("id")))
            if task is None:
                return _rpc_error(request_id, -32001, "task not found")
            if method == "tasks/cancel":
                self.canceled.append(task["id"])
                self._pending.pop(task["id"], None)
                task["status"] = {"state": "canceled"}
                return self._result(request_id, task)
            return self._poll(request_id, task)
        return _rpc_error(request_id, -32601, f"method not found: {method}")

    def _result(self, request_id: Any, result: Any) -> web.Response:
        return web.json_response({"jsonrpc": "2.0", "id": request_id, "result": result})

    def _send(self, request_id: Any, params: Mapping[str, Any]) -> web.Response:
        message = params.get("message")
        if not isinstance(message, dict) or message.get("role") != "user" or not isinstance(message.get("parts"), list):
            return _rpc_error(request_id, -32602, "params.message must be a user message with parts")
        text = "".join(p.get("text", "") for p in message["parts"] if isinstance(p, dict) and p.get("kind") == "text")
        context_id = message.get("contextId") or uuid.uuid4().hex
        earlier = self.contexts.setdefault(context_id, [])
        entry = self.entry(text, list(earlier))
        earlier.append(text)
        user = _message("user", message["parts"], context_id)
        if entry.get("rpc_error"):
            return _rpc_error(request_id, -32603, str(entry["rpc_error"]))
        if entry.get("malformed") == "json":
            return web.Response(text="<html>not json</html>", content_type="text/html")
        if entry.get("malformed") == "result":
            return web.json_response({"jsonrpc": "2.0", "id": request_id})
        if entry.get("direct"):
            return self._result(request_id, _message("agent", [{"kind": "text", "text": str(entry.get("reply", ""))}],
                                                     context_id))
        task_id = message.get("taskId")
        if task_id is not None:
            task = self.tasks.get(task_id)
            if task is None or task["status"]["state"] != "input-required":
                return _rpc_error(request_id, -32602, f"task {task_id} is not waiting for input")
            task["history"].append(user)
        else:
            task_id = uuid.uuid4().hex
            task = {"kind": "task", "id": task_id, "contextId": context_id, "history": [user], "artifacts": []}
            self.tasks[task_id] = task
        task["status"] = {"state": "submitted"}
        polls = int(entry.get("polls", 1))
        if polls <= 0 and not entry.get("never"):
            self._finish(task, entry)
        else:
            self._pending[task_id] = (entry, polls)
        return self._result(request_id, task)

    def _poll(self, request_id: Any, task: dict[str, Any]) -> web.Response:
        if task["id"] in self._pending:
            entry, left = self._pending[task["id"]]
            if entry.get("never") or left > 1:
                self._pending[task["id"]] = (entry, left - 1)
                task["status"] = {"state": "working"}
            else:
                del self._pending[task["id"]]
                self._finish(task, entry)
        return self._result(request_id, task)

    def _finish(self, task: dict[str, Any], entry: Mapping[str, Any]) -> None:
        context_id, n = task["contextId"], len(task["artifacts"])
        for index, call in enumerate(entry.get("calls") or []):
            call_id = f"{task['id'][:8]}-{n}-{index}"
            started = {"type": "tool_call", "call_id": call_id, "name": call["name"],
                       "arguments": call.get("arguments", {})}
            task["history"].append(_message("agent", [{"kind": "data", "data": started}], context_id, task["id"]))
            if call.get("status", "ok") is None:
                continue
            ended = {"type": "tool_call", "call_id": call_id, "name": call["name"],
                     "status": call.get("status", "ok"),
                     **{k: call[k] for k in ("gate", "error") if call.get(k) is not None}}
            task["history"].append(_message("agent", [{"kind": "data", "data": ended}], context_id, task["id"]))
        ui = [{"kind": "data", "data": {"type": "ui", **u}} for u in entry.get("ui") or []]
        if entry.get("reply") is not None or ui:
            parts = [*ui, *([{"kind": "text", "text": str(entry["reply"])}] if entry.get("reply") is not None
                            else [])]
            task["artifacts"].append({"artifactId": f"artifact-{n}", "name": "answer", "parts": parts})
        state = "bogus" if entry.get("malformed") == "state" else entry.get("state", "completed")
        status: dict[str, Any] = {"state": state, "timestamp": "2025-01-01T00:00:00Z"}
        if entry.get("message") is not None:
            status["message"] = _message("agent", [{"kind": "text", "text": str(entry["message"])}], context_id,
                                         task["id"])
        task["status"] = status
