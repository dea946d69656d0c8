"""The transcript of one replayed conversation: what every grader reads, defined once.

A transport (HTTP/SSE or an in-process callable) produces it; graders are pure functions over it.
``ToolCall.end`` is ``None`` when the transport does not report how a call ended, so a check that needs
completion statuses (``blocked_gates``, ``tool_error``) can say so instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

ToolEnd = Literal["ok", "error", "blocked"]
TOOL_ENDS: tuple[str, ...] = ("ok", "error", "blocked")

# Loading a skill or knowledge is the agent reading its own instructions, not acting: never a tool call.
NOT_TOOL_CALLS: frozenset[str] = frozenset({"load_skill", "load_knowledge"})


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a turn: its name, arguments and how it ended (``None``: not reported)."""

    name: str
    arguments: Any = None
    end: ToolEnd | None = None
    gate: str | None = None  # the gate that held a blocked call
    error: str | None = None  # what an errored call said
    id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "arguments": self.arguments, "end": self.end}
        if self.gate is not None:
            out["gate"] = self.gate
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass(frozen=True)
class UIEvent:
    """A presentation frame the turn showed: its component and how many items (cards) it carried."""

    component: str
    items: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"component": self.component, "items": self.items}


@dataclass(frozen=True)
class Turn:
    """One replayed turn: the user's message, the published reply, the calls made and the UI shown."""

    user: str
    reply: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    ui: tuple[UIEvent, ...] = ()
    # Measured by the transport (``--mode perf``): time to the first byte of the answer and to its end, in ms.
    ttfb_ms: float | None = field(default=None, compare=False)
    latency_ms: float | None = field(default=None, compare=False)

    @property
    def tool_names(self) -> list[str]:
        return [call.name for call in self.tool_calls]

    def to_dict(self) -> dict[str, Any]:
        return {
            "user": self.user,
            "reply": self.reply,
            "tool_calls": [call.to_dict() for call in self.tool_calls],
            "ui": [event.to_dict() for event in self.ui],
            **({"ttfb_ms": self.ttfb_ms, "latency_ms": self.latency_ms} if self.latency_ms is not None else {}),
        }


@dataclass(frozen=True)
class Transcript:
    """The turns of one conversation, in order; assertions read the last one unless they say otherwise."""

    turns: tuple[Turn, ...] = field(default_factory=tuple)

    @property
    def last(self) -> Turn:
        if not self.turns:
            raise ValueError("an empty transcript has no last turn")
        return self.turns[-1]

    def to_dict(self) -> dict[str, Any]:
        return {"turns": [turn.to_dict() for turn in self.turns]}
