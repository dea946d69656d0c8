"""Running the ``evalsi`` CLI in-process for the report tests, as a user's shell would (exit code, stdout, stderr)."""

from __future__ import annotations

from dataclasses import dataclass

from click.testing import CliRunner

from evalsi.cli.main import cli


@dataclass(frozen=True)
class Done:
    returncode: int
    stdout: str
    stderr: str


def evalsi(*args: str) -> Done:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return Done(result.exit_code, result.stdout, result.stderr)
