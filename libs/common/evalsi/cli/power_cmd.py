"""``evalsi power``: how many records a comparison needs to detect a difference, per metric."""

from __future__ import annotations

import io
import json
import math
from typing import TYPE_CHECKING

import click

from evalsi.cli._common import handle_errors
from evalsi.errors import BadInputError
from evalsi.runs.results import EvaluationResults, _fmt
from evalsi.stats.defaults import DEFAULT_CONFIDENCE

if TYPE_CHECKING:
    from evalsi.runs.power import MetricPower


@click.command("power")
@click.argument("results", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option("--diff", type=float, required=True, help="The difference B − A to detect, in the metric's units.")
@click.option("--power", "power", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.8,
              show_default=True, help="Probability of detecting it when it is there.")
@click.option("--confidence", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=DEFAULT_CONFIDENCE,
              show_default=True, help="The comparison's level; it tests at alpha = 1 − this.")
@click.option("--metrics", "family", type=click.IntRange(min=1), default=1, show_default=True,
              help="Metrics compared at once under Holm (evalsi compare's default): each is sized at alpha / N, "
              "Holm's strictest step.")
@click.option("--kind", type=click.Choice(["pass-fail", "number"]),
              help="Without results: the kind of metric (pass-fail sizes McNemar's test, number the paired t).")
@click.option("--discordance", type=click.FloatRange(0, 1, min_open=True),
              help="Without results, pass-fail: the share of records whose outcome differs between A and B.")
@click.option("--rate", type=click.FloatRange(0, 1, min_open=True, max_open=True),
              help="Without results, pass-fail: A's pass rate; the discordance is then taken as 2·rate·(1 − rate), "
              "as if B were independent of A (an upper bound for most pairs of runs).")
@click.option("--sd", type=click.FloatRange(0, min_open=True),
              help="Without results, number: the standard deviation of the per-record differences B − A.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@handle_errors
def power_command(results: tuple[str, ...], diff: float, power: float, confidence: float, family: int,
                  kind: str | None, discordance: float | None, rate: float | None, sd: float | None,
                  fmt: str) -> None:
    """How many records a comparison needs to detect a difference of --diff, per metric, for the test `evalsi
    compare` uses on it (McNemar's for pass/fail, the paired t for numbers), and the minimum detectable effect
    at the size a result already has.

    With one saved result the spread of a future comparison is assumed from it; with two (A and B) it is
    measured on their pairs; with none, give --kind and its spread.

    \b
    Examples:
      evalsi power baseline.json --diff 0.05
      evalsi power baseline.json candidate.json --diff 0.05 --metrics 3
      evalsi power --kind pass-fail --discordance 0.2 --diff 0.05
      evalsi power --kind number --sd 0.3 --diff 0.1
    """
    if diff == 0.0 or not math.isfinite(diff):
        raise BadInputError(f"--diff: {diff:g} cannot be detected; give the smallest non-zero difference that "
                            "matters, such as 0.05")
    if kind == "pass-fail" and abs(diff) > 1.0:
        raise BadInputError(f"--diff: {diff:g} is beyond what a pass rate can move (at most 1)")
    alpha = (1.0 - confidence) / family
    from evalsi.runs.power import MetricPower, plan, size_metrics  # numpy and scipy: only when sizing

    if len(results) > 2:
        raise BadInputError(f"RESULTS: give at most two saved results (A and B), got {len(results)}")
    if results:
        if kind or discordance or rate or sd:
            raise BadInputError("--kind, --discordance, --rate and --sd describe a metric without results; "
                                "with RESULTS the spread comes from them")
        runs = [EvaluationResults.load(path).run for path in results]
        rows = size_metrics(runs[0], runs[1] if len(runs) == 2 else None, diff, alpha=alpha, power=power)
    else:
        test, spread = _assumed_spread(kind, discordance, rate, sd)
        rows = [MetricPower("(given)", test, spread, False, 0, None,
                            plan(diff, test=test, spread=spread, alpha=alpha, power=power))]
    if fmt == "json":
        click.echo(json.dumps({"diff": diff, "power": power, "alpha": alpha,
                               "metrics": [row.to_dict() for row in rows]}, indent=2))
        return
    _table(rows, diff, power, alpha)


def _assumed_spread(kind: str | None, discordance: float | None, rate: float | None,
                    sd: float | None) -> tuple[str, float]:
    if kind is None:
        raise BadInputError("give saved RESULTS to size from, or --kind pass-fail|number with its spread")
    if kind == "pass-fail":
        if sd is not None or (discordance is None) == (rate is None):
            raise BadInputError("--kind pass-fail: give one of --discordance or --rate (not --sd)")
        if discordance is not None:
            return "mcnemar", discordance
        assert rate is not None
        return "mcnemar", 2.0 * rate * (1.0 - rate)
    if sd is None or discordance is not None or rate is not None:
        raise BadInputError("--kind number: give --sd, the standard deviation of the per-record differences")
    return "paired-t", sd


def _table(rows: list[MetricPower], diff: float, power: float, alpha: float) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"records to detect B − A = {diff:g} with power {power:g} at alpha {alpha:.3g}",
                  title_justify="left", header_style="bold")
    for header in ("metric", "test", "spread", "records now", "MDE now", f"records for {diff:g}"):
        table.add_column(header, justify="left" if header in ("metric", "test", "spread") else "right")
    for row in rows:
        what = "discordant share" if row.test == "mcnemar" else "sd of differences"
        how = "measured" if row.measured else "assumed"
        spread = "—" if row.spread is None else f"{what} {_fmt(row.spread)} ({how})"
        needed = "—" if row.needed is None else f"{row.needed:,}"
        table.add_row(row.metric, row.test, spread, str(row.records) if row.records else "—",
                      _fmt(row.mde), needed)
    buffer = io.StringIO()
    Console(file=buffer, width=140).print(table)
    click.echo(buffer.getvalue().rstrip("\n"))
