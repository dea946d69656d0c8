"""The ``evalsi`` command group."""

from __future__ import annotations

import click

from evalsi.cli.cases_cmd import cases
from evalsi.cli.catalog import catalog
from evalsi.cli.compare_cmd import compare_command
from evalsi.cli.datasets_cmd import datasets
from evalsi.cli.eval_cmd import eval_command
from evalsi.cli.policies_cmd import policies
from evalsi.cli.run_cmd import run_command
from evalsi.cli.runs_cmd import runs
from evalsi.cli.serve_cmd import serve_command
from evalsi.cli.traces_cmd import traces


@click.group(context_settings={"help_option_names": ["-h", "--help"], "auto_envvar_prefix": "EVALSI"})
@click.version_option(package_name="evalsi")
def cli() -> None:
    """Evals.si: evaluate LLM apps, RAG systems and agents, with confidence intervals.

    Exit codes: 0 ok, 1 internal error, 2 usage or bad input, 3 a gate failed or a regression was found.
    """


cli.add_command(eval_command)
cli.add_command(catalog)
cli.add_command(cases)
cli.add_command(compare_command)
cli.add_command(datasets)
cli.add_command(policies)
cli.add_command(run_command)
cli.add_command(runs)
cli.add_command(serve_command)
cli.add_command(traces)


def main() -> None:
    cli()
