"""``evalsi compare A.json B.json``: the paired comparison of two saved results."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from google.protobuf import json_format

from evalsi.cli._common import (
    EXIT_GATE_FAILED,
    PROJECT_HELP,
    check_project_flag,
    client_for,
    credential_options,
    handle_errors,
    looking_in,
)
from evalsi.client_config import client_defaults, no_server_message
from evalsi.errors import BadInputError
from evalsi.runs.results import EvaluationResults, _fmt
from evalsi.stats.defaults import ADJUSTMENTS, DEFAULT_ADJUSTMENT, DEFAULT_CONFIDENCE

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
    help="Level of the intervals; a metric is significant when its adjusted p is below 1 − this.",
)
@click.option(
    "--adjust",
    type=click.Choice(ADJUSTMENTS),
    default=DEFAULT_ADJUSTMENT,
    show_default=True,
    help="Adjust the p-values across the metrics compared: holm (family-wise error), bh (false discovery rate) "
    "or none. The verdicts and the exit code read the adjusted p.",
)
@click.option("--format", "fmt", type=click.Choice(["table", "json", "md"]), default="table", show_default=True)
@click.option(
    "--server",
    metavar="URL",
    help="Compare two runs on this server (A and B are run ids) instead of two saved files. When A and B are not "
    "both files here, the server defaults to $EVALSI_SERVER, else client.server in ./evalsi.yaml, else in "
    "~/.config/evalsi/config.yaml.",
)
@click.option("--project", default=None, metavar="NAME", callback=check_project_flag, help=PROJECT_HELP)
@credential_options
@handle_errors
def compare_command(a: str, b: str, confidence: float, adjust: str, fmt: str, server: str | None,
                    project: str | None) -> None:
    """Compare result B with result A, record by record: two saved results (`evalsi eval --output`), or
    two runs on a server with --server.

    For each metric both share, one test gives the p-value, the interval and the verdict: McNemar's test with
    Tango's interval for pass/fail metrics, the paired t test for numbers, their cluster-robust form over
    trials. The p-values are adjusted across the metrics (Holm by default), and a metric is better or worse
    only when its adjusted p is below 1 − confidence. Also shown: the minimum detectable effect of that test at
    this size. Exits 3 when a metric got worse.

    \b
    Examples:
      evalsi compare baseline.json candidate.json
      evalsi compare baseline.json candidate.json --adjust bh --format md
      evalsi compare RUN_A RUN_B --server http://127.0.0.1:8080
    """
    on_server = server or not (Path(a).is_file() and Path(b).is_file())
    if on_server:
        defaults = client_defaults(server, project)
        if not defaults.server:
            raise BadInputError(f"{a} and {b} are not both saved result files here, so they would be runs on a "
                                f"server, and {no_server_message()}")
        with client_for(defaults.server, defaults.project or None) as client, looking_in():
            comparison = client.runs.compare(a, b, confidence=confidence, adjust=adjust)
    else:
        from evalsi.runs.compare import compare_runs  # numpy and scipy: only when comparing

        run_a, run_b = EvaluationResults.load(a).run, EvaluationResults.load(b).run
        comparison = compare_runs(run_a, run_b, confidence=confidence, adjust=adjust)
    _render(comparison, fmt, a, b, confidence)
    worse = [m.metric for m in comparison.metrics if m.verdict == "worse"]
    if worse:
        how = "" if comparison.adjust == "none" else f", p adjusted by {comparison.adjust}"
        click.echo(f"regression: {', '.join(worse)} got worse (significant at {1 - confidence:.2g}{how})", err=True)
        sys.exit(EXIT_GATE_FAILED)


def _render(comparison: Comparison, fmt: str, a: str, b: str, confidence: float) -> None:


    if fmt == "json":
        click.echo(json_format.MessageToJson(comparison))
        return
    adjusted = comparison.adjust not in ("", "none")
    headers = ["metric", "pairs", "A", "B", "B − A", f"{confidence:.0%} CI", "test", "p",
               *([f"p ({comparison.adjust})"] if adjusted else []), "MDE", "verdict"]
    rows = []
    for m in comparison.metrics:
        ci = f"[{_fmt(m.ci.low)}, {_fmt(m.ci.high)}]" if m.ci.HasField("low") else "—"
        p_adjusted = [_fmt(m.p_value_adjusted if m.HasField("p_value_adjusted") else None)] if adjusted else []
        rows.append(
            [
                m.metric,
                str(m.n_pairs),
                _fmt(m.mean_a if m.HasField("mean_a") else None),
                _fmt(m.mean_b if m.HasField("mean_b") else None),
                _fmt(m.diff if m.HasField("diff") else None),
                ci,
                m.test or "—",
                _fmt(m.p_value if m.HasField("p_value") else None),
                *p_adjusted,
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
