"""``evalsi report SOURCE [--compare BASELINE] --format html|md``: a shareable report of a run."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from evalsi.cli._common import (
    PROJECT_HELP,
    check_project_flag,
    client_for,
    credential_options,
    handle_errors,
    looking_in,
    warn_on_stderr,
)
from evalsi.client_config import client_defaults, no_server_message
from evalsi.errors import BadInputError
from evalsi.reports import Report, build_report, render_html, render_markdown
from evalsi.reports.content import join_records
from evalsi.reports.model import RowKey, rows_kept
from evalsi.reports.sources import load_file, load_served, on_server, served_records
from evalsi.stats.defaults import ADJUSTMENTS, DEFAULT_ADJUSTMENT, DEFAULT_CONFIDENCE
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import Run

if TYPE_CHECKING:
    from evalsi.client import Client

MAX_RECORDS_LIMIT = 10_000  # record rows in one HTML file: each text in a row is cut at 4,000 characters


@click.command("report")
@click.argument("source")
@click.option("--compare", "baseline", metavar="BASELINE",
              help="The baseline to compare with (the base branch's run): a saved result, or a run id with --server. "
                   "SOURCE is the candidate; the figures are `evalsi compare BASELINE SOURCE`'s.")
@click.option("--format", "fmt", type=click.Choice(["html", "md"]), default=None,
              help="html: one self-contained file (inline plots, no script, nothing fetched); md: GitHub-flavoured "
                   "Markdown under 65,000 characters, for a pull-request comment. Default: from --output's suffix "
                   "(.html, .htm), else md.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write the report here (default: stdout).")
@click.option("--title", default="", help="The report's title (default: 'Evals.si report: <run name>').")
@click.option("--max-records", default=100, show_default=True, type=click.IntRange(0, MAX_RECORDS_LIMIT),
              help="Record rows in the HTML report (failing records first) and records listed in the Markdown; the "
                   "report says how many were left out.")
@click.option("--data", metavar="FILE",
              help="The records the run graded, to show their input, output and reference (a saved result holds "
                   "only the results). Default: the run's own dataset file when it is here, unchanged (its version "
                   "is the run's); on a server, the run's records as it graded them (ListRunRecords).")
@click.option("--map", "mapping", multiple=True, metavar="FIELD=SOURCE",
              help="Field mapping for --data, as `evalsi eval --map` (default: the run's).")
@click.option("--confidence", default=DEFAULT_CONFIDENCE, show_default=True,
              type=click.FloatRange(0, 1, min_open=True, max_open=True), help="Level of the comparison's intervals.")
@click.option("--adjust", type=click.Choice(ADJUSTMENTS), default=DEFAULT_ADJUSTMENT, show_default=True,
              help="How the comparison adjusts its p-values across the metrics, as `evalsi compare --adjust`.")
@click.option("--server", metavar="URL",
              help="Read SOURCE and BASELINE as run ids on this server (GetRun and ListRunResults). Without it, a "
                   "SOURCE that is not a file here is a run id on the default server ($EVALSI_SERVER, else "
                   "client.server in ./evalsi.yaml, else in ~/.config/evalsi/config.yaml).")
@click.option("--project", default=None, metavar="NAME", callback=check_project_flag, help=PROJECT_HELP)
@credential_options
@handle_errors
def report_command(source: str, baseline: str | None, fmt: str | None, output: str | None, title: str,
                   max_records: int, data: str | None, mapping: tuple[str, ...], confidence: float, adjust: str,
                   server: str | None, project: str | None) -> None:
    """Write a report of a run: metrics with their intervals, gates, budget use, errors and the records; with
    --compare, the paired comparison with the baseline and the records whose outcome flipped.

    SOURCE is a saved result (`evalsi eval|run --output results.json`) or, on a server, a run id. The HTML is
    one file with inline CSS and SVG plots (error bars, a histogram per metric, a forest plot of the
    differences), light and dark, readable offline with no script. The Markdown fits a pull-request comment,
    gates and regressions first.

    The report never gates: exit 0 when written, 2 for bad input (a missing file, an unknown run), whatever
    the gates say. `evalsi run` and `evalsi eval` exit 3 on a failed gate, `evalsi compare` on a regression.

    \b
    Examples:
      evalsi eval --data examples/quickstart/qa.jsonl -e exact-match --output a.json
      evalsi report a.json --format html --output report.html
      evalsi report candidate.json --compare baseline.json --format md > comment.md
      evalsi report RUN_ID --compare BASE_RUN_ID --server http://127.0.0.1:8080 --format html -o report.html
    """
    if fmt is None:
        fmt = "html" if output and Path(output).suffix.lower() in (".html", ".htm") else "md"
    notes: list[str] = []
    run, base, records = _load(source, baseline, server, project, _Records(data, mapping, max_records, notes))
    report: Report = build_report(run, baseline=base, records=records, title=title, max_records=max_records,
                                  confidence=confidence, adjust=adjust, notes=notes)
    text = render_html(report) if fmt == "html" else render_markdown(report)
    if output:
        target = Path(output)
        try:
            target.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise BadInputError(f"--output {output}: cannot write: {exc.strerror}") from None
        click.echo(f"wrote the {fmt} report of {run.id or source} to {target}", err=True)
    else:
        sys.stdout.write(text)


@dataclass
class _Records:
    """Where a report's records come from: --data (with --map), the run's own dataset file, or the server."""

    data: str | None
    mapping: tuple[str, ...]
    max_records: int
    notes: list[str]

    def from_files(self, run: Run) -> dict[RowKey, Record] | None:
        """The records of the rows the report keeps, from --data or the run's own unchanged dataset file; None (and
        a note saying how to add them) when neither is here."""
        keys = rows_kept(run, self.max_records)
        joined = join_records(run, self.data, self.mapping, lambda record: record, {key[0] for key in keys})
        if joined is None:
            named = run.manifest.dataset or run.spec.dataset.path or run.spec.dataset.ref
            self.notes.append(f"The run's dataset{f' ({named})' if named else ''} is not here unchanged, so the "
                              "records' input, output and reference are not shown; give the data with --data.")
            return None
        if joined.note:
            warn_on_stderr(joined.note)
            self.notes.append(joined.note)
        return {key: joined.by_id[key[0]] for key in keys if key[0] in joined.by_id}

    def from_server(self, client: Client, run: Run) -> dict[RowKey, Record]:
        """The records as the server's run graded them (a generating target's outputs too), unless --data names
        the file to read instead."""
        if self.data is not None:
            return self.from_files(run) or {}
        return served_records(client, run, rows_kept(run, self.max_records))


def _load(source: str, baseline: str | None, server: str | None, project: str | None, records: _Records,
          ) -> tuple[Run, Run | None, dict[RowKey, Record] | None]:
    sources = [source] if baseline is None else [source, baseline]
    if not on_server(sources, server):
        run = load_file(source)
        return run, None if baseline is None else load_file(baseline), records.from_files(run)
    defaults = client_defaults(server, project)
    if not defaults.server:
        missing = [s for s in sources if not Path(s).is_file()]
        raise BadInputError(f"{', '.join(missing)}: no such saved result file here, so it would be a run on a "
                            f"server, and {no_server_message()}")
    with client_for(defaults.server, defaults.project or None) as client, looking_in():
        run = load_served(client, source)
        base = None if baseline is None else load_served(client, baseline)
        return run, base, records.from_server(client, run)
