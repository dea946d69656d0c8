"""A sandbox's isolation report as a Record's ``provenance.isolation`` (record.proto's ``IsolationReport``), so a
generated record says which rung its output came from, whatever read it later."""

from __future__ import annotations

from evalsi.sandbox.model import IsolationReport
from evalsi.v1alpha1.record_pb2 import IsolationReport as IsolationReportProto

__all__ = ["provenance_isolation"]


def provenance_isolation(report: IsolationReport) -> IsolationReportProto:
    """The report with its bounds as "name: how" lines in ``enforced`` (as the run manifest lists them)."""
    return IsolationReportProto(
        requested=f"ISOLATION_LEVEL_{report.requested.name}",
        achieved=f"ISOLATION_LEVEL_{report.level.name}",
        driver=report.driver,
        enforcement=report.enforcement,
        enforced=sorted(f"{name}: {how}" for name, how in report.bounds.items()),
        not_enforced=list(report.not_enforced),
    )
