"""``Client.cases``: the agent cases stored on the server and the case reports uploaded to it (CaseService)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from google.protobuf.struct_pb2 import Struct

from evalsi.client_transports import Transport
from evalsi.v1alpha1.case_service_pb2 import (
    AgentCase,
    CaseReport,
    GetCaseReportRequest,
    GetCaseRequest,
    ListCaseReportsRequest,
    ListCaseReportsResponse,
    ListCasesRequest,
    ListCasesResponse,
    UploadCaseReportRequest,
)


class Cases:
    """Stored cases (``evalsi cases import`` writes them) and case reports, per project and tenant (``platform``
    when none is given; another tenant's case or report reads as missing)."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    def list(self, *, tenant: str = "", agent: str = "", page_size: int = 100,
             project: str = "") -> Iterator[AgentCase]:
        """The tenant's cases in corpus order, page after page."""
        token = ""
        while True:
            request = ListCasesRequest(tenant=tenant, agent=agent, page_size=page_size, page_token=token,
                                       project=project)
            page = self._t.unary("CaseService", "ListCases", request, ListCasesResponse)
            yield from page.cases
            token = page.next_page_token
            if not token:
                return

    def get(self, case_id: str, *, tenant: str = "", project: str = "") -> AgentCase:
        return self._t.unary("CaseService", "GetCase",
                             GetCaseRequest(case_id=case_id, tenant=tenant, project=project), AgentCase)

    def upload_report(self, report: Mapping[str, Any], *, name: str = "", project: str = "") -> CaseReport:
        """Store a report as ``evalsi cases run`` writes it; ``created`` is False when it was already stored."""
        body = Struct()
        body.update(report)
        request = UploadCaseReportRequest(report=body, name=name, project=project)
        return self._t.unary("CaseService", "UploadCaseReport", request, CaseReport)

    def reports(self, *, tenant: str = "", agent: str = "", page_size: int = 50,
                project: str = "") -> Iterator[CaseReport]:
        """The tenant's reports, newest first, without their documents, page after page."""
        token = ""
        while True:
            request = ListCaseReportsRequest(tenant=tenant, agent=agent, page_size=page_size, page_token=token,
                                             project=project)
            page = self._t.unary("CaseService", "ListCaseReports", request, ListCaseReportsResponse)
            yield from page.reports
            token = page.next_page_token
            if not token:
                return

    def report(self, report_id: str, *, tenant: str = "", project: str = "") -> CaseReport:
        """One report with its whole document (``report``)."""
        return self._t.unary("CaseService", "GetCaseReport",
                             GetCaseReportRequest(report_id=report_id, tenant=tenant, project=project), CaseReport)
