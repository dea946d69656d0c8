"""What an evaluator gets besides its record: its judge, and where it runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evalsi.errors import SkipRecord
from evalsi.projects import DEFAULT_PROJECT

if TYPE_CHECKING:
    from evalsi.judges import JudgeClient
    from evalsi.sandbox.access import SandboxAccess

JUDGE_PENDING = "judge_pending"


@dataclass(frozen=True)
class EvalContext:
    """Handed to evaluators that declare a ``ctx`` parameter.

    ``judge`` is the judge chosen for this evaluator (by name, ``default`` otherwise), or None when
    no judge is configured: model-graded evaluators then skip with ``judge_pending``, never pass.
    """

    judge: JudgeClient | None = None
    judges: dict[str, JudgeClient] = field(default_factory=dict)
    project: str = DEFAULT_PROJECT
    extras: dict[str, Any] = field(default_factory=dict)
    # Where code evaluators (pool ``sandbox``) execute programs: the run's spec.sandbox and a way to open sessions.
    sandbox: SandboxAccess | None = None

    def require_judge(self) -> JudgeClient:
        if self.judge is None:
            raise SkipRecord(f"{JUDGE_PENDING}: no judge configured (pass --judge-model or judge=...)")
        return self.judge
