"""``evalsi runs``: list, inspect, follow, cancel and resume runs on a server."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from evalsi.cli._common import EXIT_GATE_FAILED, check_project_flag, handle_errors, message_dict, message_json
from evalsi.client import Client
from evalsi.runs.results import EvaluationResults
from evalsi.v1alpha1.run_pb2 import RUN_STATE_BUDGET_EXCEEDED, RUN_STATE_SUCCEEDED, Run, RunState

F = TypeVar("F", bound=Callable[..., Any])

SERVER_HELP = "The Evals.si server: grpc://127.0.0.1:8081 or http://127.0.0.1:8080 (env EVALSI_SERVER)."


def server_option(fn: F) -> F:
    fn = click.option(
        "--project",
        default=None,
        envvar="EVALSI_PROJECT",
        callback=check_project_flag,
        help="The project the runs belong to (default: 'default').",
    )(fn)
    return click.option("--server", required=True, envvar="EVALSI_SERVER", metavar="URL", help=SERVER_HELP)(fn)


def client_for(server: str, project: str | None) -> Client:

    return Client(server, project=project)


def state_name(state: int) -> str:

    return RunState.Name(state).removeprefix("RUN_STATE_").lower()


def describe_run(run: Run) -> str:
    """A run as a person reads it: state, progress, the metric table and its gates."""

    progress = run.progress
    lines = [
        f"{run.id}  {run.name or '(unnamed)'}  [{state_name(run.state)}]",
        f"tasks {progress.completed}/{progress.total_tasks} · evaluations scored {progress.scored}, "
        f"skipped {progress.skipped}, errors {progress.errors}, cancelled {progress.cancelled}",
    ]
    if run.message:
        lines.append(run.message)
    if run.summaries:
        lines.append(EvaluationResults(run).table())
    for gate in run.gates:
        mark = "✓" if gate.passed else "✗"
        lines.append(f"{mark} {gate.expression}" + (f"  — {gate.message}" if gate.message else ""))
    return "\n".join(lines)


def exit_code_of(run: Run) -> int:
    """3 when a gate failed or the budget ran out, else 0."""

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
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=1))
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@handle_errors
def list_command(
    server: str,
    project: str | None,
    state: str | None,
    name_contains: str,
    labels: tuple[str, ...],
    limit: int,
    fmt: str,
) -> None:
    """The project's runs, newest first."""

    with client_for(server, project) as client:
        state_value = RunState.Value(f"RUN_STATE_{state.upper()}") if state else 0
        found = []
        for run in client.runs.list(state=state_value, name_contains=name_contains, labels=labels):
            found.append(run)
            if len(found) >= limit:
                break
    if fmt == "json":
        click.echo(json.dumps([message_dict(r) for r in found], indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(header_style="bold")
    for column in ("id", "name", "state", "created", "tasks"):
        table.add_column(column)
    for run in found:
        created = run.create_time.ToDatetime().strftime("%Y-%m-%d %H:%M:%S") if run.create_time.seconds else ""
        table.add_row(
            run.id, run.name, state_name(run.state), created, f"{run.progress.completed}/{run.progress.total_tasks}"
        )
    Console(width=140).print(table)


@runs.command("get")
@click.argument("run_id")
@server_option
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@handle_errors
def get_command(run_id: str, server: str, project: str | None, fmt: str) -> None:
    """One run: state, progress, metrics with intervals, gates."""
    with client_for(server, project) as client:
        run = client.runs.get(run_id)
    click.echo(message_json(run) if fmt == "json" else describe_run(run))


@runs.command("watch")
@click.argument("run_id")
@server_option
@handle_errors
def watch_command(run_id: str, server: str, project: str | None) -> None:
    """Follow a run to its end; exits like `evalsi run` (3 when a gate failed)."""
    with client_for(server, project) as client:
        follow(client, run_id)


def follow(client: Client, run_id: str, project: str = "") -> None:
    """Print progress events until the run ends, then the run, and exit with its code."""
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
    sys.exit(exit_code_of(run))


@runs.command("cancel")
@click.argument("run_id")
@server_option
@handle_errors
def cancel_command(run_id: str, server: str, project: str | None) -> None:
    """Cancel a run: work in flight finishes, the rest is cancelled."""
    with client_for(server, project) as client:
        run = client.runs.cancel(run_id)
    click.echo(f"{run.id}: {state_name(run.state)}")


@runs.command("resume")
@click.argument("run_id")
@server_option
@handle_errors
def resume_command(run_id: str, server: str, project: str | None) -> None:
    """Resume a cancelled or failed run: completed tasks are skipped."""
    with client_for(server, project) as client:
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
    with client_for(server, project) as client:
        for count, result in enumerate(client.runs.results(run_id, evaluator=evaluator), start=1):
            click.echo(message_json(result, indent=None))
            if limit is not None and count >= limit:
                break
