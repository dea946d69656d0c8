"""Transports: how the runner reaches an agent. Over HTTP/SSE (docs/agent-protocol.md) or in process.

Three outcomes a transport distinguishes, because the report does: ``DescriptionUnavailable`` (the cases run,
``requires`` unchecked), ``SeedRefused`` (the case is skipped with the reason) and ``TransportError`` (the
case is an error: the agent's answer was never seen, so it is not a failure).
"""

from __future__ import annotations

import importlib
import inspect
import json
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import aiohttp

from evalsi.cases.transcript import NOT_TOOL_CALLS, TOOL_ENDS, ToolCall, Turn, UIEvent
from evalsi.errors import BadInputError, EvalsiError, InfraError


class TransportError(InfraError):
    """The turn, seed or description could not be completed: an error, never a failed case."""


class SeedRefused(EvalsiError):
    """The deployment will not seed (seeding disabled, no seed support): the case is skipped."""


class DescriptionUnavailable(EvalsiError):
    """The agent's description cannot be read: its cases run with ``requires`` unchecked."""


@dataclass(frozen=True)
class AgentDescription:
    """What ``GET /v1/agents/{agent}`` says the agent has."""

    id: str
    tools: frozenset[str] = frozenset()
    tools_open: bool = False
    capabilities: frozenset[str] = frozenset()
    side_effect_tools: frozenset[str] = frozenset()

    @classmethod
    def from_json(cls, agent: str, body: Any) -> AgentDescription:
        if not isinstance(body, Mapping):
            raise DescriptionUnavailable("the description is not a JSON object")
        try:
            return cls(
                id=str(body.get("id", agent)),
                tools=frozenset(_str_list(body.get("tools", []), "tools")),
                tools_open=bool(body.get("tools_open", False)),
                capabilities=frozenset(_str_list(body.get("capabilities", []), "capabilities")),
                side_effect_tools=frozenset(_str_list(body.get("side_effect_tools", []), "side_effect_tools")),
            )
        except ValueError as exc:
            raise DescriptionUnavailable(str(exc)) from None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "tools": sorted(self.tools), "tools_open": self.tools_open,
                "capabilities": sorted(self.capabilities), "side_effect_tools": sorted(self.side_effect_tools)}


def _str_list(value: Any, name: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{name}: expected a list of strings")
    return value


class Transport(Protocol):
    async def describe(self, agent: str, tenant: str) -> AgentDescription: ...

    async def seed(self, conversation: str, agent: str, tenant: str, state: Mapping[str, Any]) -> None: ...

    async def turn(self, conversation: str, agent: str, tenant: str, message: str) -> Turn: ...

    async def close(self) -> None: ...


# --- parsing what an agent reports -------------------------------------------------------------------------


def tool_call_from_dict(item: Any, where: str) -> ToolCall:
    if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
        raise TransportError(f"{where}: a tool call needs a string 'name', got {item!r}")
    status = item.get("status")
    if status is not None and status not in TOOL_ENDS:
        raise TransportError(f"{where}: tool call {item['name']}: status {status!r}; expected ok, error or blocked")
    return ToolCall(
        name=item["name"], arguments=item.get("arguments"), end=status, gate=item.get("gate"),
        error=item.get("error"), id=item.get("call_id"),
    )


def ui_from_dict(item: Any, where: str) -> UIEvent:
    if not isinstance(item, Mapping) or not isinstance(item.get("component"), str):
        raise TransportError(f"{where}: a ui event needs a string 'component', got {item!r}")
    items = item.get("items", [])
    count = items if isinstance(items, int) and not isinstance(items, bool) else len(items or [])
    return UIEvent(component=item["component"], items=count)


def sse_payload(url: str, event: str, data: str) -> Mapping[str, Any]:
    """The JSON object an SSE event carries; anything else is a transport error naming the event."""
    try:
        payload = json.loads(data) if data else {}
    except json.JSONDecodeError:
        raise TransportError(f"POST {url}: event {event!r} carries data that is not JSON") from None
    if not isinstance(payload, Mapping):
        raise TransportError(f"POST {url}: event {event!r}: data is not a JSON object")
    return payload


async def iter_sse(content: aiohttp.StreamReader) -> AsyncIterator[tuple[str, str]]:
    """``(event, data)`` pairs of a Server-Sent Events stream; comments skipped, multi-line data joined."""
    event = ""
    data: list[str] = []
    while True:
        raw = await content.readline()
        if not raw:
            break
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data or event:
                yield event or "message", "\n".join(data)
            event, data = "", []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
    if data or event:  # no blank line after the last event: still an event, the stream ended after it
        yield event or "message", "\n".join(data)


class _TurnBuilder:
    """Folds stream events into a ``Turn``, in the vocabulary of docs/agent-protocol.md."""

    def __init__(self, message: str) -> None:
        self.message = message
        self.calls: dict[str, ToolCall] = {}
        self.order: list[str] = []
        self.ui: list[UIEvent] = []
        self.deltas: list[str] = []
        self.reply: str | None = None
        self.completed = False

    def feed(self, event: str, payload: Mapping[str, Any]) -> None:
        if event == "tool_call.started":
            call = tool_call_from_dict({**payload, "status": None}, "tool_call.started")
            key = str(payload.get("call_id", len(self.order)))
            self.calls[key] = call
            self.order.append(key)
        elif event == "tool_call.completed":
            key = str(payload.get("call_id"))
            if key not in self.calls:
                raise TransportError(f"tool_call.completed for unknown call_id {key!r}")
            status = payload.get("status")
            if status not in TOOL_ENDS:
                raise TransportError(f"tool_call.completed: status {status!r}; expected ok, error or blocked")
            started = self.calls[key]
            self.calls[key] = ToolCall(started.name, started.arguments, status, payload.get("gate"),
                                       payload.get("error"), started.id)
        elif event == "ui":
            self.ui.append(ui_from_dict(payload, "ui"))
        elif event == "output_text.delta":
            self.deltas.append(str(payload.get("delta", "")))
        elif event == "response.completed":
            reply = payload.get("reply")
            self.reply = reply if isinstance(reply, str) else None
            self.completed = True
        elif event == "error":
            raise TransportError(f"the agent reported an error: {payload.get('message', payload)}")

    def build(self) -> Turn:
        calls = tuple(self.calls[key] for key in self.order if self.calls[key].name not in NOT_TOOL_CALLS)
        reply = self.reply if self.reply is not None else "".join(self.deltas)
        return Turn(user=self.message, reply=reply, tool_calls=calls, ui=tuple(self.ui))


# --- HTTP ------------------------------------------------------------------------------------------------


class HttpTransport:
    """The HTTP/SSE client of docs/agent-protocol.md (aiohttp)."""

    def __init__(self, base_url: str, *, token: str | None = None, timeout: float = 120.0,
                 eval_profile: str | None = None) -> None:
        """``eval_profile`` (``evalsi cases simulate --eval-profile``) is sent as ``x-evalsi-eval-profile``."""
        if not base_url.startswith(("http://", "https://")):
            raise BadInputError(f"--agent-url {base_url!r}: expected an http:// or https:// URL")
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.eval_profile = eval_profile
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    def _headers(self, tenant: str) -> dict[str, str]:
        headers = {"x-evalsi-tenant": tenant}
        if self.eval_profile:
            headers["x-evalsi-eval-profile"] = self.eval_profile
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self.timeout)
        return self._session

    async def describe(self, agent: str, tenant: str) -> AgentDescription:
        url = f"{self.base_url}/v1/agents/{agent}"
        try:
            async with self.session.get(url, headers=self._headers(tenant)) as response:
                if response.status != 200:
                    raise DescriptionUnavailable(f"GET {url} answered {response.status}: {await _snippet(response)}")
                try:
                    body = await response.json(content_type=None)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    raise DescriptionUnavailable(f"GET {url}: the answer is not JSON") from None
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise DescriptionUnavailable(f"GET {url}: {_describe_exc(exc)}") from None
        return AgentDescription.from_json(agent, body)

    async def seed(self, conversation: str, agent: str, tenant: str, state: Mapping[str, Any]) -> None:
        url = f"{self.base_url}/v1/conversations/{conversation}/seed"
        try:
            async with self.session.post(
                url, json={"agent": agent, "state": dict(state)}, headers=self._headers(tenant)
            ) as response:
                if response.status in (200, 204):
                    return
                detail = await _snippet(response)
                code = _error_code(detail)
                if response.status == 403 and code == "seeding_disabled":
                    raise SeedRefused("the deployment has seeding disabled (seeding_disabled)")
                if response.status in (404, 405, 501):
                    raise SeedRefused(f"the deployment has no seed support (seed answered {response.status})")
                raise TransportError(f"POST {url} answered {response.status}: {detail}")
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise TransportError(f"POST {url}: {_describe_exc(exc)}") from None

    async def turn(self, conversation: str, agent: str, tenant: str, message: str) -> Turn:
        url = f"{self.base_url}/v1/responses"
        body = {"agent": agent, "conversation": conversation, "input": message, "stream": True}
        headers = {**self._headers(tenant), "Accept": "text/event-stream"}
        builder = _TurnBuilder(message)
        ttfb: float | None = None
        started = time.perf_counter()
        try:
            async with self.session.post(url, json=body, headers=headers) as response:
                if response.status != 200:
                    raise TransportError(f"POST {url} answered {response.status}: {await _snippet(response)}")
                if not response.content_type.startswith("text/event-stream"):
                    raise TransportError(f"POST {url}: expected text/event-stream, got {response.content_type}")
                async for event, data in iter_sse(response.content):
                    if ttfb is None:  # the first event of the stream: what a customer waits for first
                        ttfb = (time.perf_counter() - started) * 1000
                    builder.feed(event, sse_payload(url, event, data))
                    if builder.completed:
                        break
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise TransportError(f"POST {url}: {_describe_exc(exc)}") from None
        if not builder.completed:
            raise TransportError(f"POST {url}: the stream ended before response.completed (dropped mid-stream)")
        total = (time.perf_counter() - started) * 1000
        return replace(builder.build(), ttfb_ms=round(ttfb if ttfb is not None else total, 3),
                       latency_ms=round(total, 3))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


async def _snippet(response: aiohttp.ClientResponse) -> str:
    try:
        text = await response.text()
    except (aiohttp.ClientError, UnicodeDecodeError):
        return "(unreadable body)"
    return text[:300]


def _error_code(body: str) -> str | None:
    try:
        parsed = json.loads(body)
    except json.JSONDecodeError:
        return None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    return error.get("code") if isinstance(error, dict) else None


def _describe_exc(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


# --- in process ---------------------------------------------------------------------------------------------


@dataclass
class CallContext:
    """What an in-process agent is told about the conversation a message belongs to."""

    conversation: str
    agent: str
    tenant: str
    state: dict[str, Any] = field(default_factory=dict)
    history: list[Turn] = field(default_factory=list)


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class CallableTransport:
    """An agent in this process: a ``respond(message, ctx)`` function, or an object with ``respond``."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.respond = getattr(target, "respond", target)
        if not callable(self.respond):
            raise BadInputError(f"--agent-callable: {target!r} is neither callable nor has a respond method")
        self._contexts: dict[str, CallContext] = {}

    @classmethod
    def from_spec(cls, spec: str) -> CallableTransport:
        """``module:attr`` (``attr`` may be dotted) into a transport."""
        module_name, sep, attr = spec.partition(":")
        if not sep or not module_name or not attr:
            raise BadInputError(f"--agent-callable {spec!r}: expected MODULE:ATTR, e.g. my_agent:respond")
        try:
            target: Any = importlib.import_module(module_name)
        except ImportError as exc:
            raise BadInputError(f"--agent-callable {spec!r}: cannot import {module_name!r}: {exc}") from None
        for part in attr.split("."):
            if not hasattr(target, part):
                raise BadInputError(f"--agent-callable {spec!r}: {module_name!r} has no attribute {attr!r}")
            target = getattr(target, part)
        if inspect.isclass(target):
            target = target()
        return cls(target)

    def _context(self, conversation: str, agent: str, tenant: str) -> CallContext:
        return self._contexts.setdefault(conversation, CallContext(conversation, agent, tenant))

    async def describe(self, agent: str, tenant: str) -> AgentDescription:
        describe = getattr(self.target, "describe", None)
        if describe is None:
            raise DescriptionUnavailable("the in-process agent has no describe(agent) method")
        try:
            body = await _maybe_await(describe(agent))
        except Exception as exc:
            raise DescriptionUnavailable(f"describe({agent!r}) raised {type(exc).__name__}: {exc}") from None
        return AgentDescription.from_json(agent, body)

    async def seed(self, conversation: str, agent: str, tenant: str, state: Mapping[str, Any]) -> None:
        ctx = self._context(conversation, agent, tenant)
        if ctx.history:
            raise TransportError(f"conversation {conversation!r} already has messages; seed before turn 1")
        ctx.state = dict(state)
        seed = getattr(self.target, "seed", None)
        if seed is not None:
            try:
                await _maybe_await(seed(ctx, dict(state)))
            except Exception as exc:
                raise TransportError(f"seed raised {type(exc).__name__}: {exc}") from None

    async def turn(self, conversation: str, agent: str, tenant: str, message: str) -> Turn:
        ctx = self._context(conversation, agent, tenant)
        started = time.perf_counter()
        try:
            answer = await _maybe_await(self.respond(message, ctx))
        except Exception as exc:
            raise TransportError(f"the in-process agent raised {type(exc).__name__}: {exc}") from None
        # An in-process answer arrives whole: no first byte to time apart from the end.
        turn = replace(_turn_from_answer(message, answer), latency_ms=round((time.perf_counter() - started) * 1000, 3))
        ctx.history.append(turn)
        return turn

    async def close(self) -> None:
        self._contexts.clear()


def _turn_from_answer(message: str, answer: Any) -> Turn:
    if isinstance(answer, Turn):
        return answer
    if isinstance(answer, str):
        return Turn(user=message, reply=answer)
    if not isinstance(answer, Mapping) or not isinstance(answer.get("reply", ""), str):
        raise TransportError(f"the in-process agent returned {type(answer).__name__}; expected a str or a dict with "
                             "'reply', 'tool_calls' and 'ui'")
    calls = tuple(tool_call_from_dict(item, "tool_calls") for item in answer.get("tool_calls") or [])
    ui = tuple(ui_from_dict(item, "ui") for item in answer.get("ui") or [])
    return Turn(user=message, reply=answer.get("reply", ""),
                tool_calls=tuple(c for c in calls if c.name not in NOT_TOOL_CALLS), ui=ui)
