"""``evalsi analyze slice METRIC --by FIELD SOURCE...``: a metric's mean and interval per slice of the records."""

from __future__ import annotations

import io
import json
from pathlib import Path

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
from evalsi.reports.content import join_records
from evalsi.reports.markdown import md_text
from evalsi.reports.slices import (
    BUILT_IN_FIELDS,
    SliceTable,
    check_field,
    metadata_dict,
    resolve_metric,
    slice_metric,
)
from evalsi.reports.sources import load_file, load_served, on_server, served_by_id
from evalsi.runs.results import _fmt
from evalsi.v1alpha1.run_pb2 import Run

MAX_SOURCES = 100


@click.group("analyze")
def analyze() -> None:
    """Analyses across the records of one or more results: per-slice statistics."""


@analyze.command("slice")
@click.argument("metric")
@click.argument("sources", nargs=-1, required=True, metavar="SOURCE...")
@click.option("--by", "by", required=True, metavar="FIELD",
              help="What to slice by: a record metadata key (a dotted path into it: topic, meta.lang), or "
                   f"{', '.join(BUILT_IN_FIELDS)} (run: one slice per SOURCE).")
@click.option("--data", metavar="FILE",
              help="The records the runs graded, for their metadata (a saved result holds only the results). "
                   "Default: each run's own dataset file when it is here, unchanged (its version is the run's); on "
                   "a server, the run's records (ListRunRecords). Not needed for evaluator, trial, run, or the "
                   "runs' --cluster-by key.")
@click.option("--map", "mapping", multiple=True, metavar="FIELD=SOURCE",
              help="Field mapping for --data, as `evalsi eval --map` (default: the run's).")
@click.option("--confidence", default=None, type=click.FloatRange(0, 1, min_open=True, max_open=True),
              help="Level of the intervals (default: the first run's, as its summaries have them).")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "md"]), default="table", show_default=True)
@click.option("--server", metavar="URL",
              help="Read the SOURCEs as run ids on this server. Without it, a SOURCE that is not a file here is a run "
                   "id on the default server ($EVALSI_SERVER, else client.server in ./evalsi.yaml).")
@click.option("--project", default=None, metavar="NAME", callback=check_project_flag, help=PROJECT_HELP)
@credential_options
@handle_errors
def slice_command(metric: str, sources: tuple[str, ...], by: str, data: str | None, mapping: tuple[str, ...],
                  confidence: float | None, fmt: str, server: str | None, project: str | None) -> None:
    """A metric's n, mean and interval per slice of the records, across one or more results.

    Each slice's interval is the one the run summaries use, at their level: Wilson for pass/fail, Student-t
    for numbers, cluster-robust over records when a record repeats in a slice (trials, or one record in
    several SOURCEs), the seeded bootstrap when the run asked for it. Records without the key form the
    slice '(missing)'. A key no record has is refused (exit 2) with the keys the records have.

    \b
    Examples:
      evalsi eval --data examples/quickstart/qa.jsonl -e exact-match --output a.json
      evalsi analyze slice exact-match --by topic a.json
      evalsi analyze slice exact-match --by run a.json b.json --format md
      evalsi analyze slice exact-match --by topic RUN_ID --server http://127.0.0.1:8080
    """
    if len(sources) > MAX_SOURCES:
        raise BadInputError(f"SOURCE: {len(sources)} given, at most {MAX_SOURCES}")
    runs, metadata = _load(sources, server, project, by, data, mapping)
    metric = resolve_metric(runs, metric)
    if metadata is not None:
        check_field(by, list(metadata.values()))
    table = slice_metric(runs, metric, by, labels=[run.name or run.id or s for run, s in zip(runs, sources,
                                                                                            strict=True)],
                         metadata=metadata, confidence=confidence)
    click.echo(_render(table, fmt))


def _load(sources: tuple[str, ...], server: str | None, project: str | None, by: str, data: str | None,
          mapping: tuple[str, ...]) -> tuple[list[Run], dict[str, dict[str, object]] | None]:
    """The runs, and their records' metadata by id when ``by`` is a metadata key (None otherwise): from --data, a
    run's own dataset file, or the server's records of the run."""
    if not on_server(sources, server):
        runs = [load_file(source) for source in sources]
        return runs, _metadata(runs, data, mapping) if _needs_metadata(runs, by) else None
    defaults = client_defaults(server, project)
    if not defaults.server:
        missing = [s for s in sources if not Path(s).is_file()]
        raise BadInputError(f"{', '.join(missing)}: no such saved result file here, so a run on a server, and "
                            f"{no_server_message()}")
    with client_for(defaults.server, defaults.project or None) as client, looking_in():
        runs = [load_served(client, source) for source in sources]
        if not _needs_metadata(runs, by):
            return runs, None
        if data is not None:
            return runs, _metadata(runs, data, mapping)
        metadata: dict[str, dict[str, object]] = {}
        for run in runs:
            metadata.update(served_by_id(client, run, metadata_dict))
        return runs, metadata


def _needs_metadata(runs: list[Run], by: str) -> bool:
    """Whether ``by`` is read from the records' metadata: not a built-in field, nor the runs' --cluster-by key
    (which every result carries)."""
    return by not in BUILT_IN_FIELDS and not all(by == run.spec.summary.cluster_by for run in runs)


def _metadata(runs: list[Run], data: str | None, mapping: tuple[str, ...]) -> dict[str, dict[str, object]]:
    """Record id to its metadata, from --data or each run's own dataset file; refused when neither is here."""
    metadata: dict[str, dict[str, object]] = {}
    for run in runs:
        wanted = {result.record_id for result in run.results}
        joined = join_records(run, data, mapping, metadata_dict, wanted)
        if joined is None:
            named = run.manifest.dataset or run.spec.dataset.path or run.spec.dataset.ref
            where = f" ({named} is not here unchanged)" if named else ""
            raise BadInputError(f"--by: slicing by a metadata key needs the records of run {run.id}{where}; give "
                                "them with --data FILE")
        if joined.note:
            warn_on_stderr(joined.note)
        metadata.update(joined.by_id)
    return metadata


def _render(table: SliceTable, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(table.to_dict(), indent=2)
    headers = ["slice", "n", "mean", f"{table.level:.0%} CI", "method"]
    rows = [
        [s.value, str(s.n), _fmt(s.mean), f"[{_fmt(s.low)}, {_fmt(s.high)}]" if s.low is not None else "—",
         s.method + (f" ({s.clusters} clusters)" if s.clusters else "")]
        for s in table.slices
    ]
    if fmt == "md":
        lines = ["| " + " | ".join(headers) + " |", "|---|---:|---:|---:|---|"]
        lines += ["| " + " | ".join([md_text(r[0]), *r[1:]]) + " |" for r in rows]
        return "\n".join(lines)
    from rich.console import Console
    from rich.table import Table

    rich_table = Table(title=f"{table.metric} by {table.by}", title_justify="left", header_style="bold")
    for header in headers:
        rich_table.add_column(header, justify="left" if header in ("slice", "method") else "right")
    for row in rows:
        rich_table.add_row(*row)
    buffer = io.StringIO()
    Console(file=buffer, width=120).print(rich_table)
    return buffer.getvalue().rstrip("\n")
