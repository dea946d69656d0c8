"""What lives with the traces besides their spans: online scores from policies, and late signals (feedback).

Both trace stores (SQLite, ClickHouse) keep these rows under the same keys:
- an online score by (project, trace, policy, metric); a newer trace ``revision`` replaces an older one, so a late
  span that re-triggers evaluation updates the trace's scores instead of adding a second set;
- a feedback row by (project, feedback id); the id is the client's (a retry replaces) or a new uuid.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evalsi.errors import BadInputError
from evalsi.limits import check_finite

SCORED = "scored"
SKIPPED = "skipped"
ERROR = "error"
OUTCOMES = (SCORED, SKIPPED, ERROR)
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


@dataclass(frozen=True)
class OnlineScore:
    """One metric of one cascade stage of one policy on one trace revision."""

    trace_id: str
    revision: int
    policy: str
    stage: str  # the cascade stage's alias
    metric: str  # the alias, or alias.output for an evaluator with several outputs
    evaluator: str  # the evaluator ref, builtin/x@1.0.0
    outcome: str  # scored | skipped | error
    value: float | None = None  # the number, or 1.0 / 0.0 for pass/fail; None unless scored
    passed: bool | None = None  # pass/fail scores only
    label: str = ""
    reason: str = ""  # why skipped or failed ("no content: the trace has no output", ...)
    scored_at: float = 0.0  # unix seconds

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome {self.outcome!r}: one of {', '.join(OUTCOMES)}")


@dataclass(frozen=True)
class Feedback:
    """A late signal joined to a trace (or to every trace of a session): a rating, a label, a correction.

    ``value`` is a number (a thumbs-down is -1, a thumbs-up +1, a rating its score); ``negative`` is what the
    always-rule ``feedback.negative`` reads: set by the sender, or derived from ``value < 0``.
    """

    id: str
    trace_id: str  # "" when the signal names a session only
    session_id: str
    name: str  # "thumbs", "rating", "label", "resolved", ...
    value: float | None = None
    label: str = ""
    comment: str = ""
    source: str = ""  # who sent it: "user", "support", "reviewer:ana"
    negative: bool = False
    created_at: float = 0.0

    def check(self, where: str = "feedback") -> Feedback:
        if not self.trace_id and not self.session_id:
            raise BadInputError(f"{where}: a trace_id or a session_id is required to join the signal to traces")
        if self.trace_id and not re.fullmatch(r"[0-9a-f]{32}", self.trace_id):
            raise BadInputError(f"{where}.trace_id {self.trace_id!r}: 32 lowercase hex digits (an OTel trace id)")
        if not self.name:
            raise BadInputError(f"{where}.name: required (e.g. thumbs, rating, label)")
        if self.id and not _ID.match(self.id):
            raise BadInputError(f"{where}.id {self.id!r}: 1 to 128 letters, digits, '.', '_', ':' or '-'")
        if self.value is None and not self.label:
            raise BadInputError(f"{where}: a value (a number) or a label is required")
        if self.value is not None:  # NaN or Infinity would poison every aggregate over feedback
            check_finite(self.value, f"{where}.value")
        return self


# --- rows, in the column order both stores use ---------------------------------------------------------------

SCORE_COLUMNS = ("trace_id", "revision", "policy", "stage", "metric", "evaluator", "outcome", "value", "passed",
                 "label", "reason", "scored_at")
FEEDBACK_COLUMNS = ("id", "trace_id", "session_id", "name", "value", "label", "comment", "source", "negative",
                    "created_at")


def score_row(score: OnlineScore) -> tuple[object, ...]:
    passed = None if score.passed is None else int(score.passed)
    return (score.trace_id.lower(), score.revision, score.policy, score.stage, score.metric, score.evaluator,
            score.outcome, score.value, passed, score.label, score.reason, score.scored_at)


def score_from_row(row: Sequence[Any]) -> OnlineScore:
    trace_id, revision, policy, stage, metric, evaluator, outcome, value, passed, label, reason, at = row
    return OnlineScore(
        trace_id=str(trace_id), revision=int(revision), policy=str(policy), stage=str(stage), metric=str(metric),
        evaluator=str(evaluator), outcome=str(outcome), value=None if value is None else float(value),
        passed=None if passed is None else bool(passed), label=str(label), reason=str(reason), scored_at=float(at),
    )


def feedback_row(item: Feedback) -> tuple[object, ...]:
    return (item.id, item.trace_id.lower(), item.session_id, item.name, item.value, item.label, item.comment,
            item.source, int(item.negative), item.created_at)


def feedback_from_row(row: Sequence[Any]) -> Feedback:
    id_, trace_id, session_id, name, value, label, comment, source, negative, created_at = row
    return Feedback(
        id=str(id_), trace_id=str(trace_id), session_id=str(session_id), name=str(name),
        value=None if value is None else float(value), label=str(label), comment=str(comment), source=str(source),
        negative=bool(negative), created_at=float(created_at),
    )
