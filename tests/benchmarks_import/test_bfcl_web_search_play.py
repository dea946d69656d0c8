"""BFCL's web search categories end to end: ``bfcl://DIR/web_search_base`` and ``web_search_no_snippet`` read as
bfcl-eval 2026.3.23 builds those questions, and ``evalsi cases play-bfcl`` playing the example's two questions with
the scripted FC model (``examples/benchmarks/bfcl/scripted_fc_model.py``) against the local search endpoint and page
server, graded by ``builtin/bfcl-agentic``."""

from __future__ import annotations

import ast
import copy
import importlib.util
import json
import types
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import evalsi
from benchmarks_import.bfcl_web_servers import KEY, serve
from benchmarks_import.test_bfcl_multi_drive import EXAMPLES
from benchmarks_import.test_bfcl_multi_reference import DATA, bfcl
from benchmarks_import.test_bfcl_prompt import theirs
from evalsi.cli.main import cli
from evalsi.datasets import load_dataset
from evalsi.datasets.bfcl_prompt import hinted, prompting_turn
from evalsi.records import content_value, from_value
from evalsi.testing.threaded import ThreadedProvider

__all__ = ["bfcl", "theirs"]  # fixtures: bfcl-eval's loader with its unused parsers stood in for
KEY_ENV = "EVALSI_TEST_SEARCH_KEY"
WEB = f"bfcl://{EXAMPLES}/web_search"


@pytest.mark.parametrize("category", ["web_search_base", "web_search_no_snippet"])
def test_the_questions_are_what_bfcl_eval_builds(theirs: types.SimpleNamespace, category: str) -> None:
    from bfcl_eval import utils  # type: ignore[import-untyped]

    records = {record.id: record for record in load_dataset(f"bfcl://{DATA}/{category}")}
    entries = utils.populate_initial_settings_for_web_search_test_cases(theirs.load(category))
    assert [entry["id"] for entry in entries] == list(records) and len(records) == 100
    answers = {row["id"]: row["ground_truth"] for row in utils.load_ground_truth_entry(category)}
    for entry in entries[:5]:
        record = records[entry["id"]]
        functions = hinted(json.loads(record.metadata["bfcl_functions"].string_value))  # as the driver offers them
        assert functions == entry["function"]
        question = list(content_value(record.input)["messages"])
        assert question == entry["question"][0]  # FC mode: the agentic answer format, then the question
        assert prompting_turn(question, functions) == theirs.utils.system_prompt_pre_processing_chat_model(
            copy.deepcopy(entry["question"][0]), entry["function"], entry["id"])
        assert from_value(record.metadata["bfcl_web_search"]) == entry["initial_config"]["WebSearchAPI"]
        truth = answers[entry["id"].replace(category, "web_search")]  # BFCL's answers keep the file's ids
        assert json.loads(record.reference.text) == {"category": category, "ground_truth": truth}


def _scripted_reply() -> Any:
    path = EXAMPLES / "scripted_fc_model.py"
    spec = importlib.util.spec_from_file_location("scripted_fc_model", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.reply


def test_play_bfcl_searches_fetches_and_grades(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    out = tmp_path / "played.jsonl"
    with serve() as (search, server), ThreadedProvider(_scripted_reply()) as model:
        done = CliRunner().invoke(cli, [
            "cases", "play-bfcl", f"{WEB}/web_search_base", f"{WEB}/web_search_no_snippet", "--model", "scripted",
            "--base-url", model.base_url, "--search-base-url", search, "--search-api-key-env", KEY_ENV,
            "--fetch-private-addresses", "--format", "json", "-o", str(out), "--no-progress"])
    assert done.exit_code == 0, done.output
    summary = json.loads(done.output)
    assert summary["questions"][0] == {"question": "web_search_base_0", "passed": True}
    assert summary["questions"][1]["question"] == "web_search_base_1" and not summary["questions"][1]["passed"]
    assert [row["passed"] for row in summary["questions"][2:]] == [True, False]  # no_snippet: the same answers
    assert summary["pass_rate"] == 0.5
    # the searches went to the endpoint with the operator's key, as BFCL's serpapi client asks
    assert sorted(query["q"] for query in server.queries) == [  # the questions run at the same time
        "2024 Super Bowl halftime performer"] * 2 + ["richest billionaire China Forbes April 2025"] * 2
    assert all(q["api_key"] == KEY and q["engine"] == "duckduckgo" for q in server.queries)
    rows = {row["id"]: row for row in map(json.loads, out.read_text().splitlines())}
    assert set(rows) == {"web_search_base_0", "web_search_base_1", "web_search_no_snippet_0",
                         "web_search_no_snippet_1"}
    for category, snippets in (("web_search_base", True), ("web_search_no_snippet", False)):
        tools = [m["content"] for m in rows[f"{category}_0"]["output"]["messages"] if m["role"] == "tool"]
        assert ("'body': 'Snippet 1:" in tools[0]) is snippets and tools[0].startswith("[{'title': 'Result 1")
        assert tools[1] == json.dumps({"content": "Forbes China rich list & more\nChina's richest\nIn April 2025\n"
                                       "Zhang Yiming\n, ByteDance's founder, tops\nthe list.\nDa Hong Pao\n"
                                       "tea\xa0©\ntail"})
        assert rows[f"{category}_0"]["metadata"]["bfcl_simulation"] == {"reason": "done", "turns": 1, "mode": "fc"}
    graded = evalsi.evaluate(list(rows.values()), ["builtin/bfcl-agentic"]).results
    assert [result.scores[0].passed for result in graded] == [True, False, True, False]


def test_a_web_search_question_needs_the_search_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["cases", "play-bfcl", f"{WEB}/web_search_base", "--model", "scripted", "--base-url",
            "http://127.0.0.1:9/v1", "--no-progress"]
    refused = CliRunner().invoke(cli, args)
    assert refused.exit_code == 2
    assert "--search-api-key-env" in refused.output and "--search-base-url" in refused.output
    monkeypatch.delenv(KEY_ENV, raising=False)
    unset = CliRunner().invoke(cli, [*args, "--search-api-key-env", KEY_ENV])
    assert unset.exit_code == 2 and f"{KEY_ENV}: the environment variable is not set" in unset.output


def test_prompting_mode_lists_the_functions_and_runs_the_calls_written_as_text(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    seen: list[list[dict[str, Any]]] = []

    def reply(body: dict[str, Any]) -> str:
        seen.append(copy.deepcopy(body["messages"]))
        if len(body["messages"]) == 2:
            return "[search_engine_query(keywords='halftime show 2024', max_results=2)]"
        return "{'answer': 'seven', 'context': 'the Falcons won 7 games'}"

    [record] = [r for r in load_dataset(f"{WEB}/web_search_no_snippet") if r.id.endswith("_1")]
    with serve() as (search, server), ThreadedProvider(reply) as model:
        done = CliRunner().invoke(cli, [
            "cases", "play-bfcl", f"{WEB}/web_search_no_snippet", "--question", record.id, "--mode", "prompting",
            "--model", "scripted", "--base-url", model.base_url, "--search-base-url", search,
            "--search-api-key-env", KEY_ENV, "--fetch-private-addresses", "--no-progress"])
    assert done.exit_code == 0, done.output
    assert done.output.splitlines()[1].split() == ["web_search_no_snippet_1", "pass"]
    functions = hinted(json.loads(record.metadata["bfcl_functions"].string_value))
    assert seen[0] == prompting_turn(list(content_value(record.input)["messages"]), functions)
    results = ast.literal_eval(seen[1][-1]["content"])  # BFCL's prompting mode sends the results as Python text
    assert len(results) == 1 and results[0]["name"].startswith("search_engine_query(")
    assert ast.literal_eval(results[0]["content"]) == [  # no snippets: no body
        {"title": f"Result {n} for halftime show 2024", "href": f"{search}/page{n - 1}.html"} for n in (1, 2)]
    assert [query["q"] for query in server.queries] == ["halftime show 2024"]


def test_the_searches_run_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio
    import threading

    from evalsi.datasets.bfcl_multi_drive import _execute
    from evalsi.datasets.bfcl_web_search_drive import _simulators
    from evalsi.packs.benchmarks.bfcl_multi_exec import Call
    from evalsi.packs.benchmarks.bfcl_web_search import SearchEndpoint

    monkeypatch.setenv(KEY_ENV, KEY)
    with serve() as (search, _server):
        endpoint = SearchEndpoint(api_key_env=KEY_ENV, base_url=search, private_addresses=True)
        simulators = _simulators({"show_snippet": True}, endpoint)
        seen: list[str] = []
        fetch = simulators.methods["fetch_url_content"]
        simulators.methods["fetch_url_content"] = lambda **kw: seen.append(threading.current_thread().name) or fetch(
            **kw)
        [result] = asyncio.run(_execute(simulators, [Call("fetch_url_content", {"url": f"{search}/latin"})]))
    assert json.loads(result) == {"content": "<p>Café crème</p>"}
    assert seen and seen[0] != threading.main_thread().name


def test_web_search_and_the_file_itself_read_both_categories() -> None:
    expected = [f"web_search_{category}_{n}" for category in ("base", "no_snippet") for n in (0, 1)]
    for source in (f"{WEB}/web_search", f"bfcl://{EXAMPLES}/web_search/BFCL_v4_web_search.json"):
        records = list(load_dataset(source))
        assert [record.id for record in records] == expected
        assert [from_value(r.metadata["bfcl_web_search"])["show_snippet"] for r in records] == [True, True, False,
                                                                                               False]
