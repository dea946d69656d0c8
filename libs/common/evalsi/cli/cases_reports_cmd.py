"""``evalsi cases reports``: case reports on a server (push a saved report, list, show), and the upload that
``evalsi cases run --server`` does after its run (docs/cases.md, "Cases and reports on a server")."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from evalsi.cli._common import (
    client_for,
    credential_options,
    handle_errors,
    message_dict,
    message_json,
    server_option,
)
from evalsi.errors import BadInputError, EvalsiError

if TYPE_CHECKING:
    from evalsi.v1alpha1.case_service_pb2 import CaseReport

F = TypeVar("F", bound=Callable[..., Any])


def report_line(report: CaseReport) -> str:
    """One report in a line: its id, outcome counts, pass rate with its interval, regressions."""
    # ``pass`` is a Python keyword: the field is read by name.
    counts = {field.name: getattr(report.counts, field.name) for field in report.counts.DESCRIPTOR.fields}
    shown = ", ".join(f"{n} {name}" for name, n in counts.items() if n) or "no case"
    rate = (f"pass rate {report.pass_rate:.0%} [{report.ci_low:.0%}, {report.ci_high:.0%}]"
            if report.HasField("pass_rate") else "pass rate n/a")
    gate = f", {report.regressions} regression(s)" if report.HasField("regressions") else ""
    return f"{report.id}  {shown}; {rate}{gate}"


def push_report(server: str, project: str | None, document: dict[str, Any], name: str) -> CaseReport:
    """Upload ``document`` (a report as ``evalsi cases run`` writes it) to ``server``."""
    with client_for(server, project) as client:
        return client.cases.upload_report(document, name=name)


def upload_options(fn: F) -> F:
    """``--server`` and ``--report-name`` (with ``--token``/``--api-key``) for a command that writes a report:
    ``evalsi cases run`` and ``evalsi cases simulate``."""
    fn = credential_options(fn)
    fn = click.option("--report-name", metavar="TEXT",
                      help="The uploaded report's label in lists (default: --source).")(fn)
    return click.option(
        "--server", metavar="URL",
        help="Also upload the report to this Evals.si server (http://host:8080 or grpc://host:8081), into --project; "
             "the web UI shows it under #/cases. Exit 1 when the upload fails (a gate's 3 or a broken case's 2 still "
             "wins).")(fn)


def upload_after_run(server: str, project: str | None, document: str, name: str, code: int, *,
                     quiet: bool) -> int:
    """``--server``: the run's report uploaded; a failed upload is said and makes a clean run exit 1."""
    try:
        uploaded = push_report(server, project, json.loads(document), name)
    except EvalsiError as exc:
        click.echo(f"error: --server {server}: the report was not uploaded: {exc}", err=True)
        return code or 1
    click.echo(uploaded_line(uploaded, server), err=quiet)
    return code


def uploaded_line(report: CaseReport, server: str) -> str:
    what = "uploaded" if report.created else "already stored"
    return (f"{what}: case report {report.id} (project {report.project}, tenant {report.tenant}) on {server}; "
            f"open {server.rstrip('/')}/ui/#/cases/reports/{report.id}")


def read_report(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError(f"{path}: cannot read it: {exc}") from None
    except json.JSONDecodeError as exc:
        raise BadInputError(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from None
    if not isinstance(document, dict):
        raise BadInputError(f"{path}: expected a case report (a JSON object), got {type(document).__name__}")
    return document


@click.group("reports")
def reports() -> None:
    """Case reports on a server: push a saved report, list them, show one (the web UI shows them too)."""


@reports.command("push")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@server_option
@click.option("--name", default=None, metavar="TEXT", help="A label shown in lists (default: the file's name).")
@handle_errors
def push_command(file: Path, server: str, project: str | None, name: str | None) -> None:
    """Upload a report `evalsi cases run` saved (evals/reports/*.json, or --output FILE).

    The server checks it (kind evalsi.cases.report/v1, every case's status and checks, one tenant's cases, at
    most 8 MiB of JSON and 10,000 cases) and stores it under the hash of its content: pushing it again stores
    nothing new.
    """
    report = push_report(server, project, read_report(file), file.name if name is None else name)
    click.echo(uploaded_line(report, server))


@reports.command("list")
@server_option
@click.option("--tenant", default="", metavar="TENANT", help="This tenant's reports (default: platform).")
@click.option("--agent", "agent_name", default="", metavar="NAME", help="Only reports with a case of this agent.")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=1), help="At most this many.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@handle_errors
def list_command(server: str, project: str | None, tenant: str, agent_name: str, limit: int, fmt: str) -> None:
    """The tenant's case reports on the server, newest first."""
    with client_for(server, project) as client:
        found = []
        for report in client.cases.reports(tenant=tenant, agent=agent_name, page_size=min(limit, 100)):
            found.append(report)
            if len(found) == limit:
                break
    if fmt == "json":
        click.echo(json.dumps({"reports": [message_dict(report) for report in found]}, indent=2))
        return
    for report in found:
        when = report.upload_time.ToDatetime(UTC).strftime("%Y-%m-%d %H:%M:%S")
        label = f"  {report.name}" if report.name else ""
        click.echo(f"{when}  {report_line(report)}  agents: {', '.join(report.agents) or '-'}{label}")
    click.echo(f"{len(found)} report(s)")


@reports.command("show")
@click.argument("report_id")
@server_option
@click.option("--tenant", default="", metavar="TENANT", help="The report's tenant (default: platform).")
@handle_errors
def show_command(report_id: str, server: str, project: str | None, tenant: str) -> None:
    """One report as stored, with its whole document (JSON)."""
    with client_for(server, project) as client:
        click.echo(message_json(client.cases.report(report_id, tenant=tenant)))
