"""``evalsi cases``: replay agent cases against a deployment and grade them (docs/cases.md)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click

from evalsi.cases.loader import load_cases
from evalsi.cases.model import DEFAULT_TENANT, BrokenCase, Case
from evalsi.cases.perf import perf_summary
from evalsi.cases.store import CaseNotFound, export_cases, import_corpus, load_stored, read_corpus, stored_cases
from evalsi.cli._common import EXIT_BAD_INPUT, handle_errors
from evalsi.cli.cases_bfcl_cmd import play_bfcl_command
from evalsi.cli.cases_inputs import (
    conversation_ids,
    dir_items,
    harness_transport,
    judge_panel,
    replay_cases,
    url_transport,
    write_report,
)
from evalsi.cli.cases_reports_cmd import reports, upload_after_run, upload_options
from evalsi.cli.cases_tau2_cmd import simulate_tau2_command
from evalsi.errors import BadInputError
from evalsi.judges import JudgeConfig
from evalsi.service.config import Config
from evalsi.service.defaults import DEFAULT_METADATA_URL
from evalsi.stores import MetadataStore, open_metadata_store
from evalsi.stores.metadata import project_or_default

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

# `--source store`: the cases in the metadata store rather than a directory (a directory named `store` is
# `./store`).
STORE_SOURCE = "store"


def store_options(fn: F) -> F:
    """How a cases command reaches the store: the metadata store of the standalone or server deployment."""
    fn = click.option("--project", default=None, metavar="NAME", callback=_resolved_project,
                      help="The project the cases belong to (default: $EVALSI_PROJECT, else client.project in "
                           "./evalsi.yaml, else in ~/.config/evalsi/config.yaml, else 'default').")(fn)
    fn = click.option("--config", "config_path", type=click.Path(dir_okay=False), metavar="FILE",
                      help="evalsi.yaml: its metadata.url is the store when --metadata-url is not given.")(fn)
    return click.option(
        "--metadata-url", envvar="EVALSI_METADATA_URL", metavar="URL",
        help="The metadata store holding the cases: sqlite:///path.db or postgresql://user@host:port/db "
             f"(EVALSI_METADATA_URL; default: --config's metadata.url, else {DEFAULT_METADATA_URL}).",
    )(fn)


def _resolved_project(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """The flag, else the client's defaults (evalsi.client_config), checked before the store opens."""
    from evalsi.client_config import client_project

    try:
        return client_project(value) or None
    except BadInputError as exc:
        raise click.BadParameter(str(exc)) from None


def tenant_option(fn: F) -> F:
    return click.option(
        "--tenant", default=None, metavar="TENANT",
        help="Only this tenant's cases (default: platform). Another tenant's case is treated exactly as a "
             "missing one.",
    )(fn)


def _metadata_url(metadata_url: str | None, config_path: str | None) -> str:
    if metadata_url:
        return metadata_url
    if config_path:

        return Config.load(config_path).metadata_url
    return DEFAULT_METADATA_URL


def _using_store(url: str, work: Callable[[MetadataStore], Awaitable[T]]) -> T:
    """Open the metadata store at ``url`` (migrating it), run ``work`` on it and close it."""

    async def main() -> T:

        store = await open_metadata_store(url)
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(main())


@click.group("cases")
def cases() -> None:
    """Agent cases: conversations replayed against an agent, graded deterministically (docs/cases.md)."""


cases.add_command(reports)
cases.add_command(simulate_tau2_command)
cases.add_command(play_bfcl_command)


@cases.command("validate")
@click.option("--source", required=True, type=click.Path(), help="A case YAML file or a directory of them.")
@handle_errors
def validate_command(source: str) -> None:
    """Load every case under --source and list the broken ones with file, line and field. Exit 2 if any."""

    items = load_cases(source)
    broken = [item for item in items if isinstance(item, BrokenCase)]
    for item in broken:
        click.echo(f"broken: {item.error}")
    click.echo(f"{len(items)} case(s): {len(items) - len(broken)} valid, {len(broken)} broken")
    if broken:
        sys.exit(EXIT_BAD_INPUT)


@cases.command("import")
@click.option("--source", default="evals/golden", show_default=True, type=click.Path(),
              help="The corpus: a case YAML file or a directory tree of them.")
@click.option("--keep-existing", is_flag=True,
              help="Leave a case already stored under the same id and tenant as it is (it may have been edited in "
                   "the store since); by default the corpus replaces it.")
@store_options
@handle_errors
def import_command(source: str, keep_existing: bool, metadata_url: str | None, config_path: str | None,
                   project: str | None) -> None:
    """Copy the case corpus into the store, each case under its own tenant (default platform).

    Every case is validated first: if one is broken (listed with file, line and field) nothing is written and
    the exit code is 2. Each case is stored as its YAML text, comments included, with the path it came from,
    so `evalsi cases export` writes the corpus back. Stored cases that are not in the corpus stay.
    """

    corpus = read_corpus(source)
    if corpus.broken:
        for item in corpus.broken:
            click.echo(f"broken: {item.error}", err=True)
        click.echo(f"nothing imported: {len(corpus.broken)} broken case(s) under {source}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    project = project_or_default(project or "")
    done = _using_store(_metadata_url(metadata_url, config_path),
                        lambda store: import_corpus(store, project, corpus, keep_existing=keep_existing))
    tenants: dict[str, int] = {}
    for document in corpus.documents:
        tenants[document.tenant] = tenants.get(document.tenant, 0) + 1
    click.echo(f"imported {len(corpus.documents)} case(s) from {source} into project {project} "
               f"(tenants: {', '.join(f'{name} {count}' for name, count in sorted(tenants.items()))}): "
               f"{len(done.created)} new, {len(done.replaced)} replaced, {len(done.unchanged)} unchanged, "
               f"{len(done.kept)} kept")


@cases.command("export")
@click.option("--dir", "directory", required=True, type=click.Path(file_okay=False),
              help="Write the cases here, at the paths they were imported from.")
@click.option("--force", is_flag=True,
              help="Overwrite files that exist (their comments, and cases not in the store, are lost).")
@store_options
@tenant_option
@handle_errors
def export_command(directory: str, force: bool, metadata_url: str | None, config_path: str | None,
                   project: str | None, tenant: str | None) -> None:
    """Write the tenant's stored cases as a YAML directory tree, byte for byte as they were imported.

    Refuses (exit 2, nothing written) when any file it would write exists, unless --force.
    """

    project, tenant = project_or_default(project or ""), tenant or DEFAULT_TENANT
    written = _using_store(_metadata_url(metadata_url, config_path),
                           lambda store: export_cases(store, project, tenant, directory, force=force))
    click.echo(f"exported project {project}, tenant {tenant}: {len(written)} file(s) under {directory}")


@cases.command("list")
@click.option("--agent", "agent_name", metavar="NAME", help="Only the cases of this agent.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@store_options
@tenant_option
@handle_errors
def list_command(agent_name: str | None, fmt: str, metadata_url: str | None, config_path: str | None,
                 project: str | None, tenant: str | None) -> None:
    """The tenant's stored cases: id, agent, where each came from, content hash, and whether it still validates.

    A stored case that no longer validates is listed as broken, with the reason. Exit 2 if any is.
    """

    project, tenant = project_or_default(project or ""), tenant or DEFAULT_TENANT
    stored = _using_store(_metadata_url(metadata_url, config_path),
                          lambda store: store.list_cases(project, tenant, agent=agent_name or ""))
    rows: list[dict[str, Any]] = []
    for case in stored:
        item = load_stored(case)
        rows.append({"id": case.case_id, "agent": case.agent, "path": case.path, "line": case.line,
                     "yaml_hash": case.yaml_hash, "updated_at": case.updated_at,
                     "broken": item.error if isinstance(item, BrokenCase) else None})
    if fmt == "json":
        click.echo(json.dumps({"project": project, "tenant": tenant, "cases": rows}, indent=2, ensure_ascii=False))
    else:
        for row in rows:
            state = f"BROKEN {row['broken']}" if row["broken"] else "ok"
            where = f"{row['path']}:{row['line']}"
            click.echo(f"{row['id']:<32} {row['agent']:<20} {where:<32} {row['yaml_hash'][:12]}  {state}")
        click.echo(f"{len(rows)} case(s) in project {project}, tenant {tenant}")
    if any(row["broken"] for row in rows):
        sys.exit(EXIT_BAD_INPUT)


@cases.command("show")
@click.argument("case_id", metavar="ID")
@store_options
@tenant_option
@handle_errors
def show_command(case_id: str, metadata_url: str | None, config_path: str | None, project: str | None,
                 tenant: str | None) -> None:
    """Print a stored case's YAML exactly as imported. Exit 2 when the tenant has no case with this id."""

    project, tenant = project_or_default(project or ""), tenant or DEFAULT_TENANT
    found = _using_store(_metadata_url(metadata_url, config_path),
                         lambda store: store.get_case(project, tenant, case_id))
    if found is None:
        raise CaseNotFound(case_id, project, tenant)
    click.echo(found.yaml, nl=False)


@cases.command("run")
@click.option("--source", required=True, type=click.Path(),
              help="A case YAML file or a directory of them, or 'store': the cases stored by `evalsi cases import` "
                   "(--metadata-url, --project, --tenant).")
@click.option("--case", "case_id", metavar="ID", help="Only this case (from the store: of --tenant; another "
              "tenant's reads as missing).")
@store_options
@tenant_option
@click.option("--agent-url", metavar="URL", help="A deployment speaking docs/agent-protocol.md.")
@click.option("--agent-callable", metavar="MODULE:ATTR", help="An agent in this process (docs/agent-protocol.md).")
@click.option("--agent-harness", type=click.Path(dir_okay=False), metavar="FILE",
              help="The built-in reference agent (evalsi-harness) with this config (docs/harness.md).")
@click.option("--agent-token", envvar="EVALSI_AGENT_TOKEN", help="Bearer token for --agent-url.")
@click.option("--transport", "transport_kind", type=click.Choice(["agent", "responses", "a2a"]), default="agent",
              show_default=True, help="The wire format of --agent-url: agent (docs/agent-protocol.md), responses "
              "(OpenAI Responses-compatible, POST URL/responses, model = the case's agent), a2a (A2A JSON-RPC, polled "
              "within --timeout).")
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
@click.option("--trials", default=1, show_default=True, type=click.IntRange(min=1),
              help="Run each case N times, each in a fresh conversation; report pass@k and pass^k.")
@click.option("--no-report", is_flag=True, help="Do not write the JSON report (default: evals/reports/).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write the JSON report here.")
@upload_options
@handle_errors
def run_command(
    source: str, agent_url: str | None, agent_callable: str | None, agent_token: str | None, agent_name: str | None,
    timeout: float, mode: str, judges_file: str | None, judge_model: str | None, judge_provider: str,
    judge_base_url: str | None, judge_api_key_env: str | None, no_cache: bool, baseline_file: str | None,
    update_baseline: bool, conv_map_file: str | None, pairwise: bool, trials: int, no_report: bool, fmt: str,
    output: str | None, transport_kind: str = "agent", agent_harness: str | None = None, case_id: str | None = None,
    metadata_url: str | None = None, config_path: str | None = None, project: str | None = None,
    tenant: str | None = None, server: str | None = None, report_name: str | None = None,
) -> None:
    """Replay every case under --source (a directory, or 'store') against an agent and grade it.

    Per case: requires checked against the agent's description (unmet: skipped, with the reason), state
    seeded (refused: skipped), the turns replayed in one fresh conversation, every declared check run, the
    rubric graded by the judge panel (none configured: judge_pending, never a pass).
    Outcomes: pass, fail, judge_pending, skipped, broken, error (a transport or judge failure, never a fail).

    Exit codes: 0 no case failed, 3 a case failed (with --baseline: only a regression), 2 bad input, a broken
    case or a refused baseline, 1 a case could not run.
    """
    from evalsi.cases import CallableTransport, HttpTransport, exit_code, render_table
    from evalsi.cases.gate import compare, load_baseline, refuse_unjudged, write_baseline
    from evalsi.cases.judging import DEFAULT_TOLERANCE

    if sum(map(bool, (agent_url, agent_callable, agent_harness))) != 1:
        raise BadInputError("give exactly one of --agent-url URL, --agent-callable MODULE:ATTR and "
                            "--agent-harness FILE")
    if trials > 1 and (baseline_file or update_baseline or conv_map_file):
        raise BadInputError("--trials N (N > 1) cannot be combined with --baseline, --update-baseline or "
                            "--conv-map: a baseline holds one outcome per case, a pinned conversation one run")
    if no_report and output:
        raise BadInputError("--no-report and --output contradict each other; give one")
    from_store = source == STORE_SOURCE
    # A missing source, or a case missing from it, is bad input before anything runs.
    items = (_store_items(metadata_url, config_path, project, tenant, agent_name, case_id) if from_store
             else dir_items(source, tenant, case_id))
    panel = judge_panel(None if from_store else source, judges_file, judge_model, judge_provider, judge_base_url,
                   judge_api_key_env)
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
    conversation_id = conversation_ids(conv_map_file, items)
    if not agent_url and transport_kind != "agent":
        raise BadInputError(f"--transport {transport_kind} needs --agent-url")
    transport = (
        HttpTransport(agent_url, token=agent_token, timeout=timeout) if agent_url and transport_kind == "agent"
        else url_transport(transport_kind, agent_url, agent_token, timeout) if agent_url
        else harness_transport(agent_harness) if agent_harness
        else CallableTransport.from_spec(agent_callable or "")
    )
    report = asyncio.run(replay_cases(items, transport, agent_name, conversation_id, panel if judged else None,
                              call_judges, no_cache, pairwise, trials))
    if not report.results:
        where = "in the store" if from_store else f"under {source}"
        raise BadInputError(f"--agent {agent_name}: no case {where} is for this agent")
    if mode in ("perf", "both"):
        report.perf = perf_summary(report.results)
    tolerance = panel.tolerance if panel is not None else None
    if baseline is not None:
        report.gate = compare(baseline, report, tolerance if tolerance is not None
                              else baseline.tolerance if baseline.tolerance is not None else DEFAULT_TOLERANCE)
    document = json.dumps(report.to_dict(), indent=2, ensure_ascii=False)
    # From the store, "store" resolves to ./store, so the default report lands in ./evals/reports/.
    written = write_report(document, source, agent_name, report, output, no_report)
    click.echo(document if fmt == "json" else render_table(report))
    if written is not None and fmt == "table":  # JSON on stdout stays one document
        click.echo(f"report: {written}")
    if update_baseline:
        new_baseline = write_baseline(baseline_path, report, tolerance)
        click.echo(f"baseline: wrote {len(new_baseline['cases'])} case(s) to {baseline_path} (skipped cases left out)",
                   err=fmt == "json")
    code = exit_code(report, accepting=update_baseline)
    if server:
        code = upload_after_run(server, project, document, report_name or source, code, quiet=fmt == "json")
    sys.exit(code)



def _store_items(metadata_url: str | None, config_path: str | None, project: str | None, tenant: str | None,
                 agent_name: str | None, case_id: str | None) -> list[Any]:
    """``--source store``: the tenant's stored cases, broken ones included; a case of another tenant is missing."""

    project, tenant = project_or_default(project or ""), tenant or DEFAULT_TENANT
    items = _using_store(_metadata_url(metadata_url, config_path), lambda store: stored_cases(
        store, project, tenant, agent=agent_name or "", case_id=case_id))
    if not items:
        raise BadInputError(f"--source store: no case stored in project {project!r}, tenant {tenant!r}"
                            + (f" for agent {agent_name}" if agent_name else "") + " (evalsi cases import)")
    return items









@cases.command("simulate")
@click.option("--source", required=True, type=click.Path(),
              help="A case YAML file or a directory of them, or 'store': the cases imported into the metadata "
                   "store (evalsi cases import).")
@store_options
@tenant_option
@click.option("--agent-url", metavar="URL", help="A deployment speaking docs/agent-protocol.md.")
@click.option("--agent-callable", metavar="MODULE:ATTR", help="An agent in this process (docs/agent-protocol.md).")
@click.option("--agent-token", envvar="EVALSI_AGENT_TOKEN", help="Bearer token for --agent-url.")
@click.option("--agent", "agent_name", metavar="NAME", help="Only the cases of this agent.")
@click.option("--case", "case_id", metavar="ID", help="Only this persona case.")
@click.option("--staging", is_flag=True, help="Declare the target a staging deployment (its tools are live).")
@click.option("--eval-profile", metavar="NAME",
              help="Run under the deployment's eval profile NAME (side-effect tools swapped for dry-runs); "
                   "verified: --eval-tools must name every side-effect tool the agent declares.")
@click.option("--eval-tools", metavar="A,B,C", default="", help="The side-effect tools --eval-profile swaps.")
@click.option("--persona-model", envvar="EVALSI_PERSONA_MODEL", metavar="MODEL",
              help="The model playing the customer (or EVALSI_PERSONA_MODEL).")
@click.option("--persona-provider", default="openai", show_default=True, help="Provider of --persona-model.")
@click.option("--persona-base-url", metavar="URL", help="Base URL of --persona-model's provider.")
@click.option("--persona-api-key-env", metavar="VAR", help="Environment variable holding the persona's API key.")
@click.option("--conv", metavar="ID", help="The conversation id (one case, one trial): continue a session on purpose.")
@click.option("--timeout", default=120.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Seconds per HTTP request (a turn's whole stream).")
@click.option("--judges", "judges_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="The judge panel; default <source>/evals.yaml when present.")
@click.option("--judge-model", metavar="MODEL", help="One judge for this run; overrides the panel's judges.")
@click.option("--judge-provider", default="openai", show_default=True, help="Provider of --judge-model.")
@click.option("--judge-base-url", metavar="URL", help="Base URL of --judge-model's provider.")
@click.option("--judge-api-key-env", metavar="VAR", help="Environment variable holding the judge's API key.")
@click.option("--no-cache", is_flag=True, help="Bypass the judge cache (the persona is never cached).")
@click.option("--trials", default=1, show_default=True, type=click.IntRange(min=1),
              help="Simulate each case N times, each in a fresh conversation; report pass@k and pass^k.")
@click.option("--no-report", is_flag=True, help="Do not write the JSON report (default: evals/reports/).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write the JSON report here.")
@upload_options
@handle_errors
def simulate_command(
    source: str, metadata_url: str | None, config_path: str | None, project: str | None, tenant: str | None,
    agent_url: str | None, agent_callable: str | None, agent_token: str | None, agent_name: str | None,
    case_id: str | None, staging: bool, eval_profile: str | None, eval_tools: str, persona_model: str | None,
    persona_provider: str, persona_base_url: str | None, persona_api_key_env: str | None, conv: str | None,
    timeout: float, judges_file: str | None, judge_model: str | None, judge_provider: str,
    judge_base_url: str | None, judge_api_key_env: str | None, no_cache: bool, trials: int, no_report: bool,
    fmt: str, output: str | None, server: str | None = None, report_name: str | None = None,
) -> None:
    """Simulate the customer of every persona case under --source against an agent, and grade the transcript.

    A persona model plays the customer knowing only the case's `knows` facts, turn by turn, until max_turns or
    a stop marker (<<goal_met>>, <<gave_up>>). Every transcript is marked simulated: true. The agent's tools
    are NOT disarmed, so --staging or a verified --eval-profile is required. A refused seed is an error.

    Exit codes: as `evalsi cases run` (0, 3 a case failed, 2 bad input or refused, 1 a case could not run).
    """
    from evalsi.cases import CallableTransport, HttpTransport, exit_code, render_table

    if not staging and not eval_profile:
        raise BadInputError("a simulated conversation does not disarm the agent's tools: give --staging (the "
                            "target is a staging deployment) or --eval-profile NAME --eval-tools A,B (its "
                            "side-effect tools are swapped for dry-runs)")
    if eval_tools and not eval_profile:
        raise BadInputError("--eval-tools needs --eval-profile")
    if bool(agent_url) == bool(agent_callable):
        raise BadInputError("give exactly one of --agent-url URL and --agent-callable MODULE:ATTR")
    if not persona_model:
        raise BadInputError("--persona-model MODEL (or EVALSI_PERSONA_MODEL) is required: the model playing the "
                            "customer")
    if no_report and output:
        raise BadInputError("--no-report and --output contradict each other; give one")
    from_store = source == STORE_SOURCE
    # The same cases `evalsi cases run` would take from this source (a missing one is bad input before a turn).
    items = (_store_items(metadata_url, config_path, project, tenant, agent_name, case_id) if from_store
             else dir_items(source, tenant, case_id))
    if agent_name:
        items = [item for item in items if item.agent is None or item.agent == agent_name]
    where = "in the store" if from_store else f"under {source}"
    personas = [item for item in items if isinstance(item, Case) and item.persona is not None]
    if not personas:
        raise BadInputError(f"no persona case {where}" + (f" for agent {agent_name}" if agent_name else "")
                            + "; replay cases run with `evalsi cases run`")
    if conv and (len(personas) > 1 or trials > 1):
        raise BadInputError("--conv names one conversation: it needs exactly one persona case (--case ID) and "
                            "--trials 1")
    panel = judge_panel(None if from_store else source, judges_file, judge_model, judge_provider, judge_base_url,
                   judge_api_key_env)
    judged = panel is not None and bool(panel.judges)
    persona: dict[str, Any] = {"model": persona_model, "provider": persona_provider, "name": "persona"}
    if persona_base_url:
        persona["base_url"] = persona_base_url
    if persona_api_key_env:
        persona["api_key_env"] = persona_api_key_env

    persona_config = JudgeConfig.from_mapping(persona, where="--persona-model")
    tools = [tool.strip() for tool in eval_tools.split(",") if tool.strip()]
    transport = (
        HttpTransport(agent_url, token=agent_token, timeout=timeout, eval_profile=eval_profile) if agent_url
        else CallableTransport.from_spec(agent_callable or "")
    )
    report = asyncio.run(_simulate(items, personas, transport, persona_config, panel if judged else None,
                                   no_cache, trials, conv, eval_profile, tools))
    report.notices.insert(0, "target declared staging (--staging)" if staging and not eval_profile else
                          f"eval profile {eval_profile}: side-effect tools covered by --eval-tools "
                          f"({', '.join(tools) or 'none declared'})")
    document = json.dumps(report.to_dict(), indent=2, ensure_ascii=False)
    written = write_report(document, source, agent_name, report, output, no_report)
    click.echo(document if fmt == "json" else render_table(report))
    if written is not None and fmt == "table":  # JSON on stdout stays one document
        click.echo(f"report: {written}")
    code = exit_code(report)
    if server:
        code = upload_after_run(server, project, document, report_name or source, code, quiet=fmt == "json")
    sys.exit(code)


async def _simulate(items: list, personas: list, transport: Any, persona_config: Any, panel_config: Any,
                    no_cache: bool, trials: int, conv: str | None, eval_profile: str | None,
                    eval_tools: list[str]) -> Any:
    from evalsi.cases.judging import Panel
    from evalsi.cases.simulate import Simulator, check_eval_profile, simulated_conversation_id
    from evalsi.cases.transport import DescriptionUnavailable
    from evalsi.judges.panel import JudgeSet

    try:
        if eval_profile:  # verified before a single turn: every side-effect tool must be covered
            descriptions: dict[str, Any] = {}
            for case in personas:
                if case.agent not in descriptions:
                    try:
                        descriptions[case.agent] = await transport.describe(case.agent, case.tenant)
                    except DescriptionUnavailable:
                        descriptions[case.agent] = None
            check_eval_profile(eval_profile, eval_tools, descriptions)
        conversation_id = (lambda _case: conv) if conv else simulated_conversation_id
        async with JudgeSet({"persona": persona_config}, cache=False) as persona_set:
            client = persona_set.clients["persona"]
            if panel_config is None:
                simulator = Simulator(transport, client, conversation_id=conversation_id, trials=trials)
                return await simulator.run(items)
            async with JudgeSet(panel_config.judges, cache=not no_cache) as judges:
                simulator = Simulator(transport, client, conversation_id=conversation_id, trials=trials,
                                      panel=Panel(panel_config, dict(judges.clients)))
                return await simulator.run(items)
    finally:
        await transport.close()
