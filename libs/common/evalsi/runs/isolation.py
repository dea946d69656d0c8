"""The isolation a run's code executed under, for its manifest: each distinct report its results carry.

Code evaluators put the sandbox's isolation report in their scores' metadata (``isolation``: driver, level,
enforcement, requested, bounds, not_enforced); the manifest lists each distinct (driver, level, enforcement,
requested, what was not enforced) once, so a reader sees every rung and enforcement the run's results rest on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any

from evalsi.records import from_value
from evalsi.v1alpha1.record_pb2 import IsolationLevel, IsolationReport, Record
from evalsi.v1alpha1.score_pb2 import EvaluationResult

__all__ = ["ISOLATION_KEY", "SANDBOX_UNAVAILABLE", "SandboxUse", "SandboxUseFold", "report_of", "sandbox_use",
           "with_records"]

ISOLATION_KEY = "isolation"
MAX_REPORTS = 64  # distinct reports kept: a run has a few (one per rung and enforcement), never one per record
SANDBOX_UNAVAILABLE = "SANDBOX_UNAVAILABLE"  # in the reason of an evaluation no rung would run (SandboxUnavailable)


def _level(label: Any) -> str:
    name = f"ISOLATION_LEVEL_{str(label).upper()}"
    return name if name in IsolationLevel.keys() else "ISOLATION_LEVEL_UNSPECIFIED"  # noqa: SIM118 (not a dict)


def report_of(entry: dict[str, Any]) -> IsolationReport:
    """A score's ``isolation`` metadata as the proto report (bounds as "name: how" lines in ``enforced``)."""
    bounds = entry.get("bounds") or {}
    return IsolationReport(
        requested=_level(entry.get("requested", "")),
        achieved=_level(entry.get("level", "")),
        driver=str(entry.get("driver", "")),
        enforcement=str(entry.get("enforcement", "")),
        enforced=sorted(f"{name}: {how}" for name, how in bounds.items()) if isinstance(bounds, dict) else [],
        not_enforced=[str(item) for item in entry.get("not_enforced") or ()],
    )


def _key(report: IsolationReport) -> tuple[Any, ...]:
    return (report.driver, report.achieved, report.enforcement, report.requested, tuple(report.not_enforced))


@dataclass
class SandboxUse:
    """What a run's code evaluations ran under, and how many of them no rung would run (so nothing ran)."""

    reports: list[IsolationReport] = field(default_factory=list)
    refused: int = 0
    first_refusal: str = ""

    @property
    def refusal(self) -> str:
        """Why the run fails closed ('' when no evaluation was refused)."""
        return f"{self.refused} code evaluation(s) did not run: {self.first_refusal}" if self.refused else ""


def _add(found: dict[tuple[Any, ...], IsolationReport], use: SandboxUse, results: Iterable[EvaluationResult]) -> None:
    for result in results:
        if SANDBOX_UNAVAILABLE in result.reason:
            use.refused += 1
            use.first_refusal = use.first_refusal or result.reason
        for score in result.scores:
            if ISOLATION_KEY in score.metadata and len(found) < MAX_REPORTS:
                entry = from_value(score.metadata[ISOLATION_KEY])
                if isinstance(entry, dict):
                    report = report_of(entry)
                    found.setdefault(_key(report), report)


@dataclass
class SandboxUseFold:
    """:func:`sandbox_use` a batch at a time, for a reader that folds the same results for other ends too."""

    _use: SandboxUse = field(default_factory=SandboxUse)
    _found: dict[tuple[Any, ...], IsolationReport] = field(default_factory=dict)

    def add(self, batch: Iterable[EvaluationResult]) -> None:
        _add(self._found, self._use, batch)

    def result(self) -> SandboxUse:
        self._use.reports = list(self._found.values())
        return self._use


async def sandbox_use(batches: AsyncIterator[list[EvaluationResult]]) -> SandboxUse:
    """Each distinct isolation report in the results, in the order first seen, and the refused evaluations."""
    fold = SandboxUseFold()
    async for batch in batches:
        fold.add(batch)
    return fold.result()


def with_records(reports: list[IsolationReport], records: Iterable[Record]) -> list[IsolationReport]:
    """``reports`` and, after them, each distinct report generated records carry in ``provenance.isolation`` (agents
    and harnesses that ran in a sandbox), in the order first seen."""
    found = {_key(report): report for report in reports}
    for record in records:
        if record.provenance.HasField("isolation") and len(found) < MAX_REPORTS:
            found.setdefault(_key(record.provenance.isolation), record.provenance.isolation)
    return list(found.values())

