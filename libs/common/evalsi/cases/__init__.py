"""Agent cases: conversations replayed against an agent and graded deterministically (docs/cases.md).

- ``load_cases``: case YAML files and directories into ``Case`` (or ``BrokenCase``, reported, never dropped).
- ``Transcript`` / ``Turn`` / ``ToolCall`` / ``UIEvent``: what a replay produced; the graders' only input.
- ``grade`` and the ``check_*`` functions: the deterministic graders, pure, each a named ``Check``.
- ``HttpTransport`` (docs/agent-protocol.md) and ``CallableTransport`` (an agent in this process).
- ``CaseRunner`` / ``run_cases``: requires, seeding, replay, grading, a ``Report`` with a Wilson interval.
- ``PanelConfig`` / ``Panel`` (judging), ``load_baseline`` / ``compare`` (gate), ``perf_summary`` (perf) and
  ``compare_case`` (pairwise): rubric judges, the baseline gate, latency and the reference comparison.
- ``Simulator`` (persona cases played by a persona model) and ``trials_summary`` (pass@k / pass^k).
- ``evalsi.cases.store``: the case store (import a corpus all or nothing, export it byte for byte, a tenant's
  stored cases to run; another tenant's case reads as missing).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalsi._lazy import lazy_exports

if TYPE_CHECKING:
    from evalsi.cases.gate import Baseline, compare, load_baseline, write_baseline
    from evalsi.cases.graders import Check, count_questions, find_pii, grade
    from evalsi.cases.judging import Panel, PanelConfig, load_panel
    from evalsi.cases.loader import load_cases, load_file, load_text
    from evalsi.cases.model import BrokenCase, Case, CaseTurn, Expect, Policy, Requires
    from evalsi.cases.pairwise import compare_case
    from evalsi.cases.perf import perf_summary
    from evalsi.cases.report import exit_code, render_table
    from evalsi.cases.result import CaseResult
    from evalsi.cases.runner import CaseRunner, Report, Summary, fresh_conversation_id, run_cases
    from evalsi.cases.simulate import Simulator, simulated_conversation_id
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
    from evalsi.cases.trials import trials_summary

# Loaded on first use: the runner, gate, judging and transports pull scipy and aiohttp, while the case model,
# loader and store are what `evalsi cases --help` and the case store need.
__getattr__, __dir__ = lazy_exports(
    __name__,
    globals(),
    {
        ".gate": ("Baseline", "compare", "load_baseline", "write_baseline"),
        ".graders": ("Check", "count_questions", "find_pii", "grade"),
        ".judging": ("Panel", "PanelConfig", "load_panel"),
        ".loader": ("load_cases", "load_file", "load_text"),
        ".model": ("BrokenCase", "Case", "CaseTurn", "Expect", "Policy", "Requires"),
        ".pairwise": ("compare_case",),
        ".perf": ("perf_summary",),
        ".report": ("exit_code", "render_table"),
        ".result": ("CaseResult",),
        ".runner": ("CaseRunner", "Report", "Summary", "fresh_conversation_id", "run_cases"),
        ".simulate": ("Simulator", "simulated_conversation_id"),
        ".transcript": ("ToolCall", "Transcript", "Turn", "UIEvent"),
        ".transport": (
            "AgentDescription",
            "CallableTransport",
            "CallContext",
            "DescriptionUnavailable",
            "HttpTransport",
            "SeedRefused",
            "Transport",
            "TransportError",
        ),
        ".trials": ("trials_summary",),
    },
)

__all__ = [
    "AgentDescription",
    "Baseline",
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
    "Panel",
    "PanelConfig",
    "Policy",
    "Report",
    "Requires",
    "SeedRefused",
    "Simulator",
    "Summary",
    "ToolCall",
    "Transcript",
    "Transport",
    "TransportError",
    "Turn",
    "UIEvent",
    "compare",
    "compare_case",
    "count_questions",
    "exit_code",
    "find_pii",
    "fresh_conversation_id",
    "grade",
    "load_baseline",
    "load_cases",
    "load_file",
    "load_panel",
    "load_text",
    "perf_summary",
    "render_table",
    "run_cases",
    "simulated_conversation_id",
    "trials_summary",
    "write_baseline",
]
