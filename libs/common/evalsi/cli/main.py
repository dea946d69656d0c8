"""The ``evalsi`` command group."""

from __future__ import annotations

import click

from evalsi.cli.catalog import catalog
from evalsi.cli.compare_cmd import compare_command
from evalsi.cli.eval_cmd import eval_command


@click.group(context_settings={"help_option_names": ["-h", "--help"], "auto_envvar_prefix": "EVALSI"})
@click.version_option(package_name="evalsi")
def cli() -> None:
    """Evals.si: evaluate LLM apps, RAG systems and agents, with confidence intervals.

    Exit codes: 0 ok, 1 internal error, 2 usage or bad input, 3 a gate failed or a regression was found.
    """


cli.add_command(eval_command)
cli.add_command(catalog)
cli.add_command(compare_command)


def main() -> None:
    cli()
