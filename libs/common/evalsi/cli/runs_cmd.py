"""``evalsi runs``: list, inspect, follow, cancel and resume runs on a server."""

from __future__ import annotations

import json
import re
import sys
from datetime import datetime, timedelta

import click

from evalsi.cli._common import (
    CHOOSE_PROJECT,
    EXIT_GATE_FAILED,
    client_for,
    handle_errors,
    looking_in,
    message_dict,
    message_json,
    server_option,
)
from evalsi.cli.traces_cmd import parse_since
from evalsi.client import Client, state_name
from evalsi.errors import BadInputError
from evalsi.masking import mask_url
from evalsi.projects import DEFAULT_PROJECT
from evalsi.runs.failures import infra_failure
from evalsi.runs.results import EvaluationResults
from evalsi.v1alpha1.run_pb2 import RUN_STATE_BUDGET_EXCEEDED, RUN_STATE_SUCCEEDED, Run


def empty_list_hint(project: str | None, server: str, *, filtered: bool) -> str:
    what = "no runs match these filters" if filtered else "no runs"
    return (f"{what} in project {project or DEFAULT_PROJECT!r} on {mask_url(server)}; {CHOOSE_PROJECT}, or list "
            "every project's runs with --all-projects (a server on loopback only)")


_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def parse_until(text: str, now: datetime | None = None) -> datetime:
    """``--until``: what ``--since`` accepts; a bare date takes in that whole day (UTC), since a person who says
    "until the 3rd" means the 3rd too; a time is the exclusive end."""
    moment = parse_since(text, now, flag="--until")
    return moment + timedelta(days=1) if _DATE.match(text.strip()) else moment


def creation_bounds(since: str | None, until: str | None) -> tuple[datetime | None, datetime | None]:
    """``--since`` and ``--until`` as ListRuns' created_after (inclusive) and created_before (exclusive)."""
    after = parse_since(since) if since else None
    before = parse_until(until) if until else None
    if after is not None and before is not None and before <= after:
        raise BadInputError(f"--until {until!r} ({before.isoformat()}) is not later than --since {since!r} "
                            f"({after.isoformat()}): no run was created between them")
    return after, before


def next_steps(run_id: str, project: str, server: str) -> str:
    """The commands that follow a run submitted with --no-wait, naming its project: a run is looked up in one."""
    where = f"--server {server} --project {project}"
    return "\n".join(f"  evalsi runs {verb} {run_id} {where}" for verb in ("watch", "get", "results"))


def describe_run(run: Run) -> str:
    """A run as a person reads it: state, progress, the metric table and its gates."""

    progress = run.progress
    lines = [
        f"{run.id}  {run.name or '(unnamed)'}  [{state_name(run.state)}]",
        f"tasks {progress.completed}/{progress.total_tasks} · evaluations scored {progress.scored}, "
        f"skipped {progress.skipped}, errors {progress.errors}, cancelled {progress.cancelled}",
    ]
    if run.created_by:
        lines.append(f"created by {run.created_by}")
    if run.message:
        lines.append(run.message)
    if run.summaries:
        lines.append(EvaluationResults(run).table())
    for gate in run.gates:
        mark = "✓" if gate.passed else "✗"
        lines.append(f"{mark} {gate.expression}" + (f"  — {gate.message}" if gate.message else ""))
    return "\n".join(lines)


def exit_code_of(run: Run, *, allow_errors: bool = False) -> int:
    """1 when a metric measured nothing (its every evaluation an infrastructure error) unless ``allow_errors``;
    3 when a gate failed or the budget ran out; 0 for a run that succeeded, else 1."""

    if run.state == RUN_STATE_SUCCEEDED and not allow_errors and infra_failure(run.summaries):
        return 1
    if run.state == RUN_STATE_BUDGET_EXCEEDED or any(not g.passed for g in run.gates):
        return EXIT_GATE_FAILED
    return 0 if run.state == RUN_STATE_SUCCEEDED else 1


@click.group("runs")
def runs() -> None:
    """Runs on a server: list, get, watch, cancel, resume, results."""


@runs.command("list")
@server_option
@click.option(
    "--state",
    type=click.Choice(["pending", "running", "succeeded", "failed", "cancelled", "budget_exceeded"]),
    help="Only runs in this state.",
)
@click.option("--name", "name_contains", default="", help="Only runs whose name contains this.")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="Only runs with this label.")
@click.option("--since", default=None, metavar="WHEN",
              help="Only runs created at or after: 30m, 2h, 7d ago, a date (2026-12-01, from its start, UTC) or an "
                   "RFC 3339 time (2026-12-01T09:30:00Z).")
@click.option("--until", default=None, metavar="WHEN",
              help="Only runs created before: the same forms; a date takes in that whole day (UTC).")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=1))
@click.option("--all-projects", is_flag=True,
              help="Every project's runs, with a project column (only a server that listens on loopback alone "
                   "allows it).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@handle_errors
def list_command(
    server: str,
    project: str | None,
    state: str | None,
    name_contains: str,
    labels: tuple[str, ...],
    since: str | None,
    until: str | None,
    limit: int,
    all_projects: bool,
    fmt: str,
) -> None:
    """The project's runs, newest first (--all-projects: every project's).

    \b
    --since and --until filter on the server, by when a run was created:
      evalsi runs list --since 7d
      evalsi runs list --since 2026-12-01 --until 2026-12-01   # the runs of that day (UTC)
      evalsi runs list --until 2026-12-01T09:30:00+01:00
    """
    created_after, created_before = creation_bounds(since, until)

    if all_projects:
        # A --project flag contradicts it; a project from EVALSI_PROJECT or a config file is only a default.
        if click.get_current_context().params.get("project"):
            raise BadInputError("--all-projects lists every project's runs; give it or --project, not both")
        project = None
    with client_for(server, project) as client:
        found = []
        runs = client.runs.list(state=state or 0, name_contains=name_contains, labels=labels,
                                all_projects=all_projects, created_after=created_after,
                                created_before=created_before)
        for run in runs:
            found.append(run)
            if len(found) >= limit:
                break
    if fmt == "json":
        click.echo(json.dumps([message_dict(r) for r in found], indent=2))
    else:
        _print_runs(found, with_project=all_projects)
    if not found and not all_projects:
        filtered = bool(state or name_contains or labels or since or until)
        click.echo(empty_list_hint(project, server, filtered=filtered), err=True)


def _print_runs(found: list[Run], *, with_project: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(header_style="bold")
    for column in ("id", *(["project"] if with_project else []), "name", "state", "created", "tasks"):
        table.add_column(column)
    for run in found:
        created = run.create_time.ToDatetime().strftime("%Y-%m-%d %H:%M:%S") if run.create_time.seconds else ""
        table.add_row(run.id, *([run.project] if with_project else []), run.name, state_name(run.state), created,
                      f"{run.progress.completed}/{run.progress.total_tasks}")
    Console(width=140).print(table)


@runs.command("get")
@click.argument("run_id")
@server_option
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@handle_errors
def get_command(run_id: str, server: str, project: str | None, fmt: str) -> None:
    """One run: state, progress, metrics with intervals, gates."""
    with client_for(server, project) as client, looking_in():
        run = client.runs.get(run_id)
    click.echo(message_json(run) if fmt == "json" else describe_run(run))


@runs.command("watch")
@click.argument("run_id")
@server_option
@click.option(
    "--allow-errors",
    is_flag=True,
    help="Exit 0 even when a metric's every evaluation is an infrastructure error (else exit 1).",
)
@handle_errors
def watch_command(run_id: str, server: str, project: str | None, allow_errors: bool) -> None:
    """Follow a run to its end; exits like `evalsi run` (3 when a gate failed, 1 when a metric's every evaluation
    is an infrastructure error)."""
    with client_for(server, project) as client, looking_in():
        follow(client, run_id, allow_errors=allow_errors)


def follow(client: Client, run_id: str, project: str = "", *, allow_errors: bool = False) -> None:
    """Print progress events until the run ends, then the run, and exit with its code (``exit_code_of``)."""
    last = ""
    for event in client.runs.watch(run_id, project=project):
        line = f"{state_name(event.state)}: tasks {event.progress.completed}/{event.progress.total_tasks}" + (
            f" · {event.message}" if event.message else ""
        )
        if line != last:
            click.echo(line, err=True)
            last = line
    run = client.runs.get(run_id, project=project)
    click.echo(describe_run(run))
    exit_with(run, allow_errors=allow_errors)


def exit_with(run: Run, *, allow_errors: bool = False) -> None:
    """Exit with the run's code, saying first why when a metric measured nothing."""
    failure = "" if allow_errors or run.state != RUN_STATE_SUCCEEDED else infra_failure(run.summaries)
    if failure:
        click.echo(f"error: {failure}", err=True)
    sys.exit(exit_code_of(run, allow_errors=allow_errors))


@runs.command("cancel")
@click.argument("run_id")
@server_option
@handle_errors
def cancel_command(run_id: str, server: str, project: str | None) -> None:
    """Cancel a run: work in flight finishes, the rest is cancelled."""
    with client_for(server, project) as client, looking_in():
        run = client.runs.cancel(run_id)
    click.echo(f"{run.id}: {state_name(run.state)}")


@runs.command("resume")
@click.argument("run_id")
@server_option
@handle_errors
def resume_command(run_id: str, server: str, project: str | None) -> None:
    """Resume a cancelled or failed run: completed tasks are skipped."""
    with client_for(server, project) as client, looking_in():
        run = client.runs.resume(run_id)
    click.echo(f"{run.id}: {state_name(run.state)}")


@runs.command("results")
@click.argument("run_id")
@server_option
@click.option("--evaluator", default="", help="Only this evaluator alias.")
@click.option("--limit", type=click.IntRange(min=1), help="At most this many results.")
@handle_errors
def results_command(run_id: str, server: str, project: str | None, evaluator: str, limit: int | None) -> None:
    """Per-record results as JSON lines."""
    with client_for(server, project) as client, looking_in():
        for count, result in enumerate(client.runs.results(run_id, evaluator=evaluator), start=1):
            click.echo(message_json(result, indent=None))
            if limit is not None and count >= limit:
                break
