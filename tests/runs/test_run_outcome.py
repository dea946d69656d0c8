"""The rules an embedded and a served run share (runs.outcome, runs.dry_run, the budgets of runs.plan): the final
state, the manifest, the bootstrap seed of dataset-scope metrics and the dry-run text."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

import pytest
from google.protobuf import duration_pb2

from evalsi import Output, evaluator
from evalsi.bus.v1alpha1.bus_pb2 import STAGE_REDUCE, Task
from evalsi.datasets import load_dataset
from evalsi.evaluators import Pack, Registry
from evalsi.judges.panel import JudgeSet
from evalsi.records import make_record, to_value
from evalsi.runs.binding import resolve_evaluators
from evalsi.runs.dry_run import dry_run_document, dry_run_text, served_dry_run
from evalsi.runs.embedded import dry_run
from evalsi.runs.execute import Executor
from evalsi.runs.outcome import (
    TARGET_FAILURE_KEY,
    TargetCalls,
    final_state,
    run_manifest,
    target_calls_of,
    target_calls_of_records,
)
from evalsi.runs.plan import wall_clock_exceeded
from evalsi.runs.spec import load_eval_run, spec_hash
from evalsi.v1alpha1.evaluator_pb2 import EvaluatorRef
from evalsi.v1alpha1.run_pb2 import (
    RUN_STATE_BUDGET_EXCEEDED,
    RUN_STATE_CANCELLED,
    RUN_STATE_FAILED,
    RUN_STATE_SUCCEEDED,
    Budget,
)
from evalsi.v1alpha1.score_pb2 import SummaryOptions

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "runs"


def test_a_budget_outranks_a_cancel_which_outranks_a_failing_target() -> None:
    every_call_failed = TargetCalls(attempted=3, failed=3, first_failure="HTTP 503")
    assert final_state(budget_exceeded="token budget exceeded: 12 tokens", cancelled=True, generates=True,
                       target_calls=every_call_failed, cancelled_evaluations=4) == (
        RUN_STATE_BUDGET_EXCEEDED, "token budget exceeded: 12 tokens; 4 evaluations were cancelled")
    assert final_state(cancelled=True, generates=True, target_calls=every_call_failed, cancelled_evaluations=2) == (
        RUN_STATE_CANCELLED, "cancelled; 2 evaluations did not run, the figures are partial")
    assert final_state(generates=True, target_calls=every_call_failed) == (
        RUN_STATE_FAILED, "every target call failed (3); the first: HTTP 503")


@pytest.mark.parametrize(
    ("generates", "calls", "failed_tasks", "expected"),
    [
        (True, TargetCalls(3, 2, "HTTP 503"), 0, (RUN_STATE_SUCCEEDED, "")),  # one call answered
        (True, TargetCalls(0, 0), 0, (RUN_STATE_SUCCEEDED, "")),  # nothing to prompt with: nothing attempted
        (False, TargetCalls(3, 3, "x"), 0, (RUN_STATE_SUCCEEDED, "")),  # outputs given: no target to fail
        (False, None, 2, (RUN_STATE_SUCCEEDED, "2 task(s) failed after retries (their evaluations are infra errors)")),
    ],
)
def test_a_run_succeeds_unless_every_attempted_target_call_failed(
    generates: bool, calls: TargetCalls | None, failed_tasks: int, expected: tuple[int, str]
) -> None:
    assert final_state(generates=generates, target_calls=calls, failed_tasks=failed_tasks) == expected


def test_skipped_records_are_not_attempted_calls_and_markers_count_like_failures() -> None:
    assert target_calls_of([("skipped", "no input"), ("infra", "HTTP 500"), ("cancelled", "")], 5) == TargetCalls(
        attempted=4, failed=1, first_failure="HTTP 500")
    records = [make_record(input="a", output="A"), make_record(input="b"), make_record(input="")]
    records[1].metadata[TARGET_FAILURE_KEY].CopyFrom(to_value({"kind": "infra", "reason": "HTTP 502"}))
    records[2].metadata[TARGET_FAILURE_KEY].CopyFrom(to_value({"kind": "skipped", "reason": "no input"}))
    assert target_calls_of_records(records) == TargetCalls(attempted=2, failed=1, first_failure="HTTP 502")
    assert TargetCalls(2, 1, "a") + TargetCalls(3, 3, "b") == TargetCalls(5, 4, "a")


def test_the_manifest_records_the_targets_seed_and_a_served_judge_by_its_connection() -> None:
    run = load_eval_run(EXAMPLES / "qa-model.yaml")
    run.spec.seed, run.spec.summary.seed = 7, 99
    run.spec.judges["served"].connection = "team-judge"
    run.spec.judges["served"].model = "judge-x"  # the api pins a connection's default model into the spec
    bound = resolve_evaluators(list(run.spec.evaluators), Registry.from_entry_points())
    from evalsi.judges.panel import judge_config_from_spec

    judges = {name: judge_config_from_spec(name, spec) for name, spec in run.spec.judges.items()}
    manifest = run_manifest(run.spec, bound, SimpleNamespace(source="capitals.jsonl", version="v1"), judges)
    assert manifest.seed == 7 and manifest.spec_hash == spec_hash(run)
    assert manifest.dataset == "capitals.jsonl" and manifest.dataset_version == "v1"
    assert manifest.judges["served"] == "connection:team-judge:judge-x"
    assert "judge served: connection:team-judge:judge-x is served by an API and cannot be pinned" in manifest.unpinned
    assert manifest.target.startswith("openai-compatible:local-model")
    assert [e.alias or e.ref for e in manifest.evaluators] == [b.alias for b in bound]


def test_the_wall_clock_budget_counts_from_the_start() -> None:
    budget = Budget(wall_clock=duration_pb2.Duration(seconds=30))
    assert wall_clock_exceeded(budget, 29.9) is None
    assert wall_clock_exceeded(budget, 30.0) == "wall-clock budget exceeded: 30 s elapsed"
    assert wall_clock_exceeded(Budget(), 1e9) is None


def test_a_served_dry_run_says_exactly_what_the_embedded_one_says() -> None:
    spec = EXAMPLES / "qa-model.yaml"
    prepared, projection = dry_run(load_eval_run(spec), base_dir=spec.parent)
    run = prepared.run
    embedded = dry_run_text(prepared.plan, projection, name=run.metadata.name, project=run.metadata.project,
                            dataset=run.spec.dataset.path)
    records = load_dataset(spec.parent / run.spec.dataset.path).records
    served, document = served_dry_run(load_eval_run(spec), records, project=run.metadata.project,
                                      dataset=run.spec.dataset.path, registry=Registry.from_entry_points())
    assert served == embedded
    assert document == dry_run_document(prepared.plan, projection, name=run.metadata.name,
                                        project=run.metadata.project)
    assert document["tasks"] == 12 and document["target"]["calls"] == 24  # type: ignore[index]
    assert "tasks        12 (generate 3, evaluate 9; by pool: judge 3, cpu 9)" in served
    assert "target       24 calls" in served and "projected    ≈" in served


@evaluator(
    "test/mean-length",
    scope="dataset",
    requires=["output"],
    outputs=[Output("chars", "number")],
    mapper=lambda record: len(record.output.text),
)
def mean_length(values: list[int]) -> float:
    return sum(values) / len(values)


async def test_a_worker_seeds_a_dataset_scope_bootstrap_with_the_summary_seed_not_the_targets() -> None:
    registry = Registry.from_entry_points()
    registry.add_pack(Pack("test-outcome", (mean_length,)))
    rng = random.Random(3)
    records = [make_record(id=f"r{i}", input="q", output="x" * rng.randrange(1, 40)) for i in range(30)]

    async def interval(task_seed: int, summary_seed: int) -> tuple[float, float]:
        task = Task(key="k", run_id="r", project="default", stage=STAGE_REDUCE, seed=task_seed,
                    summary=SummaryOptions(seed=summary_seed, bootstrap_resamples=200))
        task.records.extend(records)
        task.evaluators.append(EvaluatorRef(ref="test/mean-length"))
        async with JudgeSet({}, cache=False) as judges:
            (result,) = (await Executor(registry, judges).execute(task)).results
        (score,) = result.scores
        return score.metadata["ci_low"].number_value, score.metadata["ci_high"].number_value

    same_summary_seed = {await interval(task_seed, 5) for task_seed in (0, 1, 123)}
    assert len(same_summary_seed) == 1  # the target's seed does not move the interval
    assert await interval(0, 6) != same_summary_seed.pop()  # the summary's seed does
