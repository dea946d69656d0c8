"""A case, as the loader hands it to the runner: validated, typed, and traceable to its file and line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evalsi.patterns import Pattern

POLICIES: tuple[str, ...] = ("ask_once", "investigate_first", "act_fast")
DETECTORS: tuple[str, ...] = ("pii_leak", "tool_error", "phantom_action")
STATE_KEYS: tuple[str, ...] = ("evidence", "memory", "history", "briefing")
DEFAULT_TENANT = "platform"


@dataclass(frozen=True)
class Policy:
    """How much the agent should ask before acting; ``max`` is ``ask_once``'s question ceiling per reply."""

    name: str
    max: int = 1


@dataclass(frozen=True)
class Expect:
    """The assertions of a case. ``None`` (or empty) means the check is not declared and does not run."""

    tools_called: tuple[str, ...] | None = None
    never_calls: tuple[str, ...] | None = None
    calls_one_of: tuple[str, ...] | None = None
    first_tool: str | None = None
    max_tool_calls: int | None = None
    reply_includes: tuple[str, ...] | None = None
    reply_omits: tuple[str, ...] | None = None
    blocked_gates: tuple[tuple[str, str], ...] | None = None
    ui_components: tuple[str, ...] | None = None
    no_ui: bool = False
    must_not: tuple[str, ...] | None = None
    claims: dict[str, Pattern] = field(default_factory=dict)
    policy: Policy | None = None
    rubric: str | None = None
    min_score: float = 0.7


@dataclass(frozen=True)
class CaseTurn:
    """A scripted user message, and optionally the calls that specific turn must make."""

    user: str
    tools_called: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Requires:
    tools: tuple[str, ...] = ()
    capabilities: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.tools or self.capabilities)


@dataclass(frozen=True)
class Case:
    """One validated case. Exactly one of ``turns`` (a replay) and ``persona`` (a simulated user) is set."""

    id: str
    agent: str
    file: str
    line: int
    tenant: str = DEFAULT_TENANT
    turns: tuple[CaseTurn, ...] = ()
    state: dict[str, Any] = field(default_factory=dict)
    requires: Requires = field(default_factory=Requires)
    persona: dict[str, Any] | None = None
    expect: Expect = field(default_factory=Expect)
    reference: dict[str, Any] | None = None

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class BrokenCase:
    """A case file (or document) that does not validate: reported as ``broken``, never dropped."""

    file: str
    line: int
    error: str
    id: str | None = None
    agent: str | None = None

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"
