"""One case's result: its status, checks and transcript; what reports, gates, trials and pairwise read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from evalsi.cases.graders import Check
from evalsi.cases.transcript import Transcript, Turn

CaseStatus = Literal["pass", "fail", "judge_pending", "skipped", "broken", "error"]


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
    trial: int | None = None  # --trials N: which of the N fresh conversations (1-based); None: a single run
    simulated: bool = False  # a persona model generated the customer's turns (evalsi cases simulate)
    stop: dict[str, Any] | None = None  # simulated: why the conversation ended (goal_met, gave_up, max_turns)

    def to_dict(self) -> dict[str, Any]:
        transcript = Transcript(tuple(self.turns), simulated=self.simulated).to_dict()
        return {
            "id": self.id, "agent": self.agent, "tenant": self.tenant, "where": self.where, "status": self.status,
            "reason": self.reason, "conversation": self.conversation,
            **({"trial": self.trial} if self.trial is not None else {}),
            **({"simulated": True, "stop": self.stop} if self.simulated else {}),
            "checks": [check.to_dict() for check in self.checks],
            "transcript": transcript,
            **({"pairwise": self.pairwise} if self.pairwise is not None else {}),
        }
