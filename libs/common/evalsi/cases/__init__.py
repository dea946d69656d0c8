"""Agent cases: conversations replayed against an agent and graded deterministically (docs/cases.md).

- ``load_cases``: case YAML files and directories into ``Case`` (or ``BrokenCase``, reported, never dropped).
- ``Transcript`` / ``Turn`` / ``ToolCall`` / ``UIEvent``: what a replay produced; the graders' only input.
- ``grade`` and the ``check_*`` functions: the deterministic graders, pure, each a named ``Check``.
- ``HttpTransport`` (docs/agent-protocol.md) and ``CallableTransport`` (an agent in this process).
- ``CaseRunner`` / ``run_cases``: requires, seeding, replay, grading, a ``Report`` with a Wilson interval.
"""

from evalsi.cases.graders import Check, count_questions, find_pii, grade
from evalsi.cases.loader import load_cases, load_file
from evalsi.cases.model import BrokenCase, Case, CaseTurn, Expect, Policy, Requires
from evalsi.cases.report import exit_code, render_table
from evalsi.cases.runner import CaseResult, CaseRunner, Report, Summary, fresh_conversation_id, run_cases
from evalsi.cases.transcript import ToolCall, Transcript, Turn, UIEvent
from evalsi.cases.transport import (
    AgentDescription,
    CallableTransport,
    CallContext,
    DescriptionUnavailable,
    HttpTransport,
    SeedRefused,
    Transport,
    TransportError,
)

__all__ = [
    "AgentDescription",
    "BrokenCase",
    "CallContext",
    "CallableTransport",
    "Case",
    "CaseResult",
    "CaseRunner",
    "CaseTurn",
    "Check",
    "DescriptionUnavailable",
    "Expect",
    "HttpTransport",
    "Policy",
    "Report",
    "Requires",
    "SeedRefused",
    "Summary",
    "ToolCall",
    "Transcript",
    "Transport",
    "TransportError",
    "Turn",
    "UIEvent",
    "count_questions",
    "exit_code",
    "find_pii",
    "fresh_conversation_id",
    "grade",
    "load_cases",
    "load_file",
    "render_table",
    "run_cases",
]
