"""``evalsi traces``: list the traces evalsi-ingest stored and read one back as a tree of steps."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import click

from evalsi.cli._common import client_for, handle_errors, looking_in, message_dict, message_json, server_option
from evalsi.errors import BadInputError
from evalsi.v1alpha1.record_pb2 import Step, StepStatus, StepType

if TYPE_CHECKING:
    from evalsi.v1alpha1.trace_service_pb2 import Trace, TraceSummary

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|h|d|w)$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(text: str, now: datetime | None = None, *, flag: str = "--since") -> datetime:
    """``30m``, ``2h``, ``7d`` (that long ago) or an ISO 8601 time (UTC when it names no zone); ``flag`` names
    the option in the error."""
    value = text.strip()
    match = _DURATION.match(value)
    if match:
        return (now or datetime.now(UTC)) - timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise BadInputError(
            f"{flag} {text!r}: expected a duration such as 30m, 2h or 7d, or an ISO time such as 2025-01-31T12:00"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _time(summary: TraceSummary) -> str:
    if not summary.start_time.seconds and not summary.start_time.nanos:
        return ""
    return summary.start_time.ToDatetime(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _duration(summary: TraceSummary) -> str:
    return f"{summary.duration.ToNanoseconds() / 1e9:.2f}s"


def step_line(step: Step) -> str:
    """One step as a person reads it: type, name, then model, tokens, tool and status where they exist."""

    kind = StepType.Name(step.type).removeprefix("STEP_TYPE_").lower() if step.type in StepType.values() else "?"
    parts = [f"{kind:<9}", step.name or "(unnamed)"]
    if step.model:
        parts.append(f"model={step.model}")
    if step.HasField("usage") and (step.usage.input_tokens or step.usage.output_tokens):
        parts.append(f"tokens={step.usage.input_tokens}/{step.usage.output_tokens}")
    if step.HasField("tool_call") and step.tool_call.name:
        parts.append(f"tool={step.tool_call.name}")
    if step.status:
        parts.append(f"[{StepStatus.Name(step.status).removeprefix('STEP_STATUS_').lower()}]")
    if step.error:
        parts.append(f"error={step.error!r}")
    if step.HasField("duration"):
        parts.append(f"{step.duration.ToNanoseconds() / 1e6:.0f}ms")
    return "  ".join(parts)


def render_tree(trace: Trace) -> str:
    summary = trace.summary
    lines = [
        f"trace {summary.trace_id}  project {summary.project}  service {summary.service_name or '-'}",
        f"{_time(summary)}  {_duration(summary)}  {summary.span_count} spans, {summary.error_count} errors, "
        f"tokens {summary.input_tokens}/{summary.output_tokens}"
        + (f", session {summary.session_id}" if summary.session_id else "")
        + ("" if summary.HasField("complete_time") else "  (not complete yet)"),
    ]
    steps = trace.record.trajectory.steps
    for node in trace.tree:
        prefix = "  " * node.depth + ("└─ " if node.depth else "")
        orphan = "  (parent missing)" if node.orphan else ""
        lines.append(prefix + step_line(steps[node.step_index]) + orphan)
    return "\n".join(lines)


@click.group("traces")
def traces() -> None:
    """Traces received by evalsi-ingest: list, get, and late feedback (the server needs --traces-url)."""


@traces.command("list")
@server_option
@click.option("--service", default="", help="Only traces of this service.name.")
@click.option("--since", default=None, metavar="WHEN", help="Only traces that started since: 30m, 2h, 7d or ISO time.")
@click.option("--errors-only", is_flag=True, help="Only traces with a failed span.")
@click.option("--score", "score_metric", default="", metavar="METRIC",
              help="Only traces with an online score of this metric (with --min/--max: within them).")
@click.option("--min", "min_score", type=float, default=None, help="With --score: the lowest value kept.")
@click.option("--max", "max_score", type=float, default=None, help="With --score: the highest value kept.")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE",
              help="Only traces with this label (OTLP resource attribute evalsi.label.KEY); repeat for several.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=1))
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@handle_errors
def list_command(
    server: str, project: str | None, service: str, since: str | None, errors_only: bool, score_metric: str,
    min_score: float | None, max_score: float | None, labels: tuple[str, ...], limit: int, fmt: str
) -> None:
    """The project's traces, newest first (`--score judge --max 0.5`: those a policy scored low)."""
    start = parse_since(since) if since else None
    found: list[TraceSummary] = []
    with client_for(server, project) as client, looking_in():
        for summary in client.traces.list(
            service=service, since=start, has_error=True if errors_only else None, page_size=min(limit, 500),
            score_metric=score_metric, min_score=min_score, max_score=max_score, labels=labels,
        ):
            found.append(summary)
            if len(found) >= limit:
                break
    if fmt == "json":
        click.echo(json.dumps([message_dict(t) for t in found], indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(header_style="bold")
    for column in ("trace id", "started", "root", "service", "spans", "errors", "tokens in/out", "duration"):
        table.add_column(column)
    for t in found:
        table.add_row(
            t.trace_id, _time(t), t.root_name or "(no root yet)", t.service_name, str(t.span_count),
            str(t.error_count), f"{t.input_tokens}/{t.output_tokens}", _duration(t),
        )
    Console(width=160).print(table)
    if not found:
        click.echo("no traces", err=True)


@traces.command("get")
@click.argument("trace_id")
@server_option
@click.option("--format", "fmt", type=click.Choice(["tree", "json"]), default="tree", show_default=True)
@handle_errors
def get_command(trace_id: str, server: str, project: str | None, fmt: str) -> None:
    """One trace: its steps as a tree (type, name, model, tokens, tool, status), or the whole Trace as JSON."""
    with client_for(server, project) as client, looking_in():
        trace = client.traces.get(trace_id)
    if fmt == "json":
        click.echo(message_json(trace, indent=2))
        return
    click.echo(render_tree(trace))
    for score in trace.scores:
        value = f"{score.value:.4g}" if score.HasField("value") else score.label or "-"
        why = f"  ({score.reason})" if score.reason and score.outcome != "scored" else ""
        click.echo(f"score  {score.policy}/{score.metric}: {score.outcome} {value}{why}")
    for item in trace.feedback:
        value = f"{item.value:g}" if item.HasField("value") else item.label
        click.echo(f"feedback  {item.name} = {value}{' (negative)' if item.negative else ''}"
                   f"{f' from {item.source}' if item.source else ''}{f': {item.comment}' if item.comment else ''}")


@traces.command("feedback")
@click.argument("trace_id", required=False, default="")
@server_option
@click.option("--session", "session_id", default="", help="Join to every trace of this session instead.")
@click.option("--name", required=True, help="What the signal is: thumbs, rating, label, resolved, ...")
@click.option("--value", type=float, default=None, help="A number; below zero counts as negative.")
@click.option("--label", default="", help="A label instead of (or besides) a value.")
@click.option("--comment", default="")
@click.option("--source", default="", help="Who sent it: user, support, reviewer:ana, ...")
@click.option("--negative", is_flag=True, help="Mark it negative (what the feedback.negative always-rule reads).")
@handle_errors
def feedback_command(trace_id: str, server: str, project: str | None, session_id: str, name: str,
                     value: float | None, label: str, comment: str, source: str, negative: bool) -> None:
    """Join a late signal (a thumbs-down, a label) to a trace or a session; negative feedback re-triggers the
    policies on a completed trace."""
    with client_for(server, project) as client, looking_in():
        stored = client.traces.feedback(trace_id=trace_id, session_id=session_id, name=name, value=value,
                                        label=label, comment=comment, source=source, negative=negative)
    click.echo(f"feedback {stored.id} stored{' (negative)' if stored.negative else ''}")
