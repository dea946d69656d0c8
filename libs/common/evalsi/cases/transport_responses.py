"""A transport to an OpenAI Responses-compatible endpoint: ``POST {base}/responses`` (docs/agent-protocol.md).

One turn is one response; the turns of a conversation are chained with ``previous_response_id``. The answer
is an SSE stream of the Responses event types or, when the endpoint does not stream, the response object as
JSON. Tool calls are the ``function_call`` (and ``mcp_call``) output items; how a call ended is read from its
``function_call_output`` item (the mapping is in docs/agent-protocol.md). There is no description endpoint
(``DescriptionUnavailable``: the cases run, ``requires`` unchecked) and no seeding (``SeedRefused``: skipped).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import aiohttp

from evalsi.cases.transcript import NOT_TOOL_CALLS, ToolCall, Turn
from evalsi.cases.transport import (
    AgentDescription,
    DescriptionUnavailable,
    SeedRefused,
    TransportError,
    _describe_exc,
    _snippet,
    iter_sse,
    sse_payload,
)
from evalsi.errors import BadInputError


class ResponsesTransport:
    """The client of an OpenAI Responses-compatible endpoint (aiohttp). ``model`` defaults to the case's agent."""

    def __init__(
        self, base_url: str, *, model: str | None = None, token: str | None = None, timeout: float = 120.0,
        stream: bool = True,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise BadInputError(f"--agent-url {base_url!r}: expected an http:// or https:// URL")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.token = token
        self.stream = stream
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None
        self._last: dict[tuple[str, str], str] = {}  # (tenant, conversation) -> the id of its last response

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self.timeout)
        return self._session

    def _headers(self, tenant: str) -> dict[str, str]:
        headers = {"x-evalsi-tenant": tenant}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    async def describe(self, agent: str, tenant: str) -> AgentDescription:
        raise DescriptionUnavailable("an OpenAI Responses-compatible endpoint has no agent description")

    async def seed(self, conversation: str, agent: str, tenant: str, state: Mapping[str, Any]) -> None:
        raise SeedRefused("an OpenAI Responses-compatible endpoint has no seed support")

    async def turn(self, conversation: str, agent: str, tenant: str, message: str) -> Turn:
        url = f"{self.base_url}/responses"
        key = (tenant, conversation)
        body: dict[str, Any] = {
            "model": self.model or agent, "input": message, "stream": self.stream, "store": True,
            "metadata": {"evalsi_conversation": conversation, "evalsi_tenant": tenant},
        }
        if key in self._last:
            body["previous_response_id"] = self._last[key]
        headers = {**self._headers(tenant), "Accept": "text/event-stream, application/json"}
        fold = ResponseFold()
        ttfb: float | None = None
        started = time.perf_counter()
        try:
            async with self.session.post(url, json=body, headers=headers) as response:
                if response.status != 200:
                    raise TransportError(f"POST {url} answered {response.status}: {await _snippet(response)}")
                if response.content_type.startswith("text/event-stream"):
                    async for event, data in iter_sse(response.content):
                        if ttfb is None:
                            ttfb = (time.perf_counter() - started) * 1000
                        if data == "[DONE]":
                            break
                        fold.feed(event, sse_payload(url, event, data))
                        if fold.completed:
                            break
                    if not fold.completed:
                        raise TransportError(f"POST {url}: the stream ended before response.completed "
                                             "(dropped mid-stream)")
                elif response.content_type in ("application/json", "text/json"):
                    try:
                        document = await response.json(content_type=None)
                    except (json.JSONDecodeError, UnicodeDecodeError):
                        raise TransportError(f"POST {url}: the answer is not JSON") from None
                    ttfb = (time.perf_counter() - started) * 1000
                    fold.take_response(document, "the response")
                else:
                    raise TransportError(f"POST {url}: expected text/event-stream or application/json, got "
                                         f"{response.content_type}")
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise TransportError(f"POST {url}: {_describe_exc(exc)}") from None
        turn = fold.build(message)
        if fold.response_id is None:
            raise TransportError(f"POST {url}: the response has no id; the conversation cannot be continued")
        self._last[key] = fold.response_id
        total = (time.perf_counter() - started) * 1000
        return Turn(user=turn.user, reply=turn.reply, tool_calls=turn.tool_calls, ui=turn.ui,
                    ttfb_ms=round(ttfb if ttfb is not None else total, 3), latency_ms=round(total, 3))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        self._last.clear()


class ResponseFold:
    """Folds Responses stream events (or a whole response object) into a ``Turn``."""

    def __init__(self) -> None:
        self.response_id: str | None = None
        self.items: dict[Any, Any] = {}  # output_index (or item id) -> the latest version of the item
        self.final_output: list[Any] | None = None
        self.deltas: list[str] = []
        self.completed = False

    def _response(self, payload: Mapping[str, Any], event: str) -> Mapping[str, Any]:
        response = payload.get("response")
        if not isinstance(response, Mapping):
            raise TransportError(f"{event}: 'response' is not a JSON object")
        if isinstance(response.get("id"), str):
            self.response_id = response["id"]
        return response

    def feed(self, event: str, payload: Mapping[str, Any]) -> None:
        kind = payload.get("type", event)
        if kind in ("response.created", "response.in_progress"):
            self._response(payload, kind)
        elif kind in ("response.output_item.added", "response.output_item.done"):
            item = payload.get("item")
            if not isinstance(item, Mapping):
                raise TransportError(f"{kind}: 'item' is not a JSON object")
            index = payload.get("output_index", item.get("id", len(self.items)))
            if kind.endswith(".done") or index not in self.items:
                self.items[index] = item
        elif kind == "response.output_text.delta":
            self.deltas.append(str(payload.get("delta", "")))
        elif kind == "response.completed":
            self.take_response(payload.get("response"), kind)
        elif kind in ("response.failed", "response.incomplete"):
            response = self._response(payload, kind)
            raise TransportError(f"{kind}: {_failure(response)}")
        elif kind == "error":
            raise TransportError(f"the endpoint reported an error: {payload.get('message', payload)}")

    def take_response(self, response: Any, where: str) -> None:
        """A whole response object: the non-streamed answer, or the one ``response.completed`` carries."""
        if not isinstance(response, Mapping):
            raise TransportError(f"{where}: expected a response object, got {type(response).__name__}")
        if isinstance(response.get("id"), str):
            self.response_id = response["id"]
        status = response.get("status", "completed")
        if response.get("error") or status in ("failed", "incomplete", "cancelled"):
            raise TransportError(f"{where}: the response is {status}: {_failure(response)}")
        if status != "completed":
            raise TransportError(f"{where}: status {status!r}; expected completed")
        output = response.get("output")
        if output is not None and not isinstance(output, list):
            raise TransportError(f"{where}: 'output' is not a list")
        self.final_output = output
        self.completed = True

    def build(self, message: str) -> Turn:
        items = self.final_output if self.final_output else [self.items[key] for key in self.items]
        return turn_from_output(message, items, self.deltas)


def _failure(response: Mapping[str, Any]) -> str:
    error = response.get("error")
    if isinstance(error, Mapping):
        return str(error.get("message") or error.get("code") or error)
    details = response.get("incomplete_details")
    if isinstance(details, Mapping) and details.get("reason"):
        return f"incomplete ({details['reason']})"
    return str(error or "no detail")


def _arguments(raw: Any) -> Any:
    """``arguments`` is a JSON string in the Responses API; parsed when it parses, kept as given otherwise."""
    if isinstance(raw, str):
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return raw


def output_end(output: Any) -> tuple[str, str | None, str | None]:
    """``(end, gate, error)`` from a ``function_call_output``'s ``output`` (docs/agent-protocol.md)."""
    parsed = output
    if isinstance(output, str):
        try:
            parsed = json.loads(output)
        except json.JSONDecodeError:
            return "ok", None, None
    if isinstance(parsed, Mapping):
        if parsed.get("status") == "blocked" or parsed.get("blocked") is True:
            gate = parsed.get("gate")
            return "blocked", gate if isinstance(gate, str) else None, None
        error = parsed.get("error")
        if error or parsed.get("status") == "error":
            if isinstance(error, Mapping):
                error = error.get("message") or error.get("code") or json.dumps(error)
            return "error", None, str(error) if error else "error"
    return "ok", None, None


def turn_from_output(message: str, items: list[Any], deltas: list[str]) -> Turn:
    """A turn from a response's ``output`` items: calls with their ends, and the assistant messages' text."""
    calls: dict[str, ToolCall] = {}
    texts: list[str] = []
    saw_message = False
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise TransportError(f"output[{index}] is not a JSON object")
        kind = item.get("type")
        if kind in ("function_call", "mcp_call"):
            if not isinstance(item.get("name"), str):
                raise TransportError(f"output[{index}]: a {kind} item needs a string 'name'")
            call_id = str(item.get("call_id") or item.get("id") or f"#{index}")
            end: str | None = None
            error = None
            if kind == "mcp_call" and (item.get("error") or item.get("output") is not None):
                end, error = ("error", str(item["error"])) if item.get("error") else ("ok", None)
            calls[call_id] = ToolCall(name=item["name"], arguments=_arguments(item.get("arguments")),
                                      end=end, error=error, id=call_id)  # type: ignore[arg-type]
        elif kind == "function_call_output":
            call_id = str(item.get("call_id"))
            if call_id not in calls:
                raise TransportError(f"output[{index}]: function_call_output for unknown call_id {call_id!r}")
            end, gate, error = output_end(item.get("output"))
            started = calls[call_id]
            calls[call_id] = ToolCall(started.name, started.arguments, end, gate, error, started.id)  # type: ignore[arg-type]
        elif kind == "message":
            if item.get("role", "assistant") != "assistant":
                continue
            saw_message = True
            content = item.get("content") or []
            if isinstance(content, str):
                texts.append(content)
                continue
            if not isinstance(content, list):
                raise TransportError(f"output[{index}]: message content is not a list")
            for part in content:
                if isinstance(part, Mapping) and part.get("type") == "output_text":
                    texts.append(str(part.get("text", "")))
                elif isinstance(part, Mapping) and part.get("type") == "refusal":
                    texts.append(str(part.get("refusal", "")))
    reply = "".join(texts) if saw_message else "".join(deltas)
    return Turn(user=message, reply=reply,
                tool_calls=tuple(call for call in calls.values() if call.name not in NOT_TOOL_CALLS))
