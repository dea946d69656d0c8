"""The run driver over the in-memory ports (runs.local: bus.memory + stores.memory around the same Executor as a
worker): no server, no NATS, no SQL. Its result documents agree with the embedded engine's field by field."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalsi import Output, evaluator
from evalsi.datasets import load_dataset
from evalsi.evaluators import Pack, Registry
from evalsi.judges import RetryPolicy
from evalsi.runs.embedded import execute_run
from evalsi.runs.local import run_in_process
from evalsi.runs.spec import parse_eval_run
from evalsi.testing import FakeOpenAI
from evalsi.v1alpha1.run_pb2 import (
    RUN_STATE_BUDGET_EXCEEDED,
    RUN_STATE_CANCELLED,
    RUN_STATE_FAILED,
    RUN_STATE_SUCCEEDED,
    Run,
)
from evalsi.v1alpha1.run_service_pb2 import RUN_EVENT_TYPE_PROGRESS, RUN_EVENT_TYPE_SUMMARY, RunEvent
from evalsi.v1alpha1.score_pb2 import OUTCOME_CANCELLED, OUTCOME_SCORED

FAST = RetryPolicy(base_delay_s=0.001, max_delay_s=0.005)


@evaluator(
    "test/mean-answer-length",
    scope="dataset",
    requires=["output"],
    outputs=[Output("chars", "number")],
    mapper=lambda record: len(record.output.text),
)
def mean_answer_length(values: list[int]) -> float:
    return sum(values) / len(values)


REGISTRY = Registry.from_entry_points()
REGISTRY.add_pack(Pack("test-driver", (mean_answer_length,)))

ROWS = [
    {"id": f"s{i}", "input": f"question {i}", "reference": "yes" if i % 3 else "no", "output": "yes",
     "metadata": {"topic": f"t{i % 4}"}}
    for i in range(40)
]


def document(tmp_path: Path, spec: dict[str, Any], rows: list[dict[str, Any]] = ROWS) -> Any:
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    raw = {"apiVersion": "evals.si/v1alpha1", "kind": "EvalRun", "metadata": {"name": "driven"},
           "spec": {"dataset": {"path": str(path)}, **spec}}
    return parse_eval_run(yaml.safe_load(yaml.safe_dump(raw)), source="run.yaml")


async def driven(tmp_path: Path, spec: dict[str, Any], rows: list[dict[str, Any]] = ROWS, **options: Any) -> Run:
    run = document(tmp_path, spec, rows)
    dataset = load_dataset(tmp_path / "data.jsonl")
    return await run_in_process(run, dataset.records, registry=REGISTRY, source=dataset.source,
                                version=dataset.version, cache=False, **options)


async def embedded(tmp_path: Path, spec: dict[str, Any], rows: list[dict[str, Any]] = ROWS) -> Run:
    outcome = await execute_run(document(tmp_path, spec, rows), base_dir=tmp_path, registry=REGISTRY, cache=False,
                                retry=FAST)
    return outcome.results.run


def comparable(run: Run) -> dict[str, Any]:
    """A result document without what differs between two runs of one spec (ids, times, durations)."""
    results = sorted(
        (r.evaluator, r.record_id, r.trial, r.outcome, r.error_kind,
         tuple((s.name, s.WhichOneof("value"), str(getattr(s, s.WhichOneof("value") or "name"))) for s in r.scores))
        for r in run.results
    )
    manifest = run.manifest
    return {
        "state": run.state,
        "message": run.message,
        "summaries": [str(s) for s in run.summaries],
        "gates": [(g.expression, g.passed, g.message) for g in run.gates],
        "results": results,
        "manifest": (manifest.spec_hash, manifest.dataset_version, manifest.seed, manifest.target,
                     [str(e) for e in manifest.evaluators], dict(manifest.judges), list(manifest.unpinned)),
        "progress": (run.progress.scored, run.progress.skipped, run.progress.errors, run.progress.cancelled),
    }


MATRIX = {
    "outputs given, clustered, bootstrap with a seed": {
        "evaluators": [{"ref": "exact-match"}, {"ref": "fuzzy-match", "params": {"threshold": 0.8}}],
        "summary": {"clusterBy": "topic", "interval": "bootstrap", "seed": 11, "bootstrapResamples": 300},
        "gates": ["metric('exact-match').mean >= 0.5"],
    },
    "a dataset-scope metric seeded apart from the target": {
        "evaluators": [{"ref": "exact-match"}, {"ref": "test/mean-answer-length", "alias": "length"}],
        "seed": 3,
        "summary": {"seed": 5},
    },
}


@pytest.mark.parametrize("name", sorted(MATRIX))
async def test_a_driven_run_equals_the_embedded_run(tmp_path: Path, name: str) -> None:
    spec = MATRIX[name]
    served, local = await driven(tmp_path, spec), await embedded(tmp_path, spec)
    assert served.state == RUN_STATE_SUCCEEDED, served.message
    assert comparable(served) == comparable(local)
    assert len(served.results) == len(local.results) > 0


async def test_a_generating_run_with_trials_equals_the_embedded_run(tmp_path: Path) -> None:
    rows = [{"id": f"q{i}", "input": f"Is {i} even?", "reference": "yes" if i % 2 == 0 else "no"} for i in range(12)]
    async with FakeOpenAI(reply=lambda body: "yes") as server:
        spec = {
            "target": {"model": {"connector": "openai-compatible", "model": "target-model", "baseUrl": server.base_url,
                                 "params": {"max_retries": 1}}},
            "trials": 3,
            "evaluators": [{"ref": "exact-match"}, {"ref": "test/mean-answer-length", "alias": "length"}],
            "gates": ["metric('exact-match').passAtK(3) >= 0.5"],
        }
        served, local = await driven(tmp_path, spec, rows), await embedded(tmp_path, spec, rows)
    assert served.state == RUN_STATE_SUCCEEDED, served.message
    assert comparable(served) == comparable(local)
    assert {r.trial for r in served.results if r.evaluator == "exact-match"} == {0, 1, 2}


async def test_a_target_that_always_fails_fails_the_run_the_same_way(tmp_path: Path) -> None:
    rows = [{"id": f"q{i}", "input": f"q {i}", "reference": "x"} for i in range(5)]
    async with FakeOpenAI(reply=lambda body: "x") as server:
        server.enqueue(*[("status", 503)] * 100)
        spec = {"target": {"model": {"connector": "openai-compatible", "model": "m", "baseUrl": server.base_url,
                                     "params": {"max_retries": 0}}},
                "evaluators": [{"ref": "exact-match"}]}
        served, local = await driven(tmp_path, spec, rows), await embedded(tmp_path, spec, rows)
    assert served.state == local.state == RUN_STATE_FAILED
    assert served.message.startswith("every target call failed (5); the first: ")
    assert comparable(served)["results"] == comparable(local)["results"]
    assert served.progress.errors == 5 and served.summaries[0].infra_errors == 5


async def test_a_token_budget_stops_the_run(tmp_path: Path) -> None:
    rows = [{"id": f"q{i}", "input": f"q {i}", "reference": "yes"} for i in range(1200)]  # 3 generate tasks
    async with FakeOpenAI(reply=lambda body: "yes") as server:
        spec = {"target": {"model": {"connector": "openai-compatible", "model": "m", "baseUrl": server.base_url}},
                "evaluators": [{"ref": "exact-match"}], "budget": {"tokens": 50}}
        served = await driven(tmp_path, spec, rows)
    assert served.state == RUN_STATE_BUDGET_EXCEEDED
    assert served.message.startswith("token budget exceeded: ")
    assert len(server.requests) < 1200  # stopped before every record was generated
    # Every evaluation is accounted for, as embedded: what the budget kept from running is CANCELLED.
    progress = served.progress
    assert progress.cancelled > 0 and progress.scored + progress.errors + progress.cancelled == len(rows)
    assert served.message.endswith(f"; {progress.cancelled} evaluations were cancelled")
    assert {r.reason for r in served.results if r.outcome == OUTCOME_CANCELLED} <= {
        "cancelled before it ran", "cancelled before the target was called"}


# Set by the test once it has cancelled the run: the second shard's calls in flight then finish.
SECOND_SHARD_RELEASED = asyncio.Event()


@evaluator("test/held-after-500", requires=["output"], outputs=[Output("ok", "boolean")])
async def held_after_500(record: Any) -> bool:
    if int(record.id[1:]) >= 500:  # the second shard's evaluation does not finish before the run is cancelled
        await SECOND_SHARD_RELEASED.wait()
    return True


REGISTRY.add_pack(Pack("test-driver-held", (held_after_500,)))


async def test_partial_summaries_fold_in_as_results_arrive_and_a_cancel_stops_the_run(tmp_path: Path) -> None:
    rows = [{"id": f"q{i:04d}", "input": f"q {i}", "output": "yes"} for i in range(1000)]  # two shards of 500
    events: list[RunEvent] = []
    cancel = asyncio.Event()
    run = asyncio.create_task(driven(tmp_path, {"evaluators": [{"ref": "test/held-after-500"}]}, rows,
                                     cancel=cancel, events=events))
    while not any(e.type == RUN_EVENT_TYPE_SUMMARY and e.message == "partial" for e in events):
        await asyncio.sleep(0.05)
    cancel.set()
    await asyncio.sleep(0.2)  # the cancel is seen: nothing new starts
    SECOND_SHARD_RELEASED.set()
    served = await asyncio.wait_for(run, timeout=60)
    partial = next(e for e in events if e.message == "partial")
    assert (partial.summaries[0].n, partial.summaries[0].mean) == (500, 1.0)  # the first shard, folded as it came
    assert served.state == RUN_STATE_CANCELLED
    # The second shard's 16 calls in flight (the default concurrency) finished and are kept; the rest never ran.
    assert served.message == "cancelled; 484 evaluations did not run, the figures are partial"
    assert served.progress.cancelled == served.summaries[0].cancelled == 484
    assert sum(r.outcome == OUTCOME_SCORED for r in served.results) == served.summaries[0].n == 516
    final = events[-1]
    assert final.type == RUN_EVENT_TYPE_SUMMARY and final.state == RUN_STATE_CANCELLED
    completed = [e.progress.completed for e in events if e.type == RUN_EVENT_TYPE_PROGRESS]
    assert completed == sorted(completed) and completed[-1] == 1  # one task of two finished
