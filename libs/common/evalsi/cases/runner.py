"""The embedded replay runner: requires, seed, turns in one fresh conversation, graders, a report.

Outcomes per case: ``pass``, ``fail`` (a deterministic check failed), ``judge_pending`` (every deterministic
check passed and a rubric waits for a judge: never a pass), ``skipped`` (with the reason), ``broken`` (the
case does not validate) and ``error`` (the transport failed: the agent's answer was never seen).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from evalsi.cases.graders import Check, grade
from evalsi.cases.model import BrokenCase, Case
from evalsi.cases.transcript import Transcript, Turn
from evalsi.cases.transport import (
    AgentDescription,
    DescriptionUnavailable,
    SeedRefused,
    Transport,
    TransportError,
)
from evalsi.stats import wilson

if TYPE_CHECKING:
    from evalsi.cases.judging import Panel

CaseStatus = Literal["pass", "fail", "judge_pending", "skipped", "broken", "error"]
CASE_STATUSES: tuple[str, ...] = ("pass", "fail", "judge_pending", "skipped", "broken", "error")
PERSONA_NOT_BUILT = "simulated users are not built yet"


@dataclass
class CaseResult:
    id: str | None
    agent: str | None
    where: str
    status: CaseStatus
    reason: str = ""
    tenant: str | None = None
    conversation: str | None = None
    checks: list[Check] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    pairwise: dict[str, Any] | None = None  # --pairwise against the case's reference: never part of pass/fail

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "agent": self.agent, "tenant": self.tenant, "where": self.where, "status": self.status,
            "reason": self.reason, "conversation": self.conversation,
            "checks": [check.to_dict() for check in self.checks],
            "transcript": Transcript(tuple(self.turns)).to_dict(),
            **({"pairwise": self.pairwise} if self.pairwise is not None else {}),
        }


@dataclass
class Summary:
    counts: dict[str, int]
    n: int  # pass + fail: what the pass rate is over
    pass_rate: float | None
    ci_low: float | None
    ci_high: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"cases": sum(self.counts.values()), **self.counts, "n": self.n, "pass_rate": self.pass_rate,
                "ci_low": self.ci_low, "ci_high": self.ci_high, "interval": "wilson 95%"}


@dataclass
class Report:
    results: list[CaseResult]
    notices: list[str]
    descriptions: dict[str, dict[str, Any] | None]
    panel: dict[str, Any] | None = None  # the judge panel that graded rubrics; None: none configured
    perf: dict[str, Any] | None = None  # --mode perf|both: TTFB and latency over the replayed turns
    gate: dict[str, Any] | None = None  # --baseline: the regressions against it
    pairwise: dict[str, Any] | None = None  # --pairwise: outcome counts, human-assisted references apart

    @property
    def summary(self) -> Summary:
        counts = {status: 0 for status in CASE_STATUSES}
        for result in self.results:
            counts[result.status] += 1
        n = counts["pass"] + counts["fail"]
        interval = wilson(counts["pass"], n)
        return Summary(counts, n, counts["pass"] / n if n else None,
                       interval[0] if interval else None, interval[1] if interval else None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "evalsi.cases.report/v1",
            "notices": self.notices,
            "agents": self.descriptions,
            "summary": self.summary.to_dict(),
            **{key: value for key, value in (("panel", self.panel), ("perf", self.perf), ("gate", self.gate),
                                                   ("pairwise", self.pairwise))
               if value is not None},
            "cases": [result.to_dict() for result in self.results],
        }


def fresh_conversation_id(case_id: str) -> str:
    """``eval-<case>-<8 hex>``: a rerun never continues an earlier run's conversation."""
    return f"eval-{case_id}-{secrets.token_hex(4)}"


def unmet_requirements(case: Case, description: AgentDescription) -> str | None:
    """Why the agent cannot run the case, or ``None``. An open tool allowlist meets every tool."""
    reasons = []
    if not description.tools_open:
        missing_tools = [tool for tool in case.requires.tools if tool not in description.tools]
        if missing_tools:
            reasons.append(f"agent {case.agent} lacks tool(s) {', '.join(missing_tools)}")
    missing_caps = [cap for cap in case.requires.capabilities if cap not in description.capabilities]
    if missing_caps:
        reasons.append(f"agent {case.agent} does not declare capability(ies) {', '.join(missing_caps)}")
    return "; ".join(reasons) or None


class CaseRunner:
    """Runs cases through one transport, reading each (agent, tenant)'s description once."""

    def __init__(
        self, transport: Transport, *, conversation_id: Callable[[str], str] = fresh_conversation_id,
        panel: Panel | None = None, call_judges: bool = True, pairwise: bool = False,
    ):
        """``panel`` grades rubrics (None: they read judge_pending); ``call_judges=False`` is ``--mode perf``."""
        self.transport = transport
        self.conversation_id = conversation_id
        self.panel = panel
        self.call_judges = call_judges
        self.pairwise = pairwise
        self._descriptions: dict[tuple[str, str], AgentDescription | None] = {}
        self.notices: list[str] = []

    async def _description(self, agent: str, tenant: str) -> AgentDescription | None:
        key = (agent, tenant)
        if key not in self._descriptions:
            try:
                self._descriptions[key] = await self.transport.describe(agent, tenant)
            except DescriptionUnavailable as exc:
                self._descriptions[key] = None
                self.notices.append(
                    f"could not read agent {agent}'s description ({exc}); its cases run with requires unchecked"
                )
        return self._descriptions[key]

    async def run(self, items: Sequence[Case | BrokenCase], *, agent: str | None = None) -> Report:
        results = []
        for item in items:
            if agent is not None and item.agent is not None and item.agent != agent:
                continue
            results.append(await self.run_one(item))
        descriptions = {
            f"{name}@{tenant}" if tenant != "platform" else name: (d.to_dict() if d else None)
            for (name, tenant), d in self._descriptions.items()
        }
        panel = self.panel.config.to_dict() if self.panel is not None and self.call_judges else None
        report = Report(results, list(self.notices), descriptions, panel=panel)
        if self.pairwise:
            from evalsi.cases.pairwise import pairwise_summary

            report.pairwise = pairwise_summary(results)
        return report

    async def run_one(self, item: Case | BrokenCase) -> CaseResult:
        if isinstance(item, BrokenCase):
            return CaseResult(item.id, item.agent, item.where, "broken", item.error)
        case = item
        result = CaseResult(case.id, case.agent, case.where, "skipped", tenant=case.tenant)
        if case.persona is not None:
            result.reason = PERSONA_NOT_BUILT
            return result
        description = await self._description(case.agent, case.tenant)
        if description is not None and case.requires:
            unmet = unmet_requirements(case, description)
            if unmet:
                result.reason = unmet
                return result
        result.conversation = self.conversation_id(case.id)
        try:
            if case.state:
                try:
                    await self.transport.seed(result.conversation, case.agent, case.tenant, case.state)
                except SeedRefused as exc:
                    result.reason = f"seed refused: {exc}"
                    return result
            for scripted in case.turns:
                result.turns.append(
                    await self.transport.turn(result.conversation, case.agent, case.tenant, scripted.user)
                )
        except TransportError as exc:
            result.status, result.reason = "error", f"transport: {exc}"
            return result
        try:
            result.checks = grade(case, Transcript(tuple(result.turns)))
        except Exception as exc:  # a crash in a grader is our bug: an error, never the agent's failure
            result.status, result.reason = "error", f"grader crashed: {type(exc).__name__}: {exc}"
            return result
        if case.expect.rubric is not None:
            result.checks[-1] = await self._rubric(case, Transcript(tuple(result.turns)))
        if self.pairwise and case.reference is not None and self.panel is not None and self.panel.clients:
            from evalsi.cases.pairwise import compare_case

            result.pairwise = await compare_case(self.panel.clients, result, case.reference)
        failed = [check.name for check in result.checks if check.status == "fail"]
        errored = [check for check in result.checks if check.status == "error"]
        pending = [check for check in result.checks if check.status == "judge_pending"]
        if failed:
            result.status, result.reason = "fail", f"failed: {', '.join(failed)}"
        elif errored:  # a judge that could not answer: the measurement was not taken
            result.status, result.reason = "error", errored[0].reason
        elif pending:
            result.status, result.reason = "judge_pending", f"the rubric needs a judge: {pending[0].reason}"
        else:
            result.status, result.reason = "pass", f"{len(result.checks)} check(s) passed"
        return result


    async def _rubric(self, case: Case, transcript: Transcript) -> Check:
        """The rubric check (always the last one ``grade`` returns): the panel's verdict, or judge_pending."""
        if not self.call_judges:
            return Check("rubric", "judge_pending", "--mode perf does not call judges")
        if self.panel is None or not self.panel.clients:
            return Check("rubric", "judge_pending", "no judge is configured")
        try:
            return await self.panel.grade(case, transcript)
        except Exception as exc:  # our bug, not the agent's failure
            return Check("rubric", "error", f"judging crashed: {type(exc).__name__}: {exc}")


async def run_cases(
    items: Sequence[Case | BrokenCase], transport: Transport, *, agent: str | None = None,
    conversation_id: Callable[[str], str] = fresh_conversation_id, panel: Panel | None = None,
    call_judges: bool = True, pairwise: bool = False,
) -> Report:
    """Run ``items`` through ``transport`` and close it."""
    try:
        runner = CaseRunner(transport, conversation_id=conversation_id, panel=panel, call_judges=call_judges,
                            pairwise=pairwise)
        return await runner.run(items, agent=agent)
    finally:
        await transport.close()
