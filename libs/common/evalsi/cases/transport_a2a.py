"""A transport to an A2A agent: JSON-RPC 2.0 over HTTP, polled (docs/agent-protocol.md, "A2A").

The description is the agent card (``GET {base}/.well-known/agent.json``): its skills' ids are the agent's
capabilities; a card lists no tools, so the tool allowlist reads as open. A turn is ``message/send`` with the
conversation's ``contextId`` (and the open task's ``taskId`` when the last turn ended ``input-required``); a
task that is not yet in a final state is polled with ``tasks/get`` until it is, bounded by the turn timeout.
A timeout, a failed, canceled or rejected task, a JSON-RPC error or a malformed answer is a ``TransportError``:
the case is an error, never a failure. Text parts are the reply; ``data`` parts may carry tool calls and UI.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from evalsi.cases.transcript import NOT_TOOL_CALLS, ToolCall, Turn, UIEvent
from evalsi.cases.transport import (
    AgentDescription,
    DescriptionUnavailable,
    SeedRefused,
    TransportError,
    _describe_exc,
    _snippet,
    tool_call_from_dict,
    ui_from_dict,
)
from evalsi.errors import BadInputError

TURN_ENDS = ("completed", "input-required")  # the agent answered: the turn is over
TASK_FAILED = ("failed", "canceled", "rejected", "auth-required")  # the turn could not be finished
TASK_RUNNING = ("submitted", "working")
CARD_PATH = "/.well-known/agent.json"


@dataclass
class _Conversation:
    context_id: str | None = None
    open_task: str | None = None  # the task waiting for input (input-required): the next message continues it
    seen_messages: set[str] = field(default_factory=set)
    seen_artifacts: set[str] = field(default_factory=set)


class A2ATransport:
    """The A2A JSON-RPC client (aiohttp). ``base_url`` is the JSON-RPC endpoint; the card is read below it."""

    def __init__(self, base_url: str, *, token: str | None = None, timeout: float = 120.0,
                 poll_interval: float = 0.25, max_poll_interval: float = 2.0) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise BadInputError(f"--agent-url {base_url!r}: expected an http:// or https:// URL")
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.poll_interval = poll_interval
        self.max_poll_interval = max_poll_interval
        self._session: aiohttp.ClientSession | None = None
        self._ids = itertools.count(1)
        self._conversations: dict[tuple[str, str], _Conversation] = {}

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        return self._session

    def _headers(self, tenant: str) -> dict[str, str]:
        headers = {"x-evalsi-tenant": tenant}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    # --- description -----------------------------------------------------------------------------------------

    async def describe(self, agent: str, tenant: str) -> AgentDescription:
        url = f"{self.base_url}{CARD_PATH}"
        try:
            async with self.session.get(url, headers=self._headers(tenant)) as response:
                if response.status != 200:
                    raise DescriptionUnavailable(f"GET {url} answered {response.status}: {await _snippet(response)}")
                try:
                    card = await response.json(content_type=None)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    raise DescriptionUnavailable(f"GET {url}: the agent card is not JSON") from None
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise DescriptionUnavailable(f"GET {url}: {_describe_exc(exc)}") from None
        return description_from_card(agent, card)

    async def seed(self, conversation: str, agent: str, tenant: str, state: Mapping[str, Any]) -> None:
        raise SeedRefused("an A2A agent has no seed support")

    # --- a turn --------------------------------------------------------------------------------------------

    async def _rpc(self, method: str, params: Mapping[str, Any], tenant: str, deadline: float) -> Any:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        request_id = next(self._ids)
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": dict(params)}
        where = f"{method} at {self.base_url}"
        try:
            async with self.session.post(self.base_url, json=body, headers=self._headers(tenant),
                                         timeout=aiohttp.ClientTimeout(total=remaining)) as response:
                if response.status != 200:
                    raise TransportError(f"{where} answered {response.status}: {await _snippet(response)}")
                try:
                    document = await response.json(content_type=None)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    raise TransportError(f"{where}: the answer is not JSON") from None
        except TimeoutError:
            raise  # the turn's deadline: the caller says so, and cancels the task
        except aiohttp.ClientError as exc:
            raise TransportError(f"{where}: {_describe_exc(exc)}") from None
        if not isinstance(document, Mapping) or document.get("jsonrpc") != "2.0":
            raise TransportError(f"{where}: not a JSON-RPC 2.0 response")
        if document.get("error") is not None:
            error = document["error"]
            detail = (f"{error.get('code')}: {error.get('message')}" if isinstance(error, Mapping) else str(error))
            raise TransportError(f"{where}: JSON-RPC error {detail}")
        if document.get("id") != request_id:
            raise TransportError(f"{where}: the response id {document.get('id')!r} is not the request's")
        if not isinstance(document.get("result"), Mapping):
            raise TransportError(f"{where}: the response has no result object")
        return document["result"]

    async def turn(self, conversation: str, agent: str, tenant: str, message: str) -> Turn:
        state = self._conversations.setdefault((tenant, conversation), _Conversation())
        started = time.perf_counter()
        deadline = time.monotonic() + self.timeout
        outgoing: dict[str, Any] = {
            "kind": "message", "role": "user", "messageId": uuid.uuid4().hex,
            "parts": [{"kind": "text", "text": message}], "contextId": state.context_id or conversation,
        }
        if state.open_task:
            outgoing["taskId"] = state.open_task
        params = {
            "message": outgoing,
            "configuration": {"blocking": False, "acceptedOutputModes": ["text/plain", "application/json"]},
            "metadata": {"evalsi": {"agent": agent, "tenant": tenant, "conversation": conversation}},
        }
        task_id: str | None = None
        try:
            result = await self._rpc("message/send", params, tenant, deadline)
            ttfb = (time.perf_counter() - started) * 1000
            interval = self.poll_interval
            while True:
                if _kind(result) == "message":
                    turn = fold_message(message, result, state)
                    state.context_id = _str(result.get("contextId")) or state.context_id
                    state.open_task = None
                    break
                task_id, status = _task(result)
                state.context_id = _str(result.get("contextId")) or state.context_id
                if status in TURN_ENDS:
                    turn = fold_task(message, result, state)
                    state.open_task = task_id if status == "input-required" else None
                    break
                if status in TASK_FAILED:
                    state.open_task = None
                    detail = _status_text(result) or "no detail"
                    raise TransportError(f"the A2A task {task_id} ended {status}: {detail}")
                if status not in TASK_RUNNING:
                    raise TransportError(f"the A2A task {task_id}: unknown state {status!r}")
                await asyncio.sleep(min(interval, max(deadline - time.monotonic(), 0)))
                interval = min(interval * 1.5, self.max_poll_interval)
                result = await self._rpc("tasks/get", {"id": task_id}, tenant, deadline)
        except TimeoutError:
            state.open_task = None
            if task_id is not None:
                await self._cancel(task_id, tenant)
            raise TransportError(f"the A2A agent reached no final state within {self.timeout:g}s (--timeout)"
                                 + (f"; task {task_id} canceled" if task_id else "")) from None
        total = (time.perf_counter() - started) * 1000
        return Turn(user=turn.user, reply=turn.reply, tool_calls=turn.tool_calls, ui=turn.ui,
                    ttfb_ms=round(ttfb, 3), latency_ms=round(total, 3))

    async def _cancel(self, task_id: str, tenant: str) -> None:
        """Best effort: a task the runner gave up on is asked to stop; its answer does not matter."""
        with contextlib.suppress(Exception):
            await self._rpc("tasks/cancel", {"id": task_id}, tenant, time.monotonic() + 2.0)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        self._conversations.clear()


# --- reading A2A objects ---------------------------------------------------------------------------------


def description_from_card(agent: str, card: Any) -> AgentDescription:
    """The agent card as a description: skill ids are capabilities; the tool allowlist is open (unknown)."""
    if not isinstance(card, Mapping):
        raise DescriptionUnavailable("the agent card is not a JSON object")
    skills = card.get("skills", [])
    if not isinstance(skills, list):
        raise DescriptionUnavailable("the agent card's skills is not a list")
    capabilities = []
    for skill in skills:
        skill_id = skill.get("id") if isinstance(skill, Mapping) else None
        if not isinstance(skill_id, str):
            raise DescriptionUnavailable(f"the agent card has a skill without a string id: {skill!r}")
        capabilities.append(skill_id)
    return AgentDescription(id=agent, tools_open=True, capabilities=frozenset(capabilities))


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _kind(result: Mapping[str, Any]) -> str:
    kind = result.get("kind")
    if isinstance(kind, str):
        return kind
    return "task" if "status" in result else "message" if "parts" in result else ""


def _task(result: Mapping[str, Any]) -> tuple[str, str]:
    if _kind(result) != "task":
        raise TransportError(f"expected an A2A Task or Message, got {json.dumps(result)[:200]}")
    task_id, status = _str(result.get("id")), result.get("status")
    if task_id is None or not isinstance(status, Mapping) or not isinstance(status.get("state"), str):
        raise TransportError(f"a malformed A2A Task (needs an id and a status.state): {json.dumps(result)[:200]}")
    return task_id, status["state"]


def _parts(holder: Mapping[str, Any], where: str) -> list[Mapping[str, Any]]:
    parts = holder.get("parts", [])
    if not isinstance(parts, list) or not all(isinstance(part, Mapping) for part in parts):
        raise TransportError(f"{where}: 'parts' is not a list of objects")
    return parts


def _part_kind(part: Mapping[str, Any]) -> str | None:
    kind = part.get("kind", part.get("type"))
    return kind if isinstance(kind, str) else None


def _texts(parts: list[Mapping[str, Any]]) -> list[str]:
    return [str(part.get("text", "")) for part in parts if _part_kind(part) == "text"]


def _status_text(task: Mapping[str, Any]) -> str:
    status = task.get("status")
    message = status.get("message") if isinstance(status, Mapping) else None
    if not isinstance(message, Mapping):
        return ""
    return "\n".join(_texts(_parts(message, "status.message")))


class _Fold:
    """Tool calls and UI from ``data`` parts; a later part with the same ``call_id`` updates the call's end."""

    def __init__(self) -> None:
        self.calls: dict[str, ToolCall] = {}
        self.ui: list[UIEvent] = []

    def data(self, data: Any, where: str) -> None:
        if not isinstance(data, Mapping):
            return
        if data.get("type") == "tool_call":
            call = tool_call_from_dict(data, where)
            key = call.id or f"#{len(self.calls)}"
            earlier = self.calls.get(key)
            if earlier is not None:
                call = ToolCall(earlier.name, call.arguments if call.arguments is not None else earlier.arguments,
                                call.end, call.gate, call.error, call.id)
            self.calls[key] = call
        elif data.get("type") == "ui":
            self.ui.append(ui_from_dict(data, where))

    def parts(self, parts: list[Mapping[str, Any]], where: str) -> None:
        for part in parts:
            if _part_kind(part) == "data":
                self.data(part.get("data"), where)

    def turn(self, message: str, reply: str) -> Turn:
        calls = tuple(call for call in self.calls.values() if call.name not in NOT_TOOL_CALLS)
        return Turn(user=message, reply=reply, tool_calls=calls, ui=tuple(self.ui))


def fold_message(message: str, answer: Mapping[str, Any], state: _Conversation) -> Turn:
    """A direct Message answer: its text parts are the reply, its data parts the calls and UI."""
    parts = _parts(answer, "message")
    fold = _Fold()
    fold.parts(parts, "message data part")
    if _str(answer.get("messageId")):
        state.seen_messages.add(answer["messageId"])
    return fold.turn(message, "\n".join(_texts(parts)))


def fold_task(message: str, task: Mapping[str, Any], state: _Conversation) -> Turn:
    """A task in a final state: the new agent messages and artifacts of this turn, in order.

    Calls and UI come from the ``data`` parts of the agent's messages (``history``, then ``status.message``)
    and artifacts; the reply is the text of the new artifacts, or of ``status.message`` when they have none.
    """
    history = task.get("history") or []
    if not isinstance(history, list):
        raise TransportError("the A2A task's history is not a list")
    status_message = task["status"].get("message")
    messages = [m for m in history if isinstance(m, Mapping) and m.get("role") == "agent"]
    if isinstance(status_message, Mapping):
        messages.append(status_message)
    fold = _Fold()
    turn_seen: set[str] = set()
    status_new = False
    for index, agent_message in enumerate(messages):
        message_id = _str(agent_message.get("messageId")) or f"#{index}"
        if message_id in state.seen_messages or message_id in turn_seen:
            continue
        turn_seen.add(message_id)
        status_new = status_new or agent_message is status_message
        fold.parts(_parts(agent_message, "agent message"), "agent message data part")
    artifacts = task.get("artifacts") or []
    if not isinstance(artifacts, list) or not all(isinstance(a, Mapping) for a in artifacts):
        raise TransportError("the A2A task's artifacts is not a list of objects")
    texts: list[str] = []
    for index, artifact in enumerate(artifacts):
        artifact_id = f"{task.get('id')}/{_str(artifact.get('artifactId')) or index}"  # ids are per task
        if artifact_id in state.seen_artifacts:
            continue
        state.seen_artifacts.add(artifact_id)
        parts = _parts(artifact, "artifact")
        fold.parts(parts, "artifact data part")
        texts.extend(_texts(parts))
    state.seen_messages.update(m for m in turn_seen if not m.startswith("#"))
    if not texts and status_new and isinstance(status_message, Mapping):
        texts = _texts(_parts(status_message, "status.message"))
    return fold.turn(message, "\n".join(text for text in texts if text))
