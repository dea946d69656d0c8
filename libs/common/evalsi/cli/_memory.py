"""The flags of embedded runs that say where their results are kept (``evalsi eval``, ``evalsi run``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def memory_options(command: F) -> F:
    """``--memory-budget MB`` and ``--store-dir DIR`` (``runs.local.run_locally``)."""
    command = click.option(
        "--store-dir",
        type=click.Path(file_okay=False),
        help="Keep the run's records and results in a local store here (SQLite + shards), whatever the budget.",
    )(command)
    return click.option(
        "--memory-budget",
        type=click.FloatRange(min=0),
        metavar="MB",
        help="Past this estimated size (MiB) results go to a temporary SQLite store, read back in pages "
        "[default: $EVALSI_EMBEDDED_MEMORY_MB or 1024].",
    )(command)
