"""The root CLI group imports a command's module only when that command is used (evalsi.cli.lazy_group), while
`evalsi --help` still lists every command with the short help the command itself declares."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from evalsi.cli.lazy_group import LazyCommand, LazyGroup
from evalsi.cli.main import COMMANDS, cli

_LOADED_CLI_MODULES = """
import json, sys
sys.argv = {argv!r}
try:
    from evalsi.cli.main import main
    main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith("evalsi.cli."))))
"""


def cli_modules_loaded(argv: list[str]) -> set[str]:
    probe = _LOADED_CLI_MODULES.format(argv=argv)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_root_help_imports_no_command_module() -> None:
    assert cli_modules_loaded(["evalsi", "--help"]) == {"evalsi.cli.main", "evalsi.cli.lazy_group"}


def test_a_command_imports_its_own_module_only() -> None:
    loaded = cli_modules_loaded(["evalsi", "runs", "--help"])
    assert "evalsi.cli.runs_cmd" in loaded
    assert not loaded & {"evalsi.cli.cases_cmd", "evalsi.cli.serve_cmd", "evalsi.cli.policies_cmd"}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_table_names_each_command_with_its_own_short_help(name: str) -> None:
    command = cli.get_command(click.Context(cli), name)
    assert command is not None and command.name == name
    assert COMMANDS[name].short_help == command.get_short_help_str(limit=1000)


def test_the_root_help_lists_every_command_as_click_would() -> None:
    lazily = CliRunner().invoke(cli, ["--help"], terminal_width=100)
    loaded = click.Group("evalsi", commands=[COMMANDS[n].load(n) for n in COMMANDS], help=cli.help,
                         context_settings=cli.context_settings)
    loaded.params = cli.params
    eagerly = CliRunner().invoke(loaded, ["--help"], terminal_width=100)
    assert lazily.exit_code == eagerly.exit_code == 0
    section = lazily.output[lazily.output.index("Commands:"):]
    assert section == eagerly.output[eagerly.output.index("Commands:"):]
    assert [line.split()[0] for line in section.splitlines()[1:]] == sorted(COMMANDS)


def test_a_table_entry_that_is_not_its_command_is_refused() -> None:
    group = LazyGroup(name="g", lazy={"list": LazyCommand("evalsi.cli.runs_cmd:runs", "Wrong.")})
    with pytest.raises(TypeError, match=r"evalsi.cli.runs_cmd:runs is not the click command 'list'"):
        group.get_command(click.Context(group), "list")
    assert group.get_command(click.Context(group), "nope") is None
