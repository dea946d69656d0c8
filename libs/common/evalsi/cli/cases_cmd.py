"""``evalsi cases``: replay agent cases against a deployment and grade them (docs/cases.md)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import click

from evalsi.cli._common import EXIT_BAD_INPUT, handle_errors
from evalsi.errors import BadInputError

NOT_BUILT = (
    "Not built yet: judge panels (a rubric'd case reads judge_pending and never passes), --pairwise references, "
    "simulated users (persona cases are skipped), baselines and the gate, --mode perf, the case store."
)


@click.group("cases")
def cases() -> None:
    """Agent cases: conversations replayed against an agent, graded deterministically (docs/cases.md)."""


@cases.command("validate")
@click.option("--source", required=True, type=click.Path(), help="A case YAML file or a directory of them.")
@handle_errors
def validate_command(source: str) -> None:
    """Load every case under --source and list the broken ones with file, line and field. Exit 2 if any."""
    from evalsi.cases import BrokenCase, load_cases

    items = load_cases(source)
    broken = [item for item in items if isinstance(item, BrokenCase)]
    for item in broken:
        click.echo(f"broken: {item.error}")
    click.echo(f"{len(items)} case(s): {len(items) - len(broken)} valid, {len(broken)} broken")
    if broken:
        sys.exit(EXIT_BAD_INPUT)


@cases.command("run", epilog=NOT_BUILT)
@click.option("--source", required=True, type=click.Path(), help="A case YAML file or a directory of them.")
@click.option("--agent-url", metavar="URL", help="A deployment speaking docs/agent-protocol.md.")
@click.option("--agent-callable", metavar="MODULE:ATTR", help="An agent in this process (docs/agent-protocol.md).")
@click.option("--agent-token", envvar="EVALSI_AGENT_TOKEN", help="Bearer token for --agent-url.")
@click.option("--agent", "agent_name", metavar="NAME", help="Only the cases of this agent.")
@click.option("--timeout", default=120.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Seconds per HTTP request (a turn's whole stream).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Also write the JSON report here.")
@handle_errors
def run_command(
    source: str, agent_url: str | None, agent_callable: str | None, agent_token: str | None, agent_name: str | None,
    timeout: float, fmt: str, output: str | None,
) -> None:
    """Replay every case under --source against an agent and grade it.

    Per case: requires checked against the agent's description (unmet: skipped, with the reason), state
    seeded (refused: skipped), the turns replayed in one fresh conversation, every declared check run.
    Outcomes: pass, fail, judge_pending, skipped, broken, error (a transport failure, never a fail).

    Exit codes: 0 no case failed, 3 a case failed, 2 bad input or a broken case, 1 a case could not run.
    """
    from evalsi.cases import CallableTransport, HttpTransport, exit_code, load_cases, render_table, run_cases

    if bool(agent_url) == bool(agent_callable):
        raise BadInputError("give exactly one of --agent-url URL and --agent-callable MODULE:ATTR")
    items = load_cases(source)  # a missing source is bad input before anything runs
    transport = (
        HttpTransport(agent_url, token=agent_token, timeout=timeout) if agent_url
        else CallableTransport.from_spec(agent_callable or "")
    )
    report = asyncio.run(run_cases(items, transport, agent=agent_name))
    document = json.dumps(report.to_dict(), indent=2, ensure_ascii=False)
    if output:
        Path(output).write_text(document + "\n", encoding="utf-8")
    click.echo(document if fmt == "json" else render_table(report))
    if not report.results:
        raise BadInputError(f"--agent {agent_name}: no case under {source} is for this agent")
    sys.exit(exit_code(report))
