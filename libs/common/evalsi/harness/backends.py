"""Where a trial's exchanges come from: live (the model and the tools, recorded) or a cassette (replayed).

The loop talks to a ``Backend`` and never knows which: that is what makes a replay reproduce the Record of
the recorded trial. Every exchange comes back ``Timed`` (seconds from the trial's start), measured live and
read back on replay. The wall clock is the backend's too: live it is measured (and a stop for it recorded),
on replay a trial stops for it exactly where the recording did.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from .cassette import CASSETTE_VERSION, Cassette, CassetteMismatch, first_difference
from .models import ChatModel, ModelAnswer, ModelToolCall
from .tasks import Task
from .toolbox import ToolBox, ToolOutcome
from .tools import ToolResult, ToolSpec

T = TypeVar("T")


@dataclass(frozen=True)
class Timed(Generic[T]):
    value: T
    start_s: float
    duration_s: float


@dataclass(frozen=True)
class PlannedCall:
    """A tool call the model asked for, with its number among this trial's calls of the same tool."""

    call: ModelToolCall
    call_index: int


class WallClockExceeded(Exception):
    """The trial's wall-clock budget ran out during or before an exchange."""


class Backend(Protocol):
    tools: tuple[ToolSpec, ...]
    started_at: float  # Unix seconds

    @property
    def recording(self) -> Cassette | None:
        """What a live backend records; None on replay."""
        ...

    def wall_clock_exceeded(self, limit_s: float | None) -> bool: ...

    async def model(self, step: int, request: Mapping[str, Any]) -> Timed[ModelAnswer]: ...

    async def tools_step(self, step: int, calls: Sequence[PlannedCall]) -> list[Timed[ToolOutcome]]: ...

    def end(self, stop_reason: str, error: str | None) -> float:
        """Record the end; the trial's elapsed seconds."""
        ...


class LiveBackend:
    """The real model and tools; every exchange is also appended to ``recording``."""

    def __init__(self, model: ChatModel, toolbox: ToolBox, task: Task, *, trial: int, run_id: str,
                 wall_clock_s: float | None, parallel_tool_calls: bool = True) -> None:
        self._model = model
        self._toolbox = toolbox
        self._task = task
        self._trial = trial
        self._parallel = parallel_tool_calls
        self.tools = toolbox.specs
        self.started_at = time.time()
        self._t0 = time.monotonic()
        self._deadline = self._t0 + wall_clock_s if wall_clock_s is not None else None
        self.recording: Cassette = Cassette(header={
            "type": "header", "version": CASSETTE_VERSION, "task": task.to_dict(), "trial": trial,
            "run_id": run_id, "started_at": self.started_at, "tools": [spec.to_dict() for spec in self.tools],
            "model": {"provider": model.config.provider, "model": model.config.model},
        }, entries=[])

    def _now(self) -> float:
        return time.monotonic() - self._t0

    def wall_clock_exceeded(self, limit_s: float | None) -> bool:
        return limit_s is not None and self._now() >= limit_s

    async def _bounded(self, coroutine: Any) -> Any:
        if self._deadline is None:
            return await coroutine
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(loop.time() + (self._deadline - time.monotonic())):
                return await coroutine
        except TimeoutError:
            raise WallClockExceeded from None

    async def model(self, step: int, request: Mapping[str, Any]) -> Timed[ModelAnswer]:
        start = self._now()
        answer = await self._bounded(self._model.complete(request["messages"], tools=self.tools))
        timed = Timed(answer, start, self._now() - start)
        self.recording.entries.append({"type": "model", "step": step, "request": _plain(request),
                                      "answer": answer.to_dict(), "start_s": timed.start_s,
                                      "duration_s": timed.duration_s})
        return timed

    async def _one(self, planned: PlannedCall) -> Timed[ToolOutcome]:
        start = self._now()
        call = planned.call
        if call.arguments_error is not None:
            outcome = ToolOutcome(ToolResult(error=f"tool {call.name}: {call.arguments_error}"))
        else:
            outcome = await self._toolbox.call(call.name, call.arguments, call_index=planned.call_index,
                                               task_id=self._task.id, trial=self._trial)
        return Timed(outcome, start, self._now() - start)

    async def tools_step(self, step: int, calls: Sequence[PlannedCall]) -> list[Timed[ToolOutcome]]:
        if self._parallel:
            results = await self._bounded(asyncio.gather(*(self._one(c) for c in calls)))
        else:
            results = [await self._bounded(self._one(c)) for c in calls]
        for planned, timed in zip(calls, results, strict=True):
            self.recording.entries.append({
                "type": "tool", "step": step, "call_id": planned.call.id, "name": planned.call.name,
                "arguments": _plain(planned.call.arguments), "call_index": planned.call_index,
                "outcome": _plain({**timed.value.result.to_dict(), "mocked": timed.value.mocked,
                                   "fault": timed.value.fault}),
                "start_s": timed.start_s, "duration_s": timed.duration_s,
            })
        return results

    def end(self, stop_reason: str, error: str | None) -> float:
        elapsed = self._now()
        self.recording.entries.append({"type": "end", "stop_reason": stop_reason, "error": error,
                                      "elapsed_s": elapsed})
        return elapsed


class ReplayBackend:
    """A recorded trial played back: no model, no tool, the recorded answers and timings."""

    def __init__(self, cassette: Cassette) -> None:
        self._cassette = cassette
        self.recording: Cassette | None = None
        self._entries = list(cassette.entries)
        self._position = 0
        self.tools = tuple(ToolSpec.from_dict(spec) for spec in cassette.header["tools"])
        self.started_at = float(cassette.header["started_at"])

    def _peek(self) -> Mapping[str, Any] | None:
        return self._entries[self._position] if self._position < len(self._entries) else None

    def _take(self, kind: str, step: int) -> Mapping[str, Any]:
        entry = self._peek()
        if entry is None or entry["type"] != kind:
            found = "the end of the recording" if entry is None else f"a {entry['type']} entry"
            raise CassetteMismatch(f"{self._cassette.path}: step {step}: the replay wants a {kind} exchange, "
                                   f"the recording has {found} (the config or the harness changed since recording)")
        self._position += 1
        return entry

    def _stopped_for_wall_clock(self) -> bool:
        entry = self._peek()
        return entry is not None and entry["type"] == "end" and entry.get("stop_reason") == "budget_wall_clock"

    def wall_clock_exceeded(self, limit_s: float | None) -> bool:
        return self._stopped_for_wall_clock()

    async def model(self, step: int, request: Mapping[str, Any]) -> Timed[ModelAnswer]:
        if self._stopped_for_wall_clock():
            raise WallClockExceeded
        entry = self._take("model", step)
        difference = first_difference(entry["request"], _plain(request))
        if difference is not None:
            raise CassetteMismatch(f"{self._cassette.path}: step {step}: the model request differs from the "
                                   f"recorded one at {difference}")
        return Timed(ModelAnswer.from_dict(entry["answer"]), float(entry["start_s"]), float(entry["duration_s"]))

    async def tools_step(self, step: int, calls: Sequence[PlannedCall]) -> list[Timed[ToolOutcome]]:
        if self._stopped_for_wall_clock():
            raise WallClockExceeded
        out = []
        for planned in calls:
            entry = self._take("tool", step)
            now = {"call_id": planned.call.id, "name": planned.call.name, "arguments": planned.call.arguments}
            difference = first_difference({key: entry.get(key) for key in now}, _plain(now))
            if difference is not None:
                raise CassetteMismatch(f"{self._cassette.path}: step {step}: the tool call differs from the "
                                       f"recorded one at {difference}")
            outcome = entry["outcome"]
            out.append(Timed(ToolOutcome(ToolResult.from_dict(outcome), mocked=bool(outcome.get("mocked")),
                                         fault=outcome.get("fault")),
                             float(entry["start_s"]), float(entry["duration_s"])))
        return out

    def end(self, stop_reason: str, error: str | None) -> float:
        entry = self._peek()
        if entry is None or entry["type"] != "end":
            found = "nothing" if entry is None else f"a {entry['type']} entry"
            raise CassetteMismatch(f"{self._cassette.path}: the replay ended ({stop_reason}) where the recording "
                                   f"has {found}")
        if entry.get("stop_reason") != stop_reason:
            raise CassetteMismatch(f"{self._cassette.path}: the replay stopped for {stop_reason}, the recording "
                                   f"for {entry.get('stop_reason')}")
        return float(entry["elapsed_s"])


def _plain(value: Any) -> Any:
    """A deep copy as JSON would read it back (tuples as lists): the conversation keeps growing after an
    exchange is recorded, and a recording read from its file must compare like the one kept in memory."""
    return json.loads(json.dumps(value, ensure_ascii=False))
