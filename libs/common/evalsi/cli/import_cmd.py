"""``evalsi import``: other frameworks' results as record files that ``evalsi eval`` grades (docs/adapters.md)."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import click

from evalsi.adapters.lm_eval import find_run, import_samples
from evalsi.cli._common import handle_errors
from evalsi.errors import BadInputError

INSPECT_EXTRA = "pip install 'evalsi[inspect]'"


@click.group("import")
def import_group() -> None:
    """Import another framework's results as a record file (JSONL) for `evalsi eval` and `evalsi compare`."""


@import_group.command("inspect")
@click.argument("log", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", "-o", "out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the records here (JSONL; replaced only once the whole log was read). Default: stdout.")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="Import only the first N records (each epoch of a sample is one).")
@handle_errors
def inspect_command(log: Path, out: Path | None, limit: int | None) -> None:
    """Import an Inspect AI log (LOG.eval or LOG.json) as records, one per sample and epoch.

    Each sample becomes a record: input (the messages the model was given), output (its completion, or its
    messages when it called tools, with a trajectory of its tool calls), reference (the target; several targets
    mean "any of these"), usage (tokens, cost, working time) and metadata (the sample's own, plus inspect.task,
    inspect.model, inspect.epoch and Inspect's scores as inspect.<scorer>). A sample's epochs are its trials, so
    pass@k applies. A damaged log is refused (exit 2) and nothing is written. Needs inspect_ai (pip install
    'evalsi[inspect]'). docs/adapters.md. Then:

    \b
      evalsi import inspect logs/run.eval -o run.jsonl
      evalsi eval --data run.jsonl -e exact-match
    """
    try:
        from evalsi.adapters.inspect import import_log  # inspect_ai is optional and heavy: loaded for this only
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "inspect_ai":
            raise BadInputError(f"evalsi import inspect reads logs with inspect_ai, which is not installed: "
                                f"{INSPECT_EXTRA}") from None
        raise
    if out is not None and not out.parent.is_dir():
        raise BadInputError(f"--out {out}: the directory {out.parent} does not exist")
    if out is None:
        summary = import_log(log, sys.stdout, limit=limit)
    else:
        with _replacing(out) as stream:
            summary = import_log(log, stream, limit=limit)
    header = summary.header
    where = str(out) if out is not None else "stdout"
    click.echo(
        f"imported {summary.records} records from {header.path} (task {header.task}, model {header.model}, "
        f"{header.samples} samples x {header.epochs} epochs) to {where}",
        err=True,
    )
    if header.status != "success":
        click.echo(f"note: the log's status is {header.status}: imported the samples it holds", err=True)
    if summary.halted:
        click.echo(f"note: {summary.halted} samples stopped on an error or a limit (metadata inspect.error, "
                   "inspect.limit); evaluators needing an output skip those without one", err=True)


@import_group.command("lm-eval")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--out", "-o", "out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the records here (JSONL; replaced only once every sample was read). Default: stdout.")
@click.option("--task", default="", help="Import only this task's samples (a run that evaluated several).")
@click.option("--filter", "filter_name", default="",
              help="The filter whose responses to import, for a task that logs several (lm-eval's `filter` key).")
@click.option("--usage", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="The usage_log of `--model evalsi`: each record gets its model call's tokens, cost and latency.")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="Import only the first N records (each repeat of a document is one).")
@handle_errors
def lm_eval_command(path: Path, out: Path | None, task: str, filter_name: str, usage: Path | None,
                    limit: int | None) -> None:
    """Import lm-evaluation-harness sample logs (`lm_eval --log_samples`) as records, one per document and repeat.

    PATH is a samples_<task>_<date>.jsonl file, or the --output_path directory lm-eval wrote (its latest run: the
    results_<date>.json and the samples files of that date). Each logged sample becomes a record: id (its doc_id;
    <task>/<doc_id> when the run has several tasks), input (the prompt), output (what lm-eval scored: the filtered
    response; for a multiple-choice task the most likely choice), reference (the target) and metadata (the doc's
    fields, lm_eval.task, lm_eval.model and lm-eval's per-sample metrics as lm_eval.<metric>). A task's repeats are
    trials, so pass@k applies. Needs no lm-eval installed; a bad line is refused (exit 2) naming the file and line,
    and nothing is written. docs/adapters.md. Then:

    \b
      evalsi import lm-eval out/my-model -o run.jsonl
      evalsi eval --data run.jsonl -e exact-match
    """
    if out is not None and not out.parent.is_dir():
        raise BadInputError(f"--out {out}: the directory {out.parent} does not exist")
    run = find_run(path, task=task)
    if out is None:
        summary = import_samples(run, sys.stdout, limit=limit, usage=usage, filter_name=filter_name)
    else:
        with _replacing(out) as stream:
            summary = import_samples(run, stream, limit=limit, usage=usage, filter_name=filter_name)
    tasks = ", ".join(f.task for f in run.files)
    model = f", model {run.model}" if run.model else ""
    where = str(out) if out is not None else "stdout"
    click.echo(f"imported {summary.records} records ({summary.samples} samples) of {tasks}{model} to {where}",
               err=True)
    if usage is not None:
        click.echo(f"usage: {summary.with_usage} of {summary.records} records matched a call in {usage}", err=True)


@contextmanager
def _replacing(path: Path) -> Iterator[IO[str]]:
    """A temporary file beside ``path`` that replaces it once written whole and is removed otherwise, so a log
    refused halfway never leaves half a record file behind."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            yield stream
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
