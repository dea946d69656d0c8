"""``evalsi cases run --server`` uploads its report; ``evalsi cases reports push|list|show`` against a served API
over a real SQLite metadata store; a failed upload is said and changes the exit code."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from api_doubles import Api
from case_corpus import EXPECTED_STATUS, run_report
from click.testing import CliRunner, Result

from evalsi.api import CaseHandlers, build_table
from evalsi.cases.testing import ScriptedAgent, ThreadedAgent
from evalsi.cli.main import cli
from evalsi.stores import SqlMetadataStore, open_metadata_store
from evalsi.testing.threaded import ThreadedProvider


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlMetadataStore]:
    opened = await open_metadata_store(f"sqlite:///{tmp_path / 'evalsi.db'}")
    assert isinstance(opened, SqlMetadataStore)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def server_url(api: Api, store: SqlMetadataStore) -> str:
    api.table = build_table(evaluation=api.evaluation, runs=api.runs, catalog=api.catalog, monitor=api.monitor,
                            cases=CaseHandlers(store))
    await api.start()
    return api.http


async def invoke(*args: str) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, cli, list(args), catch_exceptions=False)


async def test_run_uploads_and_reports_list_and_show(server_url: str, store: SqlMetadataStore,
                                                     tmp_path: Path) -> None:
    code, output, path = await asyncio.to_thread(run_report, tmp_path, "--server", server_url, "--project", "shop",
                                                 "--report-name", "nightly")
    assert code == 3, output  # the gate's regression still decides the exit code
    (reports, _) = await store.list_case_reports("shop", "platform")
    assert [(r.name, r.counts["fail"], r.regressions) for r in reports] == [("nightly", 1, 1)]
    report_id = reports[0].report_id
    assert f"uploaded: case report {report_id} (project shop, tenant platform) on {server_url}; open " \
           f"{server_url}/ui/#/cases/reports/{report_id}" in output
    stored = await store.get_case_report("shop", "platform", report_id)
    assert stored is not None and json.loads(stored.document) == json.loads(path.read_text(encoding="utf-8"))

    # The saved file pushed again: the same content, so the same id and nothing new.
    result = await invoke("cases", "reports", "push", str(path), "--server", server_url, "--project", "shop")
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"already stored: case report {report_id} (project shop, tenant platform)")

    result = await invoke("cases", "reports", "list", "--server", server_url, "--project", "shop")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert f"{report_id}  1 pass, 1 fail, 1 judge_pending, 1 skipped; pass rate 50% [9%, 91%], 1 regression(s)" \
           "  agents: shop  nightly" in lines[0]
    assert lines[-1] == "1 report(s)"
    result = await invoke("cases", "reports", "list", "--server", server_url, "--project", "shop", "--tenant",
                          "store-b", "--format", "json")
    assert json.loads(result.output) == {"reports": []}

    result = await invoke("cases", "reports", "show", report_id, "--server", server_url, "--project", "shop")
    shown = json.loads(result.output)
    assert {c["id"]: c["status"] for c in shown["report"]["cases"]} == EXPECTED_STATUS
    result = await invoke("cases", "reports", "show", report_id, "--server", server_url, "--project", "other")
    assert result.exit_code == 2 and f"case report '{report_id}' not found in project 'other'" in result.output


async def test_a_refused_or_failed_upload_is_said(server_url: str, tmp_path: Path) -> None:
    not_a_report = tmp_path / "baseline.json"
    not_a_report.write_text('{"kind": "evalsi.cases.baseline/v1", "cases": {}}', encoding="utf-8")
    result = await invoke("cases", "reports", "push", str(not_a_report), "--server", server_url)
    assert result.exit_code == 2
    assert "error: report.kind: expected 'evalsi.cases.report/v1'" in result.output

    # A clean run whose upload fails exits 1 and says why; the report is still written.
    (tmp_path / "run").mkdir()
    code, output, path = await asyncio.to_thread(run_report, tmp_path / "run", "--server", "http://127.0.0.1:9",
                                                 "--update-baseline")
    assert code == 1, output
    assert "error: --server http://127.0.0.1:9: the report was not uploaded: cannot reach" in output
    assert path.is_file()


PERSONA_CASE = """\
id: present
agent: shop
persona:
  goal: "find a birthday present"
  opens_with: "hi, I need a present"
  max_turns: 3
expect:
  tools_called: [search_products]
"""


async def test_simulate_uploads_a_simulated_report(server_url: str, store: SqlMetadataStore, tmp_path: Path) -> None:
    (tmp_path / "personas").mkdir()
    (tmp_path / "personas" / "present.yaml").write_text(PERSONA_CASE, encoding="utf-8")
    replies = {"hi, I need a present": {"reply": "What is your budget?"},
               "up to 100": {"calls": [{"name": "search_products", "status": "ok"}], "reply": "A box of truffles."}}

    def persona(body: dict[str, Any]) -> str:  # the persona's next message after opens_with
        said = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return ["up to 100", "<<goal_met>>"][min(said - 1, 1)]

    with ThreadedAgent(ScriptedAgent(agents={"shop": {"tools": ["search_products"]}}, replies=replies)) as agent, \
            ThreadedProvider(persona) as provider:
        result = await invoke("cases", "simulate", "--source", str(tmp_path / "personas"), "--agent-url",
                              agent.base_url, "--staging", "--persona-model", "m", "--persona-base-url",
                              provider.base_url, "--no-report", "--server", server_url, "--report-name", "sim")
    assert result.exit_code == 0, result.output
    (reports, _) = await store.list_case_reports("default", "platform")
    assert [(r.name, r.simulated, r.counts["pass"]) for r in reports] == [("sim", True, 1)]
    assert f"uploaded: case report {reports[0].report_id}" in result.output
