"""The isolation a run's code executed under, for its manifest: each distinct report its results carry.

Code evaluators put the sandbox's isolation report in their scores' metadata (``isolation``: driver, level,
enforcement, requested, bounds, not_enforced); the manifest lists each distinct (driver, level, enforcement,
requested, what was not enforced) once, so a reader sees every rung and enforcement the run's results rest on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

from evalsi.records import from_value
from evalsi.v1alpha1.record_pb2 import IsolationLevel, IsolationReport
from evalsi.v1alpha1.score_pb2 import EvaluationResult

__all__ = ["ISOLATION_KEY", "isolation_reports", "report_of"]

ISOLATION_KEY = "isolation"
MAX_REPORTS = 64  # distinct reports kept: a run has a few (one per rung and enforcement), never one per record


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


def _add(found: dict[tuple[Any, ...], IsolationReport], results: Iterable[EvaluationResult]) -> None:
    for result in results:
        for score in result.scores:
            if ISOLATION_KEY in score.metadata and len(found) < MAX_REPORTS:
                entry = from_value(score.metadata[ISOLATION_KEY])
                if isinstance(entry, dict):
                    report = report_of(entry)
                    found.setdefault(_key(report), report)


async def isolation_reports(batches: AsyncIterator[list[EvaluationResult]]) -> list[IsolationReport]:
    """Each distinct isolation report in the results, in the order first seen."""
    found: dict[tuple[Any, ...], IsolationReport] = {}
    async for batch in batches:
        _add(found, batch)
    return list(found.values())
