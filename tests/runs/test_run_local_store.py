"""Embedded runs beyond their memory budget: the records go as shards to a local object directory, the results to a
SQLite metadata store, and the returned results read them back in pages; the document is the one an in-memory run
gives (ids and timestamps aside), and the temporary store is removed when the results are closed."""

from __future__ import annotations

import asyncio
import gc
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import evalsi
from evalsi.errors import BadInputError
from evalsi.judges import RetryPolicy
from evalsi.runs.embedded import execute_run
from evalsi.runs.memory_budget import (
    DEFAULT_MEMORY_BUDGET_MB,
    MEMORY_BUDGET_ENV,
    RESULT_BYTES,
    estimated_run_bytes,
    memory_budget_mb,
)
from evalsi.runs.results import EvaluationResults
from evalsi.runs.spec import parse_eval_run
from evalsi.stores.sql import SqlMetadataStore
from evalsi.testing import FakeOpenAI
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import RUN_STATE_BUDGET_EXCEEDED, RUN_STATE_CANCELLED, RUN_STATE_SUCCEEDED
from evalsi.v1alpha1.score_pb2 import OUTCOME_CANCELLED

FAST = RetryPolicy(base_delay_s=0.001, max_delay_s=0.005)
ROWS = [
    {"id": f"r{i:03d}", "input": f"question {i}", "output": "yes" if i % 3 else "no", "reference": "yes",
     "metadata": {"doc": f"d{i % 7}"}}
    for i in range(120)
]
QUESTIONS = [{"id": f"s{i}", "input": f"question {i}", "reference": "yes", "metadata": {"doc": f"d{i % 3}"}}
             for i in range(9)]
TINY_BUDGET = 0.001  # MiB: every run of these tests is over it


def comparable(results: EvaluationResults) -> dict[str, Any]:
    """The saved document without what differs between two runs of one spec (ids, timestamps)."""
    document = json.loads(results.to_json())
    for key in ("id", "createTime", "startTime", "endTime"):
        document.pop(key, None)
    document["manifest"].pop("created", None)
    return document


def spec_file(tmp_path: Path, spec: dict[str, Any], rows: list[dict[str, Any]]) -> Any:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    document = {"apiVersion": "evals.si/v1alpha1", "kind": "EvalRun", "metadata": {"name": "spill"},
                "spec": {"dataset": {"path": str(data)}, **spec}}
    return parse_eval_run(yaml.safe_load(yaml.safe_dump(document)), source="run.yaml")


async def test_evaluate_over_its_budget_gives_the_in_memory_document_from_sqlite(tmp_path: Path) -> None:
    options: dict[str, Any] = {"cluster_by": "doc", "name": "spill"}
    in_memory = await evalsi.evaluate_async(ROWS, ["exact-match", "fuzzy-match"], **options)
    spilled = await evalsi.evaluate_async(ROWS, ["exact-match", "fuzzy-match"], memory_budget=TINY_BUDGET, **options)
    assert in_memory.stored is None and spilled.stored is not None
    assert len(spilled.run.results) == 0  # the document message holds none: they are in SQLite
    assert len(spilled) == len(in_memory) == 240

    assert comparable(spilled) == comparable(in_memory)
    assert spilled.to_dict()["results"] == in_memory.to_dict()["results"]
    assert [r.SerializeToString() for r in spilled] == [r.SerializeToString() for r in in_memory]
    assert spilled.results == in_memory.results
    assert spilled.table("md") == in_memory.table("md")
    assert spilled.metric("exact-match").clusters == 7 and spilled.metric("exact-match").n == 120
    saved_spilled, saved_memory = spilled.save(tmp_path / "a.json"), in_memory.save(tmp_path / "b.json")
    assert saved_spilled.read_text() == saved_memory.read_text().replace(in_memory.run.id, spilled.run.id).replace(
        in_memory.run.manifest.created.ToJsonString(), spilled.run.manifest.created.ToJsonString()
    ).replace(in_memory.run.create_time.ToJsonString(), spilled.run.create_time.ToJsonString()).replace(
        in_memory.run.start_time.ToJsonString(), spilled.run.start_time.ToJsonString()
    ).replace(in_memory.run.end_time.ToJsonString(), spilled.run.end_time.ToJsonString())
    assert EvaluationResults.load(saved_spilled).results == in_memory.results

    # The results are rows of the SQLite metadata store in the run's temporary directory, gone once closed.
    assert spilled.stored is not None
    directory, path = spilled.stored.directory, spilled.stored.path
    async with await SqlMetadataStore.open_sqlite(path) as store:
        assert sum((await store.count_results(spilled.run.project, spilled.run.id)).values()) == 240
    assert not (directory / "objects").exists()  # the records' shards served the run only
    spilled.close()
    assert not directory.exists()
    with pytest.raises(ValueError, match="closed"):
        list(spilled)


async def test_a_generating_run_with_trials_and_gates_agrees_above_and_below_its_budget(tmp_path: Path) -> None:
    def reply(body: dict[str, Any]) -> str:
        question = int(body["messages"][-1]["content"].split()[-1])
        return "yes" if (question + body["seed"]) % 3 else "no"

    async with FakeOpenAI(reply=reply) as server:
        spec = {
            "target": {"model": {"connector": "openai-compatible", "model": "target-model",
                                 "baseUrl": server.base_url, "params": {"max_retries": 1}}},
            "trials": 3,
            "seed": 7,
            "summary": {"clusterBy": "doc"},
            "evaluators": [{"ref": "exact-match"}, {"ref": "token-usage"}],
            "gates": ["metric('exact-match').passAtK(3) >= 0.6", "metric('exact-match').mean >= 0.9"],
        }
        run = spec_file(tmp_path, spec, QUESTIONS)
        below = await execute_run(run, base_dir=tmp_path, retry=FAST, cache=False, shard_size=4)
        above = await execute_run(run, base_dir=tmp_path, retry=FAST, cache=False, shard_size=4,
                                  memory_budget=TINY_BUDGET, store_dir=tmp_path / "kept")

    assert below.results.stored is None and above.results.stored is not None
    assert above.results.run.state == below.results.run.state == RUN_STATE_SUCCEEDED
    assert [g.passed for g in above.results.run.gates] == [g.passed for g in below.results.run.gates] == [True, False]
    assert above.results.run.progress == below.results.run.progress
    assert comparable(above.results) == comparable(below.results)
    assert [(r.id, r.provenance.trial, r.output.text) for r in above.records] == [
        (r.id, r.provenance.trial, r.output.text) for r in below.records
    ]
    # Asked for, the store stays: results in SQLite, the records' and outputs' shards in its object directory.
    above.results.close()
    kept = tmp_path / "kept"
    assert (kept / "results.sqlite").exists() and any((kept / "objects").iterdir())
    async with await SqlMetadataStore.open_sqlite(kept / "results.sqlite") as store:
        assert sum((await store.count_results(above.results.run.project, above.results.run.id)).values()) == 54


def model_target(server: FakeOpenAI) -> dict[str, Any]:
    return {"model": {"connector": "openai-compatible", "model": "target-model", "baseUrl": server.base_url,
                      "params": {"max_retries": 1}}}


async def test_a_stopped_run_stores_its_unrun_evaluations_as_cancelled_results_in_sqlite(tmp_path: Path) -> None:
    async with FakeOpenAI(reply=lambda body: "yes") as server:
        spec = {"target": model_target(server), "trials": 3, "concurrency": 1, "evaluators": [{"ref": "exact-match"}],
                "budget": {"tokens": 40}}
        run = spec_file(tmp_path, spec, QUESTIONS)
        over = await execute_run(run, base_dir=tmp_path, retry=FAST, memory_budget=TINY_BUDGET)
        calls = len(server.requests)
        cancel = asyncio.Event()
        cancel.set()  # before the run starts: the same cancelled document either way
        cancelled = spec_file(tmp_path, {"target": model_target(server), "evaluators": [{"ref": "exact-match"}]},
                              QUESTIONS)
        below, above = [(await execute_run(cancelled, base_dir=tmp_path, cancel=cancel, memory_budget=budget)).results
                        for budget in (None, TINY_BUDGET)]
    assert above.stored is not None and above.run.state == below.run.state == RUN_STATE_CANCELLED
    assert comparable(above) == comparable(below) and len(above) == 9
    assert all(r.outcome == OUTCOME_CANCELLED for r in above)
    above.close()
    with over.results as results:
        assert results.stored is not None and results.run.state == RUN_STATE_BUDGET_EXCEEDED
        assert calls < 27 and results.run.progress.cancelled > 0
        assert sum(r.outcome == OUTCOME_CANCELLED for r in results) == results.run.progress.cancelled
        assert len(list(results)) == len(results) > 0  # as many read back as SQLite counted


def test_the_temporary_store_goes_when_the_results_are_collected() -> None:
    results = evalsi.evaluate(ROWS[:10], ["exact-match"], memory_budget=0)
    assert results.stored is not None
    directory = results.stored.directory
    assert directory.exists() and [r.record_id for r in results] == [row["id"] for row in ROWS[:10]]
    del results
    gc.collect()
    assert not directory.exists()


def test_reading_pages_can_stop_early_and_start_again(tmp_path: Path) -> None:
    with evalsi.evaluate(ROWS, ["exact-match"], memory_budget=0) as results:
        assert results.stored is not None
        pages = results.stored.pages(page_size=7)
        assert [r.record_id for r in next(pages)] == [row["id"] for row in ROWS[:7]]
        pages.close()  # the reading thread ends; nothing hangs
        assert [len(page) for page in results.stored.pages(page_size=50)] == [50, 50, 20]
        frame = results.to_pandas()
        assert len(frame) == 120 and list(frame["record_id"][:3]) == ["r000", "r001", "r002"]
    assert results.stored.closed


async def test_evaluate_inside_a_running_loop_reads_its_stored_results() -> None:
    # A notebook's case: evaluate() runs on a helper thread, the results are read while a loop runs here.
    results = evalsi.evaluate(ROWS[:5], ["exact-match"], memory_budget=0)
    await asyncio.sleep(0)
    assert [r.record_id for r in results] == [row["id"] for row in ROWS[:5]]
    results.close()


def test_the_budget_comes_from_the_argument_then_the_environment_then_the_default() -> None:
    assert memory_budget_mb(64) == 64
    assert memory_budget_mb(None, {MEMORY_BUDGET_ENV: "12.5"}) == 12.5
    assert memory_budget_mb(None, {}) == DEFAULT_MEMORY_BUDGET_MB
    with pytest.raises(BadInputError, match=MEMORY_BUDGET_ENV):
        memory_budget_mb(None, {MEMORY_BUDGET_ENV: "lots"})
    with pytest.raises(BadInputError, match="MiB >= 0"):
        memory_budget_mb(-1)


def test_the_estimate_counts_results_and_generated_copies(tmp_path: Path) -> None:
    records = [Record(id=f"r{i}") for i in range(100)]
    outputs = spec_file(tmp_path, {"evaluators": [{"ref": "exact-match"}, {"ref": "fuzzy-match"}]}, [])
    assert estimated_run_bytes(outputs, records) == 100 * 2 * RESULT_BYTES
    assert estimated_run_bytes(outputs, []) == 0
    generating = spec_file(tmp_path, {"target": {"model": {"connector": "openai-compatible", "model": "m"}},
                                      "trials": 2, "evaluators": [{"ref": "exact-match"}]}, [])
    assert estimated_run_bytes(generating, records) > 100 * 2 * RESULT_BYTES


def test_evaluate_refuses_a_negative_budget() -> None:
    with pytest.raises(BadInputError, match="MiB >= 0"):
        evalsi.evaluate(ROWS[:2], ["exact-match"], memory_budget=-5)


def test_the_cli_saves_and_prints_the_same_document_over_its_budget(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from evalsi.cli.main import cli

    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    documents: list[dict[str, Any]] = []
    for flags in ([], ["--memory-budget", "0"], ["--store-dir", str(tmp_path / "kept")]):
        out = tmp_path / f"out{len(documents)}.json"
        result = CliRunner().invoke(cli, ["eval", "--data", str(data), "-e", "exact-match", "--format", "json",
                                          "--output", str(out), *flags])
        assert result.exit_code == 0, result.stderr
        assert "saved 120 results" in result.stderr
        printed, saved = json.loads(result.stdout), json.loads(out.read_text())
        assert printed == saved
        for key in ("id", "createTime", "startTime", "endTime"):
            saved.pop(key)
        saved["manifest"].pop("created")
        documents.append(saved)
    assert documents[0] == documents[1] == documents[2] and len(documents[0]["results"]) == 120
    assert (tmp_path / "kept" / "results.sqlite").exists()

    spec = tmp_path / "run.yaml"
    spec.write_text(yaml.safe_dump({"apiVersion": "evals.si/v1alpha1", "kind": "EvalRun", "metadata": {"name": "x"},
                                    "spec": {"dataset": {"path": str(data)}, "evaluators": [{"ref": "exact-match"}]}}))
    server = ["--server", "http://127.0.0.1:9"]
    refused = CliRunner().invoke(cli, ["run", "-f", str(spec), *server, "--memory-budget", "1"])
    assert refused.exit_code == 2 and "embedded runs only" in refused.stderr
    embedded = CliRunner().invoke(cli, ["run", "-f", str(spec), "--memory-budget", "0", "--format", "md"])
    assert embedded.exit_code == 0, embedded.stderr
    assert "| exact-match | 120 | 0.667 |" in embedded.stdout


def test_the_environment_sets_the_budget_of_evaluate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MEMORY_BUDGET_ENV, "0")
    with evalsi.evaluate(ROWS[:3], ["exact-match"]) as spilled:
        assert spilled.stored is not None and len(spilled) == 3
    monkeypatch.setenv(MEMORY_BUDGET_ENV, "1")  # 1 MiB holds 3 results
    with evalsi.evaluate(ROWS[:3], ["exact-match"]) as kept:
        assert kept.stored is None and len(kept.run.results) == 3
