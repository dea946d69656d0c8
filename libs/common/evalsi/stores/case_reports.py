"""Agent case reports in the metadata store (CaseService): each uploaded report's canonical JSON with what lists
show beside it, by (project, tenant, report id).

A mixin of ``SqlMetadataStore`` (``evalsi.stores.sql``), like ``SqlDocuments``. The id is a hash of the content,
so a second upload of one report changes nothing. Reads name the tenant: another tenant's report reads as absent.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .metadata import (
    check_page_size,
    decode_page_token,
    encode_page_token,
    project_or_default,
    query_fingerprint,
)
from .sql_engines import Column, Database


@dataclass(frozen=True)
class StoredCaseReport:
    """A case report as stored. ``counts`` maps each case outcome to its number; ``regressions`` is None when the
    run had no baseline; ``document`` is the report's canonical JSON (empty in a list). ``upload_us`` is set by
    the store (microseconds since the epoch); on the way in it is ignored."""

    tenant: str
    report_id: str
    name: str
    agents: tuple[str, ...]
    counts: dict[str, int]
    pass_rate: float | None
    ci_low: float | None
    ci_high: float | None
    regressions: int | None
    simulated: bool
    uploaded_by: str
    size_bytes: int
    document: str = ""
    upload_us: int = 0
    project: str = field(default="", compare=False)


class CaseReportStore(Protocol):
    """Case reports by (project, tenant, report id); newest first in lists."""

    async def put_case_report(self, project: str, report: StoredCaseReport) -> tuple[StoredCaseReport, bool]:
        """Store ``report`` unless one with its id is stored in its tenant; the stored one, and whether it is new."""
        ...

    async def get_case_report(self, project: str, tenant: str, report_id: str) -> StoredCaseReport | None: ...

    async def list_case_reports(
        self, project: str, tenant: str, *, agent: str = "", page_size: int = 50, page_token: str = ""
    ) -> tuple[list[StoredCaseReport], str]:
        """Newest first, without documents; only reports with a case of ``agent`` when given."""
        ...


class SqlCaseReports:
    """Case reports over a ``Database``; the store that mixes this in sets ``_db``."""

    _db: Database

    async def put_case_report(self, project: str, report: StoredCaseReport) -> tuple[StoredCaseReport, bool]:
        project = project_or_default(project)
        now_us = int(time.time() * 1_000_000)
        row = (report.tenant, report.report_id, report.name, json.dumps(list(report.agents)),
               json.dumps(report.counts, sort_keys=True), report.pass_rate, report.ci_low, report.ci_high,
               report.regressions, int(report.simulated), report.uploaded_by, now_us, report.size_bytes,
               report.document)
        async with self._db.transaction() as c:
            # Two uploads of one report at once: the primary key lets one in, the other finds it stored.
            created = await c.fetch(
                f"INSERT INTO case_reports (project_id, {', '.join(name for name, _ in _COLUMNS)}) "
                f"VALUES (?, {', '.join('?' for _ in _COLUMNS)}) "
                "ON CONFLICT (project_id, tenant_id, report_id) DO NOTHING RETURNING report_id",
                project, *row,
            )
            if created:
                await c.insert_many(
                    "case_report_agents",
                    [("project_id", "text", project), ("tenant_id", "text", report.tenant),
                     ("report_id", "text", report.report_id)],
                    (("agent", "text"),), [(agent,) for agent in report.agents], "ON CONFLICT DO NOTHING",
                )
            rows = await c.fetch(f"{_SELECT_FULL} WHERE {_KEY}", project, report.tenant, report.report_id)
        return _stored(rows[0], project), bool(created)

    async def get_case_report(self, project: str, tenant: str, report_id: str) -> StoredCaseReport | None:
        project = project_or_default(project)
        rows = await self._db.fetch(f"{_SELECT_FULL} WHERE {_KEY}", project, tenant, report_id)
        return _stored(rows[0], project) if rows else None

    async def list_case_reports(
        self, project: str, tenant: str, *, agent: str = "", page_size: int = 50, page_token: str = ""
    ) -> tuple[list[StoredCaseReport], str]:
        project = project_or_default(project)
        check_page_size(page_size)
        fingerprint = query_fingerprint("case_reports", project, tenant, agent)
        cursor = decode_page_token(page_token, fingerprint, types=(int, str))
        where = ["project_id = ?", "tenant_id = ?"]
        args: list[Any] = [project, tenant]
        if agent:
            where.append("EXISTS (SELECT 1 FROM case_report_agents a WHERE a.project_id = case_reports.project_id "
                         "AND a.tenant_id = case_reports.tenant_id AND a.report_id = case_reports.report_id "
                         "AND a.agent = ?)")
            args.append(agent)
        if cursor is not None:
            where.append("(upload_us < ? OR (upload_us = ? AND report_id < ?))")
            args += [cursor[0], cursor[0], cursor[1]]
        rows = await self._db.fetch(
            f"{_SELECT_SUMMARY} WHERE {' AND '.join(where)} ORDER BY upload_us DESC, report_id DESC LIMIT ?",
            *args, page_size + 1,
        )
        page = [_stored(row, project) for row in rows[:page_size]]
        token = encode_page_token([page[-1].upload_us, page[-1].report_id], fingerprint) if len(rows) > page_size \
            else ""
        return page, token


_COLUMNS: tuple[Column, ...] = (
    ("tenant_id", "text"), ("report_id", "text"), ("name", "text"), ("agents", "text"), ("counts", "text"),
    ("pass_rate", "float"), ("ci_low", "float"), ("ci_high", "float"), ("regressions", "int"),
    ("simulated", "int"), ("uploaded_by", "text"), ("upload_us", "int"), ("size_bytes", "int"),
    ("document", "text"),
)
_SUMMARY = ("tenant_id, report_id, name, agents, counts, pass_rate, ci_low, ci_high, regressions, simulated, "
            "uploaded_by, size_bytes, upload_us")
_SELECT_SUMMARY = f"SELECT {_SUMMARY}, '' FROM case_reports"
_SELECT_FULL = f"SELECT {_SUMMARY}, document FROM case_reports"
_KEY = "project_id = ? AND tenant_id = ? AND report_id = ?"


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _stored(row: Sequence[Any], project: str) -> StoredCaseReport:
    return StoredCaseReport(
        tenant=row[0], report_id=row[1], name=row[2], agents=tuple(json.loads(row[3])), counts=json.loads(row[4]),
        pass_rate=_optional_float(row[5]), ci_low=_optional_float(row[6]), ci_high=_optional_float(row[7]),
        regressions=None if row[8] is None else int(row[8]), simulated=bool(row[9]), uploaded_by=row[10],
        size_bytes=int(row[11]), upload_us=int(row[12]), document=row[13], project=project,
    )
