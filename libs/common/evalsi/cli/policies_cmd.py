"""``evalsi policies``: apply, list, read and delete online policies on a server, and read their statistics and the
alerts they fired."""

from __future__ import annotations

import itertools
import json
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING

import click
import yaml

from evalsi.cli._common import client_for, handle_errors, looking_in, message_dict, message_json, server_option
from evalsi.cli.traces_cmd import parse_since
from evalsi.v1alpha1.monitor_service_pb2 import (
    ALERT_DELIVERY_DELIVERED,
    ALERT_DELIVERY_FAILED,
    ALERT_DELIVERY_NOT_SENT,
)

if TYPE_CHECKING:
    from google.protobuf.timestamp_pb2 import Timestamp

    from evalsi.v1alpha1.monitor_service_pb2 import FiredAlert, MetricStats, Policy, PolicyStats


def _time(stamp: Timestamp) -> str:
    if not stamp.seconds and not stamp.nanos:
        return ""
    return stamp.ToDatetime(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _seconds(seconds: float) -> str:
    """A window length as people write it in a spec: 5m, 1h, 90s."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size:.0f}{unit}"
    return f"{seconds:g}s"


def apply_line(policy: Policy, *, dry_run: bool) -> str:
    """What an apply did, as kubectl says it: created, configured or unchanged."""
    if not policy.changed:
        outcome = "unchanged"
    elif policy.generation == 1:
        outcome = "created"
    else:
        outcome = "configured"
    suffix = " (dry run: nothing stored)" if dry_run else ""
    return f"policy {policy.name} (project {policy.project}): {outcome}, generation {policy.generation}{suffix}"


def _figure(value: float, present: bool) -> str:
    return f"{value:.3f}" if present else "-"


def _metric_row(metric: MetricStats) -> list[str]:
    interval = "-"
    if metric.HasField("ci_low") and metric.HasField("ci_high"):
        interval = f"[{metric.ci_low:.3f}, {metric.ci_high:.3f}] {metric.method}"
    skipped = str(metric.skipped) + (f" ({metric.no_content} no content)" if metric.no_content else "")
    return [
        metric.metric, "pass/fail" if metric.pass_fail else "number", str(metric.n),
        _figure(metric.mean, metric.HasField("mean")), interval, skipped, str(metric.errors),
    ]


def render_stats(stats: PolicyStats) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=160)
    start = _time(stats.start_time) or "the first score"
    end = _time(stats.end_time) or "now"
    console.print(
        f"policy {stats.name} (project {stats.project}), generation {stats.generation} · window "
        f"{_seconds(stats.window.ToNanoseconds() / 1e9)} · {start} to {end} · "
        f"{stats.traces_evaluated} traces evaluated",
        highlight=False,
    )
    columns = ("metric", "kind", "n", "mean", "95% interval", "skipped", "errors")

    def table(title: str | None, metrics: list[MetricStats]) -> Table:
        out = Table(title=title, header_style="bold", title_justify="left")
        for column in columns:
            out.add_column(column)
        for metric in metrics:
            out.add_row(*_metric_row(metric))
        return out

    if not stats.metrics:
        console.print("no scores stored for this policy in this range", highlight=False)
        return
    console.print(table(None, list(stats.metrics)))
    for window in stats.windows:
        title = f"window {_time(window.start_time)} · {window.traces_evaluated} traces"
        console.print(table(title, list(window.metrics)))
        # A rule that holds over the window's figures was fired in it (docs/policies.md says what is not shown).
        for alert in window.alerts:
            if alert.held:
                console.print(f"alert fired: {alert.when} ({alert.reason})", highlight=False, markup=False)


@click.group("policies")
def policies() -> None:
    """Online policies on a server: apply, list, get, stats, alerts, delete."""


@policies.command("apply")
@click.option("-f", "--file", "path", required=True, type=click.Path(path_type=Path), help="The policy YAML.")
@server_option
@click.option("--dry-run", is_flag=True, help="Validate on the server and say what would change; store nothing.")
@handle_errors
def apply_command(path: Path, server: str, project: str | None, dry_run: bool) -> None:
    """Create or replace a policy by its name; the generation grows only when the spec changed."""
    from evalsi.policy import load_policy

    document = load_policy(path)  # errors name the file, line and field before anything is sent
    with client_for(server, project) as client, looking_in():
        policy = client.policies.apply(document, dry_run=dry_run)
    click.echo(apply_line(policy, dry_run=dry_run))


@policies.command("list")
@server_option
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@handle_errors
def list_command(server: str, project: str | None, fmt: str) -> None:
    """The project's policies by name."""
    with client_for(server, project) as client, looking_in():
        found = list(client.policies.list())
    if fmt == "json":
        click.echo(json.dumps([message_dict(p) for p in found], indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(header_style="bold")
    for column in ("name", "generation", "cascade", "sampling", "window", "alerts", "updated"):
        table.add_column(column)
    for p in found:
        spec = p.policy.spec
        window = _seconds(spec.window.ToNanoseconds() / 1e9) if spec.HasField("window") else "5m"
        table.add_row(
            p.name, str(p.generation), " → ".join(stage.alias or stage.ref for stage in spec.cascade),
            f"{spec.sampling.rate:g}" + (f" + {len(spec.sampling.always)} always" if spec.sampling.always else ""),
            window, str(len(spec.alerts)), _time(p.update_time),
        )
    Console(width=160).print(table)
    if not found:
        click.echo("no policies", err=True)


@policies.command("get")
@click.argument("name")
@server_option
@click.option("--format", "fmt", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True)
@handle_errors
def get_command(name: str, server: str, project: str | None, fmt: str) -> None:
    """The policy as stored: YAML that `evalsi policies apply -f` takes back, or the whole Policy as JSON."""
    with client_for(server, project) as client, looking_in():
        policy = client.policies.get(name)
    if fmt == "json":
        click.echo(message_json(policy, indent=2))
        return
    click.echo(f"# generation {policy.generation}, updated {_time(policy.update_time)} UTC")
    click.echo(yaml.safe_dump(message_dict(policy.policy), sort_keys=False), nl=False)


@policies.command("stats")
@click.argument("name")
@server_option
@click.option("--windows", type=click.IntRange(min=1), help="The last N windows, each shown apart too.")
@click.option("--since", default=None, metavar="WHEN", help="Scores since: 30m, 2h, 7d or an ISO time.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@handle_errors
def stats_command(
    name: str, server: str, project: str | None, windows: int | None, since: str | None, fmt: str
) -> None:
    """Per metric: n, mean, a 95% interval, skipped (of which no content) and errors; by window with --windows."""
    if windows and since:
        raise click.UsageError("give --windows or --since, not both")
    with client_for(server, project) as client, looking_in():
        stats = client.policies.stats(
            name, since=parse_since(since) if since else None, last_windows=windows or 0, per_window=bool(windows)
        )
    if fmt == "json":
        click.echo(message_json(stats, indent=2))
        return
    render_stats(stats)


_DELIVERY_WORDS = {ALERT_DELIVERY_DELIVERED: "delivered", ALERT_DELIVERY_FAILED: "failed",
                   ALERT_DELIVERY_NOT_SENT: "not sent"}


def delivery_text(alert: FiredAlert) -> str:
    """What became of an alert's webhook, in words: ``delivered (HTTP 204)``, ``failed (HTTP 500) after 5
    attempts``, ``not sent (<why>)``."""
    word = _DELIVERY_WORDS.get(alert.delivery, "unknown")
    detail = alert.error or (f"HTTP {alert.http_status}" if alert.http_status else "")
    text = f"{word} ({detail})" if detail else word
    return text + (f" after {alert.attempts} attempts" if alert.attempts > 1 else "")


def _figures(alert: FiredAlert) -> str:
    return ", ".join(f"{key} = {value:.4g}" for key, value in sorted(alert.values.items()))


@policies.command("alerts")
@click.argument("name")
@server_option
@click.option("--limit", type=click.IntRange(min=1, max=10_000), default=50, show_default=True,
              help="At most this many alerts, newest window first.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@handle_errors
def alerts_command(name: str, server: str, project: str | None, limit: int, fmt: str) -> None:
    """The alerts evalsi-policy fired for a policy, newest window first: the rule, its window, the figures it read,
    when it fired and what became of the webhook (delivered, failed with the HTTP status or error, or not sent and
    why). Recorded by evalsi-policy when it has a metadata store (evalsi serve gives it one)."""
    with client_for(server, project) as client, looking_in():
        found = list(itertools.islice(client.policies.alerts(name, page_size=min(limit, 500)), limit))
    if fmt == "json":
        click.echo(json.dumps([message_dict(a) for a in found], indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(header_style="bold")
    for column in ("window start", "rule", "figures", "fired", "webhook"):
        table.add_column(column)
    for alert in found:
        table.add_row(_time(alert.window_start_time), alert.when, _figures(alert), _time(alert.fire_time),
                      delivery_text(alert))
    Console(width=160).print(table)
    if not found:
        click.echo(f"no alert fired for policy {name}", err=True)


@policies.command("delete")
@click.argument("name")
@server_option
@handle_errors
def delete_command(name: str, server: str, project: str | None) -> None:
    """Remove a policy; the scores it stored stay with their traces."""
    with client_for(server, project) as client, looking_in():
        policy = client.policies.delete(name)
    click.echo(f"policy {policy.name} (project {policy.project}) deleted; it was at generation {policy.generation}")
