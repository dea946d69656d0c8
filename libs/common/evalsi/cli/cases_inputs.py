"""What ``evalsi cases`` reads and writes: cases from a directory, transports to the agent, conversation ids, the
judge panel, and the JSON report's path."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evalsi.cases.loader import load_cases
from evalsi.cases.model import Case
from evalsi.errors import BadInputError
from evalsi.judges import JudgeConfig


def dir_items(source: str, tenant: str | None, case_id: str | None) -> list[Any]:
    """The cases under a directory; only ``tenant``'s when given (broken ones always stay: never dropped)."""

    items = load_cases(source)
    if tenant:
        items = [item for item in items if not isinstance(item, Case) or item.tenant == tenant]
    if case_id is not None:
        items = [item for item in items if item.id == case_id]
        if not items:
            raise BadInputError(f"--case {case_id}: no such case under {source}"
                                + (f" for tenant {tenant!r}" if tenant else ""))
    return items


def harness_transport(config_file: str) -> Any:
    """``--agent-harness FILE``: the built-in reference agent, in this process."""
    from evalsi.cases.transport_harness import HarnessTransport

    return HarnessTransport.from_file(config_file)


def url_transport(kind: str, url: str, token: str | None, timeout: float) -> Any:
    """``--transport responses|a2a``: the client for ``--agent-url``'s wire format."""
    from evalsi.cases.transport_a2a import A2ATransport
    from evalsi.cases.transport_responses import ResponsesTransport

    return (ResponsesTransport if kind == "responses" else A2ATransport)(url, token=token, timeout=timeout)


def conversation_ids(conv_map_file: str | None, items: list) -> Callable[[str], str]:
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


async def replay_cases(items: list, transport: Any, agent: str | None, conversation_id: Callable[[str], str],
               panel_config: Any, call_judges: bool, no_cache: bool, pairwise: bool, trials: int) -> Any:
    from evalsi.cases import run_cases
    from evalsi.cases.judging import Panel
    from evalsi.judges.panel import JudgeSet

    if panel_config is None:
        return await run_cases(items, transport, agent=agent, conversation_id=conversation_id,
                               call_judges=call_judges, trials=trials)
    async with JudgeSet(panel_config.judges, cache=not no_cache) as judges:
        panel = Panel(panel_config, dict(judges.clients))
        return await run_cases(items, transport, agent=agent, conversation_id=conversation_id, panel=panel,
                               call_judges=call_judges, pairwise=pairwise, trials=trials)


def judge_panel(source: str | None, judges_file: str | None, judge_model: str | None, judge_provider: str,
           judge_base_url: str | None, judge_api_key_env: str | None) -> Any:
    """The judge panel: --judges FILE, else <source>/evals.yaml (a directory source only); --judge-model replaces
    its judges."""
    from evalsi.cases.judging import PanelConfig, load_panel, panel_for_source

    panel = load_panel(judges_file) if judges_file else panel_for_source(source) if source else None
    if judge_model:
        judge = {"model": judge_model, "provider": judge_provider, "name": judge_model}
        if judge_base_url:
            judge["base_url"] = judge_base_url
        if judge_api_key_env:
            judge["api_key_env"] = judge_api_key_env
        panel = (panel or PanelConfig()).with_judge(JudgeConfig.from_mapping(judge, where="--judge-model"))
    elif judge_base_url or judge_api_key_env:
        raise BadInputError("--judge-base-url and --judge-api-key-env need --judge-model")
    return panel


def default_report_path(source: str, agent: str, now: datetime | None = None) -> Path:
    """``evals/reports/<timestamp>-<agent>.json`` next to the source: under the source's parent directory,
    or that parent's own ``reports/`` when the parent is itself ``evals/`` (as with ``evals/golden``)."""
    parent = Path(source).resolve().parent
    reports = parent / "reports" if parent.name == "evals" else parent / "evals" / "reports"
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", agent) or "agent"
    path = reports / f"{stamp}-{safe}.json"
    index = 2
    while path.exists():  # two runs in one second: never overwrite a report
        path = reports / f"{stamp}-{safe}-{index}.json"
        index += 1
    return path


def write_report(document: str, source: str, agent_name: str | None, report: Any, output: str | None,
                  no_report: bool) -> Path | None:
    """--output FILE, else the default path under evals/reports/, unless --no-report. The path written."""
    if no_report:
        return None
    if output:
        Path(output).write_text(document + "\n", encoding="utf-8")
        return Path(output)
    agents = sorted({r.agent for r in report.results if r.agent})
    agent = agent_name or (agents[0] if len(agents) == 1 else "all")
    path = default_report_path(source, agent)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(document + "\n", encoding="utf-8")
    except OSError as exc:
        raise BadInputError(f"cannot write the report to {path}: {exc.strerror or exc} (use --output or "
                            "--no-report)") from None
    return path
