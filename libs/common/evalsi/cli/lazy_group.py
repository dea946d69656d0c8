"""A click group whose commands are imported on first use, so ``evalsi --help`` loads no command module.

Each command is named by ``"module:attribute"`` beside its short help: the group's own help lists every command
from that table, and a command's module is imported only when the command is run, completed or asked for help.
That leaves each command module free to import what it needs at its top.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import import_module
from typing import Any

import click


@dataclass(frozen=True)
class LazyCommand:
    """Where a command is defined (``"package.module:attribute"``) and the short help the group lists for it."""

    target: str
    short_help: str

    def load(self, name: str) -> click.Command:
        module, _, attribute = self.target.partition(":")
        command = getattr(import_module(module), attribute)
        if not isinstance(command, click.Command) or command.name != name:
            raise TypeError(f"{self.target} is not the click command {name!r}")
        return command


class LazyGroup(click.Group):
    """A ``click.Group`` over a table of command name -> ``LazyCommand``."""

    def __init__(self, *, lazy: Mapping[str, LazyCommand], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lazy = dict(lazy)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            self.add_command(self.lazy[cmd_name].load(cmd_name))
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their short help, as click lists them, from the table for those not yet loaded."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max((len(name) for name in names), default=0)
        rows = []
        for name in names:
            command = self.commands.get(name)
            if command is None:
                # Shortened exactly as click shortens a loaded command's help.
                rows.append((name, click.Command(name, help=self.lazy[name].short_help).get_short_help_str(limit)))
            elif not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
