"""The built-in reference agent (evalsi-harness) as a case target: ``evalsi cases run --agent-harness FILE``.

Each conversation is the harness's loop continued turn by turn: a turn is one trial whose task is the user's
message and whose history is the conversation so far (tool calls and results included). Its tool calls and
their ends come from the trial's trajectory. The description lists the harness's tools (a closed allowlist).
A seeded ``history`` becomes earlier messages; the other state keys (``evidence``, ``memory``, ``briefing``)
are given to the model as a system message, since the harness has no store of its own. An infrastructure
error (provider down after retries, a tool server gone) is a transport failure, the case an ``error``;
a trial that ran out of budget is an answer (possibly empty), graded like any other.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalsi.cases.transcript import NOT_TOOL_CALLS, ToolCall, Turn
from evalsi.cases.transport import AgentDescription, TransportError
from evalsi.harness import Harness, HarnessConfig, Task, load_config
from evalsi.harness.tools import Tool
from evalsi.records import from_value
from evalsi.v1alpha1.record_pb2 import STEP_TYPE_TOOL, TOOL_CALL_STATUS_ERROR, Record


class HarnessTransport:
    def __init__(self, config: HarnessConfig) -> None:
        self.config = config
        self._stack = contextlib.AsyncExitStack()
        self._harness: Harness | None = None
        self._history: dict[str, list[dict[str, Any]]] = {}
        self._turns: dict[str, int] = {}

    @classmethod
    def from_file(cls, path: str | Path) -> HarnessTransport:
        return cls(load_config(path))

    async def _open(self) -> Harness:
        # Opened on first use, inside the runner's event loop: MCP servers and HTTP sessions belong to it.
        if self._harness is None:
            self._harness = await self._stack.enter_async_context(Harness.open(self.config))
        return self._harness

    async def describe(self, agent: str, tenant: str) -> AgentDescription:
        harness = await self._open()
        return AgentDescription(id=agent, tools=frozenset(spec.name for spec in harness.toolbox.specs))

    async def seed(self, conversation: str, agent: str, tenant: str, state: Mapping[str, Any]) -> None:
        if self._history.get(conversation):
            raise TransportError(f"conversation {conversation!r} already has messages; seed before turn 1")
        history: list[dict[str, Any]] = []
        context = {key: value for key, value in state.items() if key != "history"}
        if context:
            history.append({"role": "system", "content": "What is known about this conversation: "
                            + json.dumps(context, ensure_ascii=False)})
        history += [{"role": m["role"], "content": m["content"]} for m in state.get("history") or ()]
        self._history[conversation] = history

    async def turn(self, conversation: str, agent: str, tenant: str, message: str) -> Turn:
        harness = await self._open()
        history = self._history.setdefault(conversation, [])
        number = self._turns[conversation] = self._turns.get(conversation, 0) + 1
        result = await harness.run(Task(id=f"{conversation}-turn-{number}", input=message), run_id=conversation,
                                   history=history, tools=self.conversation_tools(conversation))
        if result.infra_error:
            raise TransportError(f"evalsi-harness: {result.error}")
        # The system prompt is the harness's own; the rest is the conversation the next turn continues.
        skip = 1 if self.config.system else 0
        self._history[conversation] = [dict(m) for m in result.messages[skip:]]
        return Turn(user=message, reply=result.record.output.text, tool_calls=_calls(result.record),
                    latency_ms=round(result.record.usage.latency.ToNanoseconds() / 1e6, 3))

    def conversation_tools(self, conversation: str) -> Mapping[str, Tool] | None:
        """Tools of this conversation's own besides the harness's (a tau2 task's toolkit): none here."""
        return None

    async def close(self) -> None:
        self._history.clear()
        self._turns.clear()
        self._harness = None
        await self._stack.aclose()


def _calls(record: Record) -> tuple[ToolCall, ...]:
    calls = []
    for step in record.trajectory.steps:
        if step.type != STEP_TYPE_TOOL or step.name in NOT_TOOL_CALLS:
            continue
        call = step.tool_call
        failed = call.status == TOOL_CALL_STATUS_ERROR
        calls.append(ToolCall(name=call.name, arguments=from_value(call.arguments), end="error" if failed else "ok",
                              error=call.error if failed else None, id=call.id))
    return tuple(calls)
