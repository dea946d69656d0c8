"""Planning: shards, tasks with deterministic unique keys, and the dry run's projection."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from evalsi.evaluators import Registry
from evalsi.records import make_record
from evalsi.runs.plan import RecordTally, budget_exceeded, plan_run, projection, result_key, task_key
from evalsi.runs.spec import bind_evaluators, parse_eval_run
from evalsi.v1alpha1.record_pb2 import Usage
from evalsi.v1alpha1.run_pb2 import Budget

REGISTRY = Registry.from_entry_points()


def make_run(spec: dict[str, Any]) -> Any:
    document = {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "spec": {"dataset": {"path": "data.jsonl"}, **spec},
    }
    return parse_eval_run(yaml.safe_load(yaml.safe_dump(document)), source="run.yaml")


MODEL = {
    "model": {
        "connector": "openai-compatible",
        "model": "m",
        "baseUrl": "http://127.0.0.1:1/v1",
        "systemPrompt": "Be brief.",  # 9 characters
        "params": {"max_tokens": 10, "price_per_1k_input": 1.0, "price_per_1k_output": 2.0},
    }
}
EVALUATORS = [
    {"ref": "exact-match"},
    {"ref": "llm-judge", "alias": "judge"},
    {"ref": "token-usage"},
]


def records(n: int) -> list[Any]:
    return [make_record(id=f"r{i}", input="x" * 40, reference="y" * 8) for i in range(n)]


def plan_for(spec: dict[str, Any], n: int, run_id: str = "run1", shard_size: int = 500) -> Any:
    run = make_run(spec)
    return plan_run(run, records(n), evaluators=bind_evaluators(run, REGISTRY), run_id=run_id, shard_size=shard_size)


def projected(plan: Any, n: int) -> Any:
    return projection(plan, RecordTally.for_spec(plan.spec, (e.scope for e in plan.evaluators)).add_all(records(n)))


def test_shards_are_contiguous_ranges() -> None:
    plan = plan_for({"evaluators": [{"ref": "exact-match"}]}, 1201)
    assert [(s.start, s.stop) for s in plan.shards] == [(0, 500), (500, 1000), (1000, 1201)]
    assert plan.trials == 1 and not plan.generates
    assert plan_for({"evaluators": [{"ref": "exact-match"}]}, 0).shards == ()


def test_task_keys_are_deterministic_unique_and_follow_the_documented_format() -> None:
    spec = {"target": MODEL, "trials": 3, "evaluators": EVALUATORS, "judges": {"default": {"model": "j"}}}
    first = list(plan_for(spec, 1201, shard_size=500).tasks())
    second = list(plan_for(spec, 1201, shard_size=500).tasks())
    assert [t.key for t in first] == [t.key for t in second]
    assert len({t.key for t in first}) == len(first) == 3 * 3 * (1 + 3)
    keys = {t.key for t in first}
    assert "run1/0/generate/0/target" in keys
    assert "run1/2/evaluate/1/exact-match@1.0.0" in keys
    assert "run1/1/evaluate/2/judge@1.0.0" in keys
    by_key = {t.key: t for t in first}
    assert by_key["run1/2/evaluate/1/exact-match@1.0.0"].depends_on == ("run1/2/generate/1/target",)
    assert by_key["run1/2/evaluate/1/exact-match@1.0.0"].pool == "cpu"
    assert by_key["run1/1/evaluate/2/judge@1.0.0"].pool == "judge"
    assert (by_key["run1/2/generate/1/target"].start, by_key["run1/2/generate/1/target"].stop) == (1000, 1201)
    assert task_key("r", 0, "evaluate", 1, "a@1.0.0") == "r/0/evaluate/1/a@1.0.0"
    assert result_key("r", "sample-7", 2, "exact-match") == "r/sample-7/2/exact-match"
    assert {t.key.split("/")[0] for t in plan_for(spec, 10, run_id="other").tasks()} == {"other"}


def test_evaluators_are_grouped_by_pool_and_dataset_scope_reduces_once() -> None:
    spec = {"evaluators": [*EVALUATORS, {"ref": "exact-match", "alias": "em2"}], "judges": {"default": {"model": "j"}}}
    plan = plan_for(spec, 10)
    assert plan.pools == {"cpu": ("exact-match", "token-usage", "em2"), "judge": ("judge",)}
    assert plan.task_counts() == {"generate": 0, "evaluate": 4, "reduce": 0}
    with pytest.raises(ValueError, match="run_id"):
        plan_for(spec, 10, run_id="a/b")


def test_projection_counts_tasks_evaluations_tokens_and_cost() -> None:
    spec = {"target": MODEL, "trials": 3, "evaluators": EVALUATORS, "judges": {"default": {"model": "j"}}}
    plan = plan_for(spec, 10)
    p = projected(plan, 10)
    assert p.tasks == 3 * (1 + 3) and p.tasks_by_stage == {"generate": 3, "evaluate": 9}
    assert p.tasks_by_pool == {"judge": 6, "cpu": 6}
    assert p.evaluations == 3 * 10 * 3
    # Each prompt: "Be brief." (9) + the 40-character input = 49 characters -> 13 tokens.
    assert p.target_calls == 30 and p.target_input_tokens == 13 * 30
    assert p.target_output_tokens == 10 * 30
    assert p.target_cost_usd == pytest.approx(13 * 30 / 1000 * 1.0 + 300 / 1000 * 2.0)
    assert p.judge_calls == 30
    # 10 records x 48 characters (input and reference) x 3 trials = 1,440 characters -> 360 tokens; each call
    # adds about 250 tokens of template and the target's output (at most max_tokens, 10).
    assert p.judge_input_tokens == 360 + (250 + 10) * 30
    assert p.judge_output_tokens == 200 * 30
    assert p.judge_cost_usd is None and any("judge cost" in item for item in p.unknown)
    assert p.total_tokens == p.target_input_tokens + 300 + p.judge_input_tokens + p.judge_output_tokens
    assert p.total_cost_usd == pytest.approx(p.target_cost_usd)


def test_projection_says_what_it_cannot_project() -> None:
    model = {"model": {"model": "m", "baseUrl": "http://127.0.0.1:1/v1"}}
    p = projected(plan_for({"target": model, "evaluators": [{"ref": "exact-match"}]}, 4), 4)
    assert p.target_output_tokens is None and p.target_cost_usd is None
    assert any("max_tokens" in item for item in p.unknown) and any("no prices" in item for item in p.unknown)
    given = projected(plan_for({"evaluators": [{"ref": "exact-match"}]}, 4), 4)
    assert given.target_calls == 0 and given.total_tokens == 0 and given.unknown == []


def test_budget_checks_name_the_budget_and_the_overrun() -> None:
    assert budget_exceeded(Budget(tokens=100), Usage(input_tokens=60, output_tokens=40)) is None
    assert budget_exceeded(Budget(tokens=100), Usage(input_tokens=80, output_tokens=30)) == (
        "token budget exceeded: 110 tokens used of 100 (over by 10)"
    )
    assert budget_exceeded(Budget(usd=0.5), Usage(cost_usd=0.75)) == (
        "cost budget exceeded: $0.7500 spent of $0.5000 (over by $0.2500)"
    )
    assert budget_exceeded(Budget(), Usage(input_tokens=10**9, cost_usd=1e6)) is None
