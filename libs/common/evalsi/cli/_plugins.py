"""``--plugins-dir`` for the commands that resolve or run evaluators here: the installed packs plus the evaluators of
the subprocess plugins under that directory (docs/plugins.md). One flag, one environment variable
(``EVALSI_PLUGINS_DIR``, the services' too), the same registry for `evalsi eval`, `evalsi run` and `evalsi catalog`."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import click

if TYPE_CHECKING:
    from evalsi.evaluators import Registry

F = TypeVar("F", bound=Callable[..., object])

PLUGINS_DIR_ENV = "EVALSI_PLUGINS_DIR"  # evalsi.plugins.PLUGINS_DIR_ENV, not imported: grpc loads with it


def plugins_dir_option(what: str) -> Callable[[F], F]:
    """The ``--plugins-dir`` option; ``what`` says what the command does with the plugins' evaluators."""
    return click.option(
        "--plugins-dir",
        type=click.Path(file_okay=False),
        envvar=PLUGINS_DIR_ENV,
        help=f"A directory of subprocess evaluator plugins (<dir>/<plugin>/evalsi-plugin.yaml) whose evaluators "
        f"{what}: each runs in its own virtualenv, built the first time (docs/plugins.md). Env: {PLUGINS_DIR_ENV}.",
    )


def registry_with_plugins(plugins_dir: str | None, stack: contextlib.ExitStack, *, run: bool = True) -> Registry:
    """The installed packs plus the plugins under ``plugins_dir``. With ``run`` the plugins keep running (for the
    evaluations of this command) until ``stack`` closes; without, each is asked what it hosts and stopped."""
    from evalsi.evaluators import Registry

    registry = Registry.from_entry_points()
    if plugins_dir:
        from evalsi.plugins import describe_plugins, load_plugins  # grpc: only for a command given plugins

        if run:
            stack.enter_context(load_plugins(registry, plugins_dir))
        else:
            describe_plugins(registry, plugins_dir)
    return registry
