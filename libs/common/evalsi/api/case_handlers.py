"""CaseService: the agent cases `evalsi cases import` stored, and case reports uploaded by `evalsi cases run`.

Both live in the metadata store. Every call names a tenant (``platform`` when none is given) besides the project,
and another tenant's case or report is answered exactly as a missing one, as the CLI's store reads do.
"""

from __future__ import annotations

import asyncio
import json
from typing import Protocol

import grpc
from google.protobuf import json_format
from google.protobuf.struct_pb2 import Struct
from google.protobuf.timestamp_pb2 import Timestamp

from evalsi.api.config import HandlerLimits
from evalsi.api.context import CallContext
from evalsi.api.errors import ApiError, NotFoundError
from evalsi.api.handlers_common import page_size, required
from evalsi.cases.model import DEFAULT_TENANT, Case
from evalsi.cases.store import load_stored
from evalsi.cases.uploaded_report import check_name, index_report
from evalsi.edge_checks import text_problem
from evalsi.errors import BadInputError
from evalsi.stores import CaseReportStore, CaseStore, StoredCase, StoredCaseReport
from evalsi.v1alpha1.case_service_pb2 import (
    AgentCase,
    CaseCounts,
    CaseReport,
    GetCaseReportRequest,
    GetCaseRequest,
    ListCaseReportsRequest,
    ListCaseReportsResponse,
    ListCasesRequest,
    ListCasesResponse,
    UploadCaseReportRequest,
)

NO_CASE_STORE = "no case store is configured: evalsi-api keeps cases and case reports in its metadata store " \
                "(--metadata-url)"


class CaseServiceStore(CaseStore, CaseReportStore, Protocol):
    """The metadata store's roles this service reads and writes."""


class CaseHandlers:
    """Stored cases (read-only: `evalsi cases import` writes them) and uploaded case reports."""

    def __init__(self, store: CaseServiceStore | None, *, limits: HandlerLimits | None = None) -> None:
        self._store = store
        self._limits = limits or HandlerLimits()

    def _cases(self) -> CaseServiceStore:
        if self._store is None:
            raise ApiError(grpc.StatusCode.FAILED_PRECONDITION, NO_CASE_STORE)
        return self._store

    async def list_cases(self, request: ListCasesRequest, ctx: CallContext) -> ListCasesResponse:
        tenant = _tenant(request.tenant)
        stored = await self._cases().list_cases(ctx.project, tenant, agent=_storable(request.agent, "agent"))
        size = page_size(request.page_size, self._limits.default_runs_page_size, self._limits.max_page_size)
        # A tenant holds a corpus of cases, not millions: page by offset over the corpus order.
        start = _offset(request.page_token, len(stored))
        page = stored[start:start + size]
        token = str(start + size) if start + size < len(stored) else ""
        cases = await asyncio.to_thread(lambda: [_case_message(ctx.project, case) for case in page])
        return ListCasesResponse(cases=cases, next_page_token=token)

    async def get_case(self, request: GetCaseRequest, ctx: CallContext) -> AgentCase:
        case_id = _storable(required(request.case_id, "case_id", "the case's id"), "case_id")
        tenant = _tenant(request.tenant)
        found = await self._cases().get_case(ctx.project, tenant, case_id)
        if found is None:
            raise NotFoundError(f"case_id: case {case_id!r} not found in project {ctx.project!r}, tenant {tenant!r}")
        return await asyncio.to_thread(_case_message, ctx.project, found)

    async def upload_case_report(self, request: UploadCaseReportRequest, ctx: CallContext) -> CaseReport:
        store = self._cases()
        if not request.HasField("report"):
            raise BadInputError("report: the case report (the JSON `evalsi cases run --output` writes) is required")
        name = _storable(check_name(request.name), "name")
        document = json_format.MessageToDict(request.report)
        index = await asyncio.to_thread(index_report, document)
        stored, created = await store.put_case_report(ctx.project, StoredCaseReport(
            tenant=index.tenant, report_id=index.report_id, name=name, agents=index.agents, counts=index.counts,
            pass_rate=index.pass_rate, ci_low=index.ci_low, ci_high=index.ci_high, regressions=index.regressions,
            simulated=index.simulated, uploaded_by=ctx.principal.id if ctx.principal.authenticated else "",
            size_bytes=index.size_bytes, document=index.canonical,
        ))
        answer = await asyncio.to_thread(_report_message, stored)
        answer.created = created
        return answer

    async def list_case_reports(self, request: ListCaseReportsRequest, ctx: CallContext) -> ListCaseReportsResponse:
        tenant = _tenant(request.tenant)
        size = page_size(request.page_size, self._limits.default_runs_page_size, self._limits.max_page_size)
        reports, token = await self._cases().list_case_reports(ctx.project, tenant,
                                                                agent=_storable(request.agent, "agent"),
                                                                page_size=size, page_token=request.page_token)
        return ListCaseReportsResponse(reports=[_report_message(report) for report in reports],
                                       next_page_token=token)

    async def get_case_report(self, request: GetCaseReportRequest, ctx: CallContext) -> CaseReport:
        report_id = _storable(required(request.report_id, "report_id", "the report's id"), "report_id")
        tenant = _tenant(request.tenant)
        found = await self._cases().get_case_report(ctx.project, tenant, report_id)
        if found is None:
            raise NotFoundError(f"report_id: case report {report_id!r} not found in project {ctx.project!r}, "
                                f"tenant {tenant!r}")
        return await asyncio.to_thread(_report_message, found)


def _storable(value: str, field: str) -> str:
    """``value`` when the store can take it (no NUL: Postgres text refuses one), else a 400 naming ``field``."""
    problem = text_problem(value)
    if problem:
        raise BadInputError(f"{field}: {problem}")
    return value


def _tenant(value: str) -> str:
    return _storable(value.strip() or DEFAULT_TENANT, "tenant")


def _offset(token: str, total: int) -> int:
    if not token:
        return 0
    if not token.isdigit() or int(token) > total:
        raise BadInputError(f"page_token {token!r} is not a token this server returned")
    return int(token)


def _timestamp(seconds: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromNanoseconds(int(seconds * 1e9))
    return stamp


def _case_message(project: str, case: StoredCase) -> AgentCase:
    loaded = load_stored(case)
    return AgentCase(
        project=project, tenant=case.tenant, id=case.case_id, agent=case.agent, path=case.path,
        position=case.position, line=case.line, yaml=case.yaml, yaml_hash=case.yaml_hash,
        create_time=_timestamp(case.created_at), update_time=_timestamp(case.updated_at),
        problem="" if isinstance(loaded, Case) else loaded.error,
    )


def _report_message(report: StoredCaseReport) -> CaseReport:
    message = CaseReport(
        id=report.report_id, project=report.project, tenant=report.tenant, name=report.name,
        agents=list(report.agents), counts=CaseCounts(**report.counts), simulated=report.simulated,
        upload_time=_timestamp(report.upload_us / 1_000_000), uploaded_by=report.uploaded_by,
        size_bytes=report.size_bytes,
    )
    for field in ("pass_rate", "ci_low", "ci_high", "regressions"):
        value = getattr(report, field)
        if value is not None:
            setattr(message, field, value)
    if report.document:
        body = Struct()
        body.update(json.loads(report.document))
        message.report.CopyFrom(body)
    return message
