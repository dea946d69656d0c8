"""``evalsi compare A.json B.json``: the paired comparison of two saved results."""

from __future__ import annotations

import io
import sys
from typing import TYPE_CHECKING

import click
from google.protobuf import json_format

from evalsi.cli._common import EXIT_GATE_FAILED, check_project_flag, handle_errors
from evalsi.client import Client
from evalsi.runs.results import EvaluationResults, _fmt
from evalsi.stats.defaults import DEFAULT_CONFIDENCE

if TYPE_CHECKING:
    from evalsi.v1alpha1.run_pb2 import Comparison


@click.command("compare")
@click.argument("a")
@click.argument("b")
@click.option(
    "--confidence",
    default=DEFAULT_CONFIDENCE,
    show_default=True,
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
)
@click.option("--format", "fmt", type=click.Choice(["table", "json", "md"]), default="table", show_default=True)
@click.option(
    "--server",
    envvar="EVALSI_SERVER",
    metavar="URL",
    help="Compare two runs on this server (A and B are run ids) instead of two saved files.",
)
@click.option("--project", default=None, envvar="EVALSI_PROJECT", callback=check_project_flag)
@handle_errors
def compare_command(a: str, b: str, confidence: float, fmt: str, server: str | None, project: str | None) -> None:
    """Compare result B with result A, record by record: two saved results (`evalsi eval --output`), or
    two runs on a server with --server.

    For each metric both share: the mean difference B − A with its interval (paired t, cluster-robust over
    trials), McNemar's test for pass/fail metrics, the minimum detectable effect at this size, and a
    verdict — better or worse only when the interval excludes zero. Exits 3 when a metric got worse.
    """
    if server:

        with Client(server, project=project) as client:
            comparison = client.runs.compare(a, b, confidence=confidence)
    else:
        from evalsi.runs.compare import compare_runs  # numpy and scipy: only when comparing

        comparison = compare_runs(EvaluationResults.load(a).run, EvaluationResults.load(b).run, confidence=confidence)
    _render(comparison, fmt, a, b, confidence)
    worse = [m.metric for m in comparison.metrics if m.verdict == "worse"]
    if worse:
        click.echo(f"regression: {', '.join(worse)} got worse (the interval excludes no change)", err=True)
        sys.exit(EXIT_GATE_FAILED)


def _render(comparison: Comparison, fmt: str, a: str, b: str, confidence: float) -> None:


    if fmt == "json":
        click.echo(json_format.MessageToJson(comparison))
        return
    headers = ["metric", "pairs", "A", "B", "B − A", f"{confidence:.0%} CI", "p", "MDE", "verdict"]
    rows = []
    for m in comparison.metrics:
        ci = f"[{_fmt(m.ci.low)}, {_fmt(m.ci.high)}]" if m.ci.HasField("low") else "—"
        p = _fmt(m.p_value) + f" ({m.test})" if m.HasField("p_value") else "—"
        rows.append(
            [
                m.metric,
                str(m.n_pairs),
                _fmt(m.mean_a if m.HasField("mean_a") else None),
                _fmt(m.mean_b if m.HasField("mean_b") else None),
                _fmt(m.diff if m.HasField("diff") else None),
                ci,
                p,
                _fmt(m.mde if m.HasField("mde") else None),
                m.verdict,
            ]
        )
    if fmt == "md":
        click.echo("| " + " | ".join(headers) + " |\n|" + "---|" * len(headers))
        click.echo("\n".join("| " + " | ".join(r) + " |" for r in rows))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"B: {b}  vs  A: {a}", title_justify="left", header_style="bold")
    for header in headers:
        table.add_column(header, justify="left" if header in ("metric", "verdict") else "right")
    for row in rows:
        table.add_row(*row)
    buffer = io.StringIO()
    Console(file=buffer, width=140).print(table)
    click.echo(buffer.getvalue().rstrip("\n"))
