"""What a run's errors say to a reader: errors by kind with their first cause, the metrics that measured nothing
because every evaluation of them failed on infrastructure (which the CLI turns into exit 1 unless
``--allow-errors``), and why an evaluator that skipped everything did.

Pure functions over the summaries (``MetricSummary.error_kinds``), so an embedded run, a served one and a saved
result read the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from evalsi.v1alpha1.score_pb2 import (
    ERROR_KIND_EVALUATOR,
    ERROR_KIND_INFRA,
    OUTCOME_SKIPPED,
    EvaluationResult,
    MetricSummary,
)

ALLOW_ERRORS_FLAG = "--allow-errors"


def kind_name(kind: int) -> str:
    """``infra``, ``evaluator``, or ``other`` for an error whose producer named no kind."""
    if kind == ERROR_KIND_INFRA:
        return "infra"
    return "evaluator" if kind == ERROR_KIND_EVALUATOR else "other"


def error_breakdown(summary: MetricSummary) -> str:
    """The errors cell of a metric: ``30 (30 infra)``, ``5 (3 infra, 2 evaluator)``, ``0``."""
    if not summary.errors:
        return "0"
    if summary.error_kinds:
        parts = [f"{tally.count} {kind_name(tally.kind)}" for tally in summary.error_kinds]
    elif summary.infra_errors:  # a document saved before errors were tallied by kind
        parts = [f"{summary.infra_errors} infra"]
    else:
        return str(summary.errors)
    return f"{summary.errors} ({', '.join(parts)})"


@dataclass(frozen=True)
class ErrorNote:
    """One line under a metric table: an evaluator's errors of one kind and the first one's cause."""

    evaluator: str
    kind: str
    count: int
    first_reason: str

    def text(self) -> str:
        errors = "error" if self.count == 1 else "errors"
        first = self.first_reason or "(no reason given)"
        return f"{self.evaluator}: {self.count} {self.kind} {errors}, the first: {first}"


def error_notes(summaries: Iterable[MetricSummary]) -> list[ErrorNote]:
    """The errors behind the metrics, once per evaluator (its metrics share its evaluations) and kind."""
    notes: list[ErrorNote] = []
    seen: set[str] = set()
    for summary in summaries:
        if summary.evaluator in seen or not summary.errors:
            continue
        seen.add(summary.evaluator)
        notes.extend(
            ErrorNote(summary.evaluator, kind_name(t.kind), t.count, t.first_reason) for t in summary.error_kinds
        )
    return notes


def measured_nothing(summary: MetricSummary) -> bool:
    """Whether every evaluation behind ``summary`` was an infrastructure error: the metric is no measurement."""
    return (
        summary.infra_errors > 0
        and summary.errors == summary.infra_errors
        and summary.n == 0
        and summary.skipped == 0
        and summary.cancelled == 0
    )


def infra_failure(summaries: Sequence[MetricSummary]) -> str:
    """The message of a run with a metric that measured nothing (empty when there is none): the metrics, how many
    evaluations failed and the first cause, and how to accept it."""
    failed = [s for s in summaries if measured_nothing(s)]
    if not failed:
        return ""
    lines = []
    for summary in failed:
        first = next((t.first_reason for t in summary.error_kinds if t.kind == ERROR_KIND_INFRA), "")
        lines.append(
            f"metric {summary.metric}: every evaluation ({summary.infra_errors}) is an infrastructure error"
            + (f"; the first: {first}" if first else "")
        )
    return "\n".join(lines) + f"\n(exit 1: nothing was measured; {ALLOW_ERRORS_FLAG} accepts it and exits 0)"


def skip_notes(summaries: Iterable[MetricSummary], results: Iterable[EvaluationResult]) -> list[str]:
    """Why an evaluator measured nothing when it skipped every evaluation: the first skip's reason. A dataset-scope
    evaluator (``classification``) skips as one result, so the table alone would say only ``skipped 1``."""
    groups: dict[str, list[MetricSummary]] = {}
    for summary in summaries:
        groups.setdefault(summary.evaluator, []).append(summary)
    skipped = {
        name: max(s.skipped for s in group)
        for name, group in groups.items()
        if all(s.n == 0 and s.skipped and not s.errors and not s.cancelled for s in group)
    }
    first: dict[str, str] = {}
    for result in results if skipped else ():
        if result.evaluator in skipped and result.outcome == OUTCOME_SKIPPED:
            first.setdefault(result.evaluator, result.reason)
            if len(first) == len(skipped):
                break
    return [
        f"{name}: nothing scored ({count} skipped), the first because: {first.get(name) or '(no reason given)'}"
        for name, count in skipped.items()
    ]
