"""``evalsi cases``: replay agent cases against a deployment and grade them (docs/cases.md)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from evalsi.cli._common import EXIT_BAD_INPUT, handle_errors
from evalsi.errors import BadInputError

NOT_BUILT = "Not built yet: simulated users (persona cases are skipped), the case store."


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
@click.option("--mode", type=click.Choice(["replay", "perf", "both"]), default="replay", show_default=True,
              help="perf: TTFB and latency per turn (p50/p95), no judge calls; both: graded replay and perf.")
@click.option("--judges", "judges_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="The judge panel (judges, aggregate, min_agreement, quorum, tolerance); default "
                   "<source>/evals.yaml when present.")
@click.option("--judge-model", metavar="MODEL", help="One judge for this run; overrides the panel's judges.")
@click.option("--judge-provider", default="openai", show_default=True, help="Provider of --judge-model.")
@click.option("--judge-base-url", metavar="URL", help="Base URL of --judge-model's provider.")
@click.option("--judge-api-key-env", metavar="VAR", help="Environment variable holding the judge's API key.")
@click.option("--no-cache", is_flag=True, help="Bypass the judge cache (always call the provider).")
@click.option("--baseline", "baseline_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="Gate on this baseline (or saved report): exit 3 only on a regression.")
@click.option("--update-baseline", is_flag=True,
              help="Write this run as the baseline (to --baseline FILE, default evals/baseline.json); skipped "
                   "cases are left out.")
@click.option("--conv-map", "conv_map_file", type=click.Path(dir_okay=False), metavar="FILE",
              help='JSON {"case id": "conversation id"}; other cases get fresh ids.')
@click.option("--pairwise", is_flag=True,
              help="Also compare each case with a reference against it (judges, both orders); never gates.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Also write the JSON report here.")
@handle_errors
def run_command(
    source: str, agent_url: str | None, agent_callable: str | None, agent_token: str | None, agent_name: str | None,
    timeout: float, mode: str, judges_file: str | None, judge_model: str | None, judge_provider: str,
    judge_base_url: str | None, judge_api_key_env: str | None, no_cache: bool, baseline_file: str | None,
    update_baseline: bool, conv_map_file: str | None, pairwise: bool, fmt: str, output: str | None,
) -> None:
    """Replay every case under --source against an agent and grade it.

    Per case: requires checked against the agent's description (unmet: skipped, with the reason), state
    seeded (refused: skipped), the turns replayed in one fresh conversation, every declared check run, the
    rubric graded by the judge panel (none configured: judge_pending, never a pass).
    Outcomes: pass, fail, judge_pending, skipped, broken, error (a transport or judge failure, never a fail).

    Exit codes: 0 no case failed, 3 a case failed (with --baseline: only a regression), 2 bad input, a broken
    case or a refused baseline, 1 a case could not run.
    """
    from evalsi.cases import CallableTransport, HttpTransport, exit_code, load_cases, render_table
    from evalsi.cases.gate import compare, load_baseline, refuse_unjudged, write_baseline
    from evalsi.cases.judging import DEFAULT_TOLERANCE, PanelConfig, load_panel, panel_for_source
    from evalsi.cases.perf import perf_summary
    from evalsi.judges import JudgeConfig

    if bool(agent_url) == bool(agent_callable):
        raise BadInputError("give exactly one of --agent-url URL and --agent-callable MODULE:ATTR")
    items = load_cases(source)  # a missing source is bad input before anything runs
    panel = load_panel(judges_file) if judges_file else panel_for_source(source)
    if judge_model:
        judge = {"model": judge_model, "provider": judge_provider, "name": judge_model}
        if judge_base_url:
            judge["base_url"] = judge_base_url
        if judge_api_key_env:
            judge["api_key_env"] = judge_api_key_env
        panel = (panel or PanelConfig()).with_judge(JudgeConfig.from_mapping(judge, where="--judge-model"))
    elif judge_base_url or judge_api_key_env:
        raise BadInputError("--judge-base-url and --judge-api-key-env need --judge-model")
    call_judges = mode != "perf"
    judged = panel is not None and bool(panel.judges) and call_judges
    if pairwise and not judged:
        raise BadInputError("--pairwise needs a judge (--judge-model, --judges FILE or evals.yaml) and a mode "
                            "that calls judges (replay or both)")
    baseline_path = baseline_file or "evals/baseline.json"
    baseline = None
    if baseline_file and not update_baseline:  # refusals come before a single turn is spent
        baseline = load_baseline(baseline_file)
        refuse_unjudged(baseline, judged)
    conversation_id = _conversation_ids(conv_map_file, items)
    transport = (
        HttpTransport(agent_url, token=agent_token, timeout=timeout) if agent_url
        else CallableTransport.from_spec(agent_callable or "")
    )
    report = asyncio.run(_run(items, transport, agent_name, conversation_id, panel if judged else None,
                              call_judges, no_cache, pairwise))
    if not report.results:
        raise BadInputError(f"--agent {agent_name}: no case under {source} is for this agent")
    if mode in ("perf", "both"):
        report.perf = perf_summary(report.results)
    tolerance = panel.tolerance if panel is not None else None
    if baseline is not None:
        report.gate = compare(baseline, report, tolerance if tolerance is not None
                              else baseline.tolerance if baseline.tolerance is not None else DEFAULT_TOLERANCE)
    document = json.dumps(report.to_dict(), indent=2, ensure_ascii=False)
    if output:
        Path(output).write_text(document + "\n", encoding="utf-8")
    click.echo(document if fmt == "json" else render_table(report))
    if update_baseline:
        written = write_baseline(baseline_path, report, tolerance)
        click.echo(f"baseline: wrote {len(written['cases'])} case(s) to {baseline_path} (skipped cases left out)",
                   err=fmt == "json")
    sys.exit(exit_code(report, accepting=update_baseline))


def _conversation_ids(conv_map_file: str | None, items: list) -> Callable[[str], str]:
    """``--conv-map``: the mapped id for a case in the map, a fresh ``eval-<case>-<hex>`` for the rest."""
    from evalsi.cases import fresh_conversation_id

    if not conv_map_file:
        return fresh_conversation_id
    try:
        mapping = json.loads(Path(conv_map_file).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInputError(f"--conv-map {conv_map_file}: not a readable JSON object: {exc}") from None
    if not isinstance(mapping, dict) or not all(isinstance(k, str) and isinstance(v, str) and v
                                                for k, v in mapping.items()):
        raise BadInputError(f"--conv-map {conv_map_file}: expected a JSON object of case id -> conversation id "
                            "(non-empty strings)")
    used = list(mapping.values())
    twice = sorted({conv for conv in used if used.count(conv) > 1})
    if twice:
        raise BadInputError(f"--conv-map {conv_map_file}: conversation id(s) {', '.join(twice)} mapped to more "
                            "than one case; a conversation holds one case's turns")
    known = {item.id for item in items if item.id is not None}
    unknown = sorted(set(mapping) - known)
    if unknown:
        raise BadInputError(f"--conv-map {conv_map_file}: no case with id(s) {', '.join(unknown)} under the source")
    return lambda case_id: mapping.get(case_id) or fresh_conversation_id(case_id)


async def _run(items: list, transport: Any, agent: str | None, conversation_id: Callable[[str], str],
               panel_config: Any, call_judges: bool, no_cache: bool, pairwise: bool) -> Any:
    from evalsi.cases import run_cases
    from evalsi.cases.judging import Panel
    from evalsi.judge_set import JudgeSet

    if panel_config is None:
        return await run_cases(items, transport, agent=agent, conversation_id=conversation_id,
                               call_judges=call_judges)
    async with JudgeSet(panel_config.judges, cache=not no_cache) as judges:
        panel = Panel(panel_config, dict(judges.clients))
        return await run_cases(items, transport, agent=agent, conversation_id=conversation_id, panel=panel,
                               call_judges=call_judges, pairwise=pairwise)
