"""``evalsi run -f run.yaml``: execute a target over a dataset, grade it, print the metrics and the gates."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from evalsi.cli._common import (
    EXIT_GATE_FAILED,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    check_project_flag,
    client_for,
    credential_options,
    handle_errors,
    parse_key_values,
    warn_on_stderr,
)
from evalsi.cli._memory import memory_options
from evalsi.cli._plugins import plugins_dir_option, registry_with_plugins
from evalsi.cli.runs_cmd import describe_run, exit_with, follow, next_steps
from evalsi.client import state_name
from evalsi.documents import apply_overrides
from evalsi.errors import BadInputError
from evalsi.runs.failures import infra_failure
from evalsi.runs.results import EvaluationResults
from evalsi.v1alpha1.run_pb2 import RUN_STATE_BUDGET_EXCEEDED, RUN_STATE_CANCELLED, RUN_STATE_FAILED, Run

if TYPE_CHECKING:
    from evalsi.evaluators import Registry

PASS, FAIL = "✓", "✗"


def _overridden(path: str) -> tuple[str | int, ...]:
    return tuple(int(p) if p.isdigit() else p for p in path.split(".") if p)


def _load(file: str, sets: tuple[str, ...], *, registry: Registry | None = None) -> Any:
    """The spec; for an embedded run (given the ``registry`` it runs with), a spec with malformed fields is also
    checked for every other problem, so one pass lists them all (a server checks its own: its evaluators and
    datasets may differ from these)."""
    from evalsi.runs.spec import eval_run_problems, load_document, parse_eval_run

    document, lines = load_document(file)
    overrides = parse_key_values(sets, "--set")
    if overrides:
        document = apply_overrides(document, overrides)
        for dotted in overrides:  # an overridden value's line is not in the file any more
            prefix = _overridden(dotted)
            lines = {p: n for p, n in lines.items() if p[: len(prefix)] != prefix}
    source = f"{file} (with --set)" if overrides else file
    base_dir = Path(file).resolve().parent

    def everything_else(run: Any) -> list[str]:  # only called when the structure has problems
        assert registry is not None
        return eval_run_problems(run, registry=registry, base_dir=base_dir)

    return parse_eval_run(document, source=source, lines=lines,
                          also_check=everything_else if registry is not None else None)


def _gate_lines(gates: Any, markdown: bool) -> list[str]:
    lines = []
    for gate in gates:
        mark = PASS if gate.passed else FAIL
        if markdown:
            lines.append(f"- {mark} `{gate.expression}`" + (f" — {gate.message}" if gate.message else ""))
        else:
            lines.append(f"  {mark} {gate.expression}" + (f"  ({gate.message})" if gate.message else ""))
    return lines


@click.command("run")
@click.option("--file", "-f", "file", required=True, metavar="FILE", help="The EvalRun spec (YAML or JSON).")
@click.option("--dry-run", is_flag=True, help="Print the plan and projected tokens and cost; call nothing.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Save the full result document (JSON) here.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "md"]),
    default="table",
    show_default=True,
    help="What to print on stdout.",
)
@click.option("--no-cache", is_flag=True, help="Bypass the judge cache (target outputs are never cached).")
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    help="Judge cache directory (default $EVALSI_CACHE_DIR/judge or ~/.cache/evalsi/judge).",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress on stderr (default: when stderr is a terminal); forced on elsewhere, a plain line every 5 s.",
)
@click.option(
    "--allow-errors",
    is_flag=True,
    help="Exit 0 even when a metric's every evaluation is an infrastructure error (else exit 1).",
)
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="PATH=VALUE",
    help="Override a spec field (VALUE is JSON when it parses): --set spec.trials=5 "
    "--set spec.target.model.baseUrl=http://127.0.0.1:8000/v1",
)
@click.option(
    "--server",
    metavar="URL",
    envvar="EVALSI_SERVER",
    help="Run on an Evals.si server (grpc://host:8081 or http://host:8080) instead of embedded.",
)
@click.option("--no-wait", is_flag=True, help="With --server: print the run id and return at once.")
@click.option(
    "--project",
    default=None,
    envvar="EVALSI_PROJECT",
    callback=check_project_flag,
    help="With --server: the project (default: the spec's own, else 'default').",
)
@credential_options
@memory_options
@plugins_dir_option("the spec may name (embedded runs; a server has its own)")
@handle_errors
def run_command(
    file: str,
    dry_run: bool,
    output: str | None,
    fmt: str,
    no_cache: bool,
    cache_dir: str | None,
    progress: bool | None,
    allow_errors: bool,
    sets: tuple[str, ...],
    server: str | None,
    no_wait: bool,
    project: str | None,
    memory_budget: float | None,
    store_dir: str | None,
    plugins_dir: str | None,
) -> None:
    """Run a target over a dataset and grade it (Run): embedded, or on a server with --server.

    Prints n, mean, the confidence interval, skipped and errors per metric, then each gate as ✓ or ✗
    with the values it read. Infrastructure failures (a provider down after retries) are errors counted
    apart, never scores.

    \b
    Examples:
      evalsi run -f examples/runs/qa-outputs.yaml
      evalsi run -f examples/runs/qa-model.yaml --dry-run
      evalsi run -f run.yaml --set spec.trials=5 -o results.json

    Under the table, each evaluator's errors by kind (infra, evaluator) with the first cause.

    Exit codes: 0 every gate passed, 3 a gate failed or the budget was exceeded, 2 bad input or usage (the spec,
    a spec.summary.clusterBy key no record has, a judge evaluator without spec.judges), 1 every target call
    failed, or a metric whose every evaluation is an infrastructure error (nothing was measured, whatever the
    gates say; --allow-errors accepts it), or an internal error, 130 interrupted.
    """
    if server is not None:
        if memory_budget is not None or store_dir is not None:
            raise BadInputError("--memory-budget and --store-dir apply to embedded runs only (without --server)")
        _run_on_server(
            server, project, _load(file, sets), Path(file), dry_run=dry_run, no_wait=no_wait, output=output,
            allow_errors=allow_errors, fmt=fmt,
        )
        return
    if no_wait:
        raise BadInputError("--no-wait applies to server runs only (with --server)")
    from evalsi.runs.dry_run import dry_run_document, dry_run_text
    from evalsi.runs.embedded import dry_run as plan_dry_run
    from evalsi.runs.embedded import execute_run

    with contextlib.ExitStack() as plugins:  # a dry run only asks the plugins what they host
        registry = registry_with_plugins(plugins_dir, plugins, run=not dry_run)
        run = _load(file, sets, registry=registry)
        base_dir = Path(file).resolve().parent
        if dry_run:
            prepared, projection = plan_dry_run(run, base_dir=base_dir, source=file, warn=warn_on_stderr,
                                                registry=registry)
            if fmt == "json":
                document = dry_run_document(prepared.plan, projection, name=run.metadata.name,
                                            project=run.metadata.project)
                click.echo(json.dumps(document, indent=2))
            else:
                click.echo(
                    dry_run_text(
                        prepared.plan, projection, name=run.metadata.name, project=run.metadata.project,
                        dataset=prepared.dataset.source,
                    )
                )
            return
        outcome = asyncio.run(
            execute_run(
                run,
                base_dir=base_dir,
                cache=not no_cache,
                cache_dir=cache_dir,
                progress=sys.stderr.isatty() if progress is None else progress,
                stop_on_interrupt=True,
                source=file,
                memory_budget=memory_budget,
                store_dir=store_dir,
                warn=warn_on_stderr,
                collect_records=False,  # not printed: a run beyond its memory budget never holds them all
                registry=registry,
            )
        )
        with outcome.results as results:
            _print_results(results, output, fmt)
        _exit_for(results.run, allow_errors=allow_errors)


def _print_results(results: EvaluationResults, output: str | None, fmt: str) -> None:
    document = results.run
    if output:
        saved = results.save(output)
        click.echo(f"saved {len(results)} results to {saved}", err=True)
    if fmt == "json":
        results.write_json(sys.stdout)
    elif fmt == "md":
        click.echo(results.table("md"))
        if document.gates:
            click.echo("\n**Gates**\n")
            click.echo("\n".join(_gate_lines(document.gates, markdown=True)))
    else:
        click.echo(results.table("table"))
        if document.gates:
            click.echo("gates:")
            click.echo("\n".join(_gate_lines(document.gates, markdown=False)))


def _exit_for(document: Run, *, allow_errors: bool) -> None:
    """The exit code of a finished run: its state, then a metric that measured nothing, then its gates."""
    failed = [g for g in document.gates if not g.passed]
    code = 0
    if document.state == RUN_STATE_BUDGET_EXCEEDED:
        click.echo(f"budget exceeded: {document.message}", err=True)
        code = EXIT_GATE_FAILED
    elif document.state == RUN_STATE_CANCELLED:
        click.echo(document.message, err=True)
        sys.exit(EXIT_INTERRUPTED)
    elif document.state == RUN_STATE_FAILED:
        click.echo(f"run failed: {document.message}", err=True)
        sys.exit(EXIT_INTERNAL)
    failure = "" if allow_errors else infra_failure(document.summaries)
    if failure:
        click.echo(f"error: {failure}", err=True)
        code = EXIT_INTERNAL
    if failed:
        click.echo(
            f"{len(failed)} of {len(document.gates)} gates failed: " + "; ".join(g.expression for g in failed), err=True
        )
        code = code or EXIT_GATE_FAILED
    if code:
        sys.exit(code)


def _run_on_server(
    server: str, project: str | None, run: Any, file: Path, *, dry_run: bool, no_wait: bool, output: str | None,
    allow_errors: bool, fmt: str = "table",
) -> None:
    """Submit the spec to a server; follow it to its end unless --no-wait, exiting like an embedded run.

    A dataset file next to the spec (or at an absolute path) that exists here is uploaded by ``runs.create`` and
    the run names the stored version, so the server needs no access to this machine's files."""

    if run.spec.dataset.path and not Path(run.spec.dataset.path).is_absolute():
        local = (file.resolve().parent / run.spec.dataset.path).resolve()
        if local.exists():  # relative to the spec file, as embedded; else a path under the server's datasets dir
            run.spec.dataset.path = str(local)
    from evalsi.runs.dry_run import plan_from_struct

    with client_for(server, project) as client:
        handle = client.runs.create(run, dry_run=dry_run)
        if dry_run:  # the plan and projection, as an embedded --dry-run prints them
            if fmt == "json":
                click.echo(json.dumps(plan_from_struct(handle.run.dry_run_plan), indent=2))
            else:
                click.echo(handle.run.message)
            return
        click.echo(
            f"created {handle.id} in project {handle.run.project} ({state_name(handle.run.state)}) on {server}",
            err=True,
        )
        if handle.run.message:  # what the server warned of when it took the run (a cluster key some records lack)
            click.echo(f"warning: {handle.run.message}", err=True)
        # The run lives in its project; commands without that --project would look in another one.
        click.echo("next:\n" + next_steps(handle.id, handle.run.project, server), err=True)
        if no_wait:
            click.echo(handle.id)
            return
        if output:
            finished = handle.wait()
            finished.results.extend(client.runs.results(handle.id, project=finished.project))
            EvaluationResults(finished).save(output)
            click.echo(describe_run(finished))
            exit_with(finished, allow_errors=allow_errors)
        follow(client, handle.id, handle.run.project, allow_errors=allow_errors)
