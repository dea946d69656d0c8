"""The run driver over the in-memory ports (runs.local: bus.memory + stores.memory around the same Executor as a
worker): no server, no NATS, no SQL. Expected figures are worked out from the rows (statistics, scipy, statsmodels),
never by the engine under test."""

from __future__ import annotations

import asyncio
import json
import statistics
from pathlib import Path
from typing import Any

import pytest
import yaml
from statsmodels.stats.proportion import proportion_confint

from evalsi import Output, evaluator
from evalsi.datasets import load_dataset
from evalsi.evaluators import Pack, Registry
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
from evalsi.v1alpha1.score_pb2 import ERROR_KIND_INFRA, OUTCOME_CANCELLED, OUTCOME_ERROR, OUTCOME_SCORED


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


def summaries(run: Run) -> dict[str, tuple[Any, ...]]:
    """Metric -> (n, mean, std, ci low, ci high, ci method, clusters)."""
    return {s.metric: (s.n, s.mean, s.std, s.ci.low, s.ci.high, s.ci.method, s.clusters) for s in run.summaries}


def scores(run: Run) -> dict[tuple[str, str, int], dict[str, Any]]:
    """(evaluator, record, trial) -> score name -> value, for the scored results."""
    return {
        (r.evaluator, r.record_id, r.trial): {s.name: getattr(s, s.WhichOneof("value") or "name") for s in r.scores}
        for r in run.results
        if r.outcome == OUTCOME_SCORED
    }


# What each metric of ROWS must be, worked out from the rows, not by the engine: every output is "yes" and the
# reference is "yes" unless i % 3 == 0, so 26 of 40 match (exact-match, and fuzzy-match's similarity is 1.0 or 0.0
# since "yes" and "no" share no character).
MATCHES = [row["reference"] == row["output"] for row in ROWS]
PASSED, N = sum(MATCHES), len(ROWS)
STD = statistics.stdev(map(float, MATCHES))


async def test_outputs_given_clustered_with_a_seeded_bootstrap(tmp_path: Path) -> None:
    spec = {
        "evaluators": [{"ref": "exact-match"}, {"ref": "fuzzy-match", "params": {"threshold": 0.8}}],
        "summary": {"clusterBy": "topic", "interval": "bootstrap", "seed": 11, "bootstrapResamples": 300},
        "gates": ["metric('exact-match').mean >= 0.5"],
    }
    run = await driven(tmp_path, spec)
    assert (run.state, run.message) == (RUN_STATE_SUCCEEDED, "")
    # Four topics of ten records: the cluster means are 0.6 (t0, t3) and 0.7 (t1, t2). A cluster resample draws
    # four topics; drawing only 0.6s (or only 0.7s) has probability 1/16 > 2.5%, so the 95% percentile interval
    # is exactly [0.6, 0.7] for any seed.
    topic_means = {
        topic: statistics.mean(m for m, row in zip(MATCHES, ROWS, strict=True) if row["metadata"]["topic"] == topic)
        for topic in ("t0", "t1", "t2", "t3")
    }
    assert topic_means == pytest.approx({"t0": 0.6, "t1": 0.7, "t2": 0.7, "t3": 0.6})
    expected = (N, PASSED / N, pytest.approx(STD), pytest.approx(0.6), pytest.approx(0.7), "bootstrap-cluster", 4)
    assert summaries(run) == {"exact-match": expected, "fuzzy-match.similarity": expected,
                              "fuzzy-match.passed": expected}
    assert [(g.passed, g.message) for g in run.gates] == [(True, "metric('exact-match').mean = 0.65 >= 0.5")]
    got = scores(run)
    for row, match in zip(ROWS, MATCHES, strict=True):
        assert got["exact-match", row["id"], 0] == {"passed": match}
        assert got["fuzzy-match", row["id"], 0] == {"similarity": float(match), "passed": match}
    assert (run.progress.scored, run.progress.errors) == (2 * N, 0)
    assert (run.manifest.seed, run.manifest.target) == (0, "outputs given")
    assert [(e.alias, e.ref) for e in run.manifest.evaluators] == [
        ("exact-match", "builtin/exact-match@1.0.0"), ("fuzzy-match", "builtin/fuzzy-match@1.0.0")]
    assert run.manifest.dataset_version == load_dataset(tmp_path / "data.jsonl").version


async def test_a_dataset_scope_metric_beside_a_record_metric(tmp_path: Path) -> None:
    spec = {"evaluators": [{"ref": "exact-match"}, {"ref": "test/mean-answer-length", "alias": "length"}],
            "seed": 3, "summary": {"seed": 5}}
    run = await driven(tmp_path, spec)
    assert (run.state, run.message) == (RUN_STATE_SUCCEEDED, "")
    low, high = proportion_confint(PASSED, N, alpha=0.05, method="wilson")
    assert summaries(run) == {
        "exact-match": (N, PASSED / N, pytest.approx(STD), pytest.approx(low), pytest.approx(high), "wilson", 0),
        # One value for the dataset (every answer is "yes": 3 characters) over its 40 records; resampling records
        # whose answers are all alike can only give 3.
        "length": (N, 3.0, 0.0, 3.0, 3.0, "bootstrap", 0),
    }
    assert scores(run)["length", "*", 0] == {"chars": 3.0}
    assert (run.progress.scored, run.manifest.seed) == (N + 1, 3)


async def test_a_generating_run_with_trials(tmp_path: Path) -> None:
    rows = [{"id": f"q{i}", "input": f"Is {i} even?", "reference": "yes" if i % 2 == 0 else "no"} for i in range(12)]
    async with FakeOpenAI(reply=lambda body: "yes") as server:
        spec = {
            "target": {"model": {"connector": "openai-compatible", "model": "target-model", "baseUrl": server.base_url,
                                 "params": {"max_retries": 1}}},
            "trials": 3,
            "evaluators": [{"ref": "exact-match"}, {"ref": "test/mean-answer-length", "alias": "length"}],
            "gates": ["metric('exact-match').passAtK(3) >= 0.5"],
        }
        run = await driven(tmp_path, spec, rows)
    assert (run.state, run.message) == (RUN_STATE_SUCCEEDED, "")
    assert len(server.requests) == 36  # every record, three times
    # The target always answers "yes": the even records pass all three trials and the odd ones none, so each
    # record's pass rate, pass@3 and pass^3 are all 1 (even) or 0 (odd). With twelve clusters constant within,
    # trials add nothing: each interval is Clopper-Pearson's for 6 of 12 records (Korn-Graubard at 12 units).
    per_record = [1.0 if i % 2 == 0 else 0.0 for i in range(12)]
    low, high = proportion_confint(6, 12, alpha=0.05, method="beta")
    trials = [value for value in per_record for _ in range(3)]
    ci = (pytest.approx(low), pytest.approx(high))
    assert summaries(run) == {
        "exact-match": (36, 0.5, pytest.approx(statistics.stdev(trials)), *ci, "korn-graubard", 12),
        "exact-match.pass@3": (12, 0.5, pytest.approx(statistics.stdev(per_record)), *ci, "korn-graubard", 0),
        "exact-match.pass^3": (12, 0.5, pytest.approx(statistics.stdev(per_record)), *ci, "korn-graubard", 0),
        "length": (36, 3.0, 0.0, 3.0, 3.0, "bootstrap", 0),
    }
    assert {s.metric: s.k for s in run.summaries if s.k} == {"exact-match.pass@3": 3, "exact-match.pass^3": 3}
    assert [(g.passed, g.message) for g in run.gates] == [
        (True, "metric('exact-match').passAtK(3) = 0.5 >= 0.5")]
    got = scores(run)
    assert {key: value for key, value in got.items() if key[0] == "exact-match"} == {
        ("exact-match", f"q{i}", trial): {"passed": i % 2 == 0} for i in range(12) for trial in range(3)}
    assert got["length", "*", 0] == {"chars": 3.0}
    assert run.manifest.unpinned == ["target: openai-compatible model 'target-model' is served by an API and "
                                     "cannot be pinned"]


async def test_a_target_that_always_fails_fails_the_run(tmp_path: Path) -> None:
    rows = [{"id": f"q{i}", "input": f"q {i}", "reference": "x"} for i in range(5)]
    async with FakeOpenAI(reply=lambda body: "x") as server:
        server.enqueue(*[("status", 503)] * 100)
        spec = {"target": {"model": {"connector": "openai-compatible", "model": "m", "baseUrl": server.base_url,
                                     "params": {"max_retries": 0}}},
                "evaluators": [{"ref": "exact-match"}]}
        run = await driven(tmp_path, spec, rows)
    assert run.state == RUN_STATE_FAILED
    assert run.message.startswith("every target call failed (5); the first: ")
    # Each record's evaluation is an infrastructure error naming the target, never a failed exact-match.
    assert sorted((r.evaluator, r.record_id, r.outcome, r.error_kind, len(r.scores)) for r in run.results) == [
        ("exact-match", f"q{i}", OUTCOME_ERROR, ERROR_KIND_INFRA, 0) for i in range(5)]
    assert all(r.reason.startswith(f"target openai-compatible:m @ {server.base_url}") for r in run.results)
    assert run.progress.errors == 5 and run.summaries[0].infra_errors == 5 and run.summaries[0].n == 0


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
