"""The embedded Run path end to end: the same numbers as evalsi.evaluate, model targets over a fake provider,
retries, infrastructure errors, budgets and cancellation."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import evalsi
from evalsi import Output, evaluator
from evalsi.errors import BadInputError
from evalsi.evaluators import Pack, Registry
from evalsi.judges import RetryPolicy
from evalsi.runs.embedded import execute_run, run_embedded
from evalsi.runs.spec import parse_eval_run
from evalsi.testing import FakeAnthropic, FakeOpenAI
from evalsi.v1alpha1.run_pb2 import (
    RUN_STATE_BUDGET_EXCEEDED,
    RUN_STATE_CANCELLED,
    RUN_STATE_FAILED,
    RUN_STATE_SUCCEEDED,
)
from evalsi.v1alpha1.score_pb2 import (
    ERROR_KIND_INFRA,
    OUTCOME_CANCELLED,
    OUTCOME_ERROR,
    OUTCOME_SCORED,
    OUTCOME_SKIPPED,
)

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart" / "qa.jsonl"
FAST = RetryPolicy(base_delay_s=0.001, max_delay_s=0.005)


@evaluator(
    "test/mean-output-length",
    scope="dataset",
    requires=["output"],
    outputs=[Output("chars", "number")],
    mapper=lambda record: len(record.output.text),
)
def mean_output_length(values: list[int]) -> float:
    return sum(values) / len(values)


REGISTRY = Registry.from_entry_points()
REGISTRY.add_pack(Pack("test-runs", (mean_output_length,)))


def make_run(tmp_path: Path, spec: dict[str, Any], data: Path | list[dict[str, Any]] | None = None) -> Any:
    if isinstance(data, list):
        path = tmp_path / "data.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in data))
        data = path
    document = {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "test-run"},
        "spec": {"dataset": {"path": str(data or QUICKSTART)}, **spec},
    }
    return parse_eval_run(yaml.safe_load(yaml.safe_dump(document)), source="run.yaml")


def model_target(server: FakeOpenAI, **params: Any) -> dict[str, Any]:
    return {
        "model": {
            "connector": "openai-compatible",
            "model": "target-model",
            "baseUrl": server.base_url,
            "systemPrompt": "Answer in one word.",
            "params": {"max_retries": 1, **params},
        }
    }


QUESTIONS = [{"id": f"s{i}", "input": f"question {i}", "reference": "yes", "group": f"g{i % 2}"} for i in range(6)]


def summaries_equal(a: Any, b: Any) -> None:
    assert list(a) == list(b)
    for name in a:
        x, y = a[name], b[name]
        assert (x.n, x.skipped, x.errors, x.k) == (y.n, y.skipped, y.errors, y.k), name
        assert x.HasField("mean") == y.HasField("mean") and x.mean == y.mean, name
        assert x.std == y.std and x.clusters == y.clusters, name
        assert (x.ci.low, x.ci.high, x.ci.method) == (y.ci.low, y.ci.high, y.ci.method), name


EVALUATORS = ["exact-match", "fuzzy-match", "numeric-match", "latency", "cost", "test/mean-output-length"]


@pytest.mark.parametrize("shard_size", [500, 7])
async def test_a_run_over_given_outputs_equals_evalsi_evaluate(tmp_path: Path, shard_size: int) -> None:
    run = make_run(tmp_path, {"target": {"outputs": {}}, "evaluators": [{"ref": e} for e in EVALUATORS]})
    outcome = await execute_run(run, base_dir=tmp_path, registry=REGISTRY, shard_size=shard_size, cache=False)
    expected = await evalsi.evaluate_async(QUICKSTART, EVALUATORS, registry=REGISTRY)
    summaries_equal(outcome.results.summaries, expected.summaries)
    assert outcome.results.summaries["exact-match"].n == 30
    assert len(outcome.plan.shards) == (1 if shard_size == 500 else 5)
    document = outcome.results.run
    assert document.state == RUN_STATE_SUCCEEDED and document.name == "test-run"
    assert len(document.results) == len(expected.results)
    assert document.manifest.target == "outputs given" and document.manifest.dataset_version == (
        expected.run.manifest.dataset_version
    )


async def test_trials_in_the_data_and_summary_options_match_evaluate_too(tmp_path: Path) -> None:
    rows = [
        {"id": f"s{i}", "trial": t, "output": "yes" if (i + t) % 3 else "no", "reference": "yes", "doc": f"d{i % 3}"}
        for i in range(8)
        for t in range(3)
    ]
    spec = {
        "evaluators": [{"ref": "exact-match"}, {"ref": "fuzzy-match"}],
        "summary": {"interval": "bootstrap", "seed": 3, "bootstrapResamples": 500, "confidence": 0.9},
    }
    results = await run_embedded(make_run(tmp_path, spec, rows), base_dir=tmp_path, cache=False, shard_size=5)
    expected = evalsi.evaluate(
        rows, ["exact-match", "fuzzy-match"], interval="bootstrap", seed=3, bootstrap_resamples=500, confidence=0.9
    )
    summaries_equal(results.summaries, expected.summaries)
    assert "exact-match.pass^3" in results.summaries


async def test_a_model_target_generates_every_trial_and_gets_pass_at_k(tmp_path: Path) -> None:
    def reply(body: dict[str, Any]) -> str:
        if body["model"] == "judge-model":
            return '{"reasoning": "fine", "score": 5}'
        question = int(body["messages"][-1]["content"].split()[-1])
        trial = body["seed"] - 7
        return "yes" if question < 2 or (question < 4 and trial != 1) else "no"

    async with FakeOpenAI(reply=reply) as server:
        spec = {
            "target": model_target(server, max_tokens=16, temperature=0.5, price_per_1k_input=1.0,
                                   price_per_1k_output=2.0),
            "trials": 3,
            "seed": 7,
            "evaluators": [{"ref": "exact-match"}, {"ref": "token-usage"}, {"ref": "llm-judge"}],
            "judges": {
                "default": {"connector": "openai-compatible", "model": "judge-model", "baseUrl": server.base_url}
            },
            "gates": ["metric('exact-match').passAtK(3) >= 0.6", "metric('exact-match').passHatK(3) >= 0.5"],
        }
        outcome = await execute_run(make_run(tmp_path, spec, QUESTIONS), base_dir=tmp_path, retry=FAST, cache=False)
        target_requests = [r for r in server.requests if r["model"] == "target-model"]
        judge_requests = [r for r in server.requests if r["model"] == "judge-model"]

    assert len(target_requests) == 18 and len(judge_requests) == 18
    assert sorted({r["seed"] for r in target_requests}) == [7, 8, 9]
    first = target_requests[0]
    assert first["messages"][0] == {"role": "system", "content": "Answer in one word."}
    assert first["temperature"] == 0.5 and first["max_tokens"] == 16
    assert not {"max_retries", "price_per_1k_input", "price_per_1k_output"} & set(first)

    records = outcome.records
    assert len(records) == 18 and {(r.id, r.provenance.trial) for r in records} == {
        (f"s{i}", t) for i in range(6) for t in range(3)
    }
    by_key = {(r.id, r.provenance.trial): r for r in records}
    assert by_key[("s2", 1)].output.text == "no" and by_key[("s2", 0)].output.text == "yes"
    usage = by_key[("s0", 0)].usage
    assert usage.input_tokens > 0 and usage.output_tokens == 1 and usage.latency.ToNanoseconds() > 0
    assert usage.cost_usd == pytest.approx(usage.input_tokens / 1000 + 2 / 1000)
    assert by_key[("s0", 0)].provenance.target.startswith("openai-compatible:target-model @ http://127.0.0.1")

    summaries = outcome.results.summaries
    assert summaries["exact-match"].n == 18 and summaries["exact-match"].mean == pytest.approx(10 / 18)
    assert summaries["exact-match.pass@3"].mean == pytest.approx(4 / 6)  # s0..s3 pass at least once
    assert summaries["exact-match.pass^3"].mean == pytest.approx(2 / 6)  # s0, s1 pass every trial
    assert summaries["exact-match"].ci.method == "korn-graubard" and summaries["exact-match"].clusters == 6
    assert summaries["llm-judge"].n == 18 and summaries["llm-judge"].mean == 1.0
    document = outcome.results.run
    assert [g.passed for g in document.gates] == [True, False]
    assert document.gates[1].message == "metric('exact-match').passHatK(3) = 0.3333 < 0.5"
    target_tokens = sum(r.usage.total_tokens for r in records)
    judge_tokens = sum(s.cost.total_tokens for res in document.results for s in res.scores)
    assert judge_tokens > 0 and document.progress.usage.total_tokens == target_tokens + judge_tokens
    assert document.progress.usage.cost_usd == pytest.approx(sum(r.usage.cost_usd for r in records))
    manifest = document.manifest
    assert manifest.seed == 7 and manifest.target.startswith("openai-compatible:target-model")
    assert any(item.startswith("target: openai-compatible model 'target-model'") for item in manifest.unpinned)
    assert manifest.judges["default"].startswith("openai:judge-model") and len(manifest.spec_hash) == 64


async def test_an_anthropic_target_gets_its_system_prompt_and_no_seed(tmp_path: Path) -> None:
    async with FakeAnthropic(reply=lambda body: "yes") as server:
        target = {"model": {"connector": "anthropic", "model": "claude-x", "baseUrl": server.base_url,
                            "systemPrompt": "Answer in one word."}}
        spec = {"target": target, "trials": 2, "evaluators": [{"ref": "exact-match"}]}
        outcome = await execute_run(make_run(tmp_path, spec, QUESTIONS[:2]), base_dir=tmp_path, retry=FAST)
        assert len(server.requests) == 4
        body = server.requests[0]
        assert body["system"] == "Answer in one word." and "seed" not in body and "temperature" not in body
        assert [m["role"] for m in body["messages"]] == ["user"]
    summary = outcome.results.summaries["exact-match"]
    assert (summary.n, summary.mean) == (4, 1.0) and "exact-match.pass^2" in outcome.results.summaries


async def test_429_then_500_then_ok_is_retried_and_scored_normally(tmp_path: Path) -> None:
    async with FakeOpenAI(reply=lambda body: "yes") as server:
        server.enqueue(("status", 429, {"Retry-After": "0"}), ("status", 500))
        spec = {"target": model_target(server, max_retries=3), "evaluators": [{"ref": "exact-match"}]}
        outcome = await execute_run(make_run(tmp_path, spec, QUESTIONS[:1]), base_dir=tmp_path, retry=FAST)
        assert len(server.requests) == 3
    (result,) = outcome.results.results
    assert result.outcome == OUTCOME_SCORED and result.scores[0].passed
    summary = outcome.results.summaries["exact-match"]
    assert (summary.n, summary.mean, summary.errors) == (1, 1.0, 0)
    assert outcome.results.run.state == RUN_STATE_SUCCEEDED


async def test_a_provider_that_always_fails_gives_infra_errors_not_failures(tmp_path: Path) -> None:
    async with FakeOpenAI(reply=lambda body: "yes") as server:
        server.enqueue(*[("status", 503)] * 100)
        spec = {
            "target": model_target(server),
            "evaluators": [{"ref": "exact-match"}, {"ref": "test/mean-output-length", "alias": "length"}],
            "gates": ["metric('exact-match').mean >= 0.0"],
        }
        outcome = await execute_run(make_run(tmp_path, spec, QUESTIONS), base_dir=tmp_path, registry=REGISTRY,
                                    retry=FAST)
    results = [r for r in outcome.results.results if r.evaluator == "exact-match"]
    assert len(results) == 6
    assert all(r.outcome == OUTCOME_ERROR and r.error_kind == ERROR_KIND_INFRA for r in results)
    assert "HTTP 503" in results[0].reason or "circuit" in results[0].reason.lower()
    summary = outcome.results.summaries["exact-match"]
    assert summary.n == 0 and not summary.HasField("mean") and summary.errors == summary.infra_errors == 6
    length = outcome.results.summaries["length"]
    assert length.n == 0 and length.errors == length.infra_errors == 6
    document = outcome.results.run
    assert document.state == RUN_STATE_FAILED and document.message.startswith("every target call failed (6)")
    (gate,) = document.gates
    assert not gate.passed and "undefined (n = 0: no scored values; 0 skipped, 6 errors)" in gate.message


async def test_one_failed_record_is_an_infra_error_and_the_rest_are_scored(tmp_path: Path) -> None:
    async with FakeOpenAI(reply=lambda body: "yes") as server:
        server.enqueue(("status", 500), ("status", 500))  # max_retries 1: the first record gives up
        spec = {"target": model_target(server), "evaluators": [{"ref": "exact-match"}], "concurrency": 1}
        outcome = await execute_run(make_run(tmp_path, spec, QUESTIONS), base_dir=tmp_path, retry=FAST)
    summary = outcome.results.summaries["exact-match"]
    assert (summary.n, summary.mean, summary.errors, summary.infra_errors) == (5, 1.0, 1, 1)
    assert outcome.results.run.state == RUN_STATE_SUCCEEDED


async def test_a_token_budget_stops_the_run_and_cancels_the_rest(tmp_path: Path) -> None:
    async with FakeOpenAI(reply=lambda body: "yes") as server:
        spec = {
            "target": model_target(server),
            "trials": 3,
            "concurrency": 1,
            "evaluators": [{"ref": "exact-match"}],
            "budget": {"tokens": 40},
        }
        outcome = await execute_run(make_run(tmp_path, spec, QUESTIONS), base_dir=tmp_path, retry=FAST)
        calls = len(server.requests)
    document = outcome.results.run
    assert document.state == RUN_STATE_BUDGET_EXCEEDED
    assert document.message.startswith("token budget exceeded: ") and "of 40 (over by" in document.message
    assert calls < 18 and document.progress.cancelled > 0
    assert sum(r.outcome == OUTCOME_CANCELLED for r in document.results) == document.progress.cancelled


async def test_a_wall_clock_budget_stops_the_run(tmp_path: Path) -> None:
    async with FakeOpenAI(reply=lambda body: "yes") as server:
        server.enqueue(("delay", 0.4))
        spec = {
            "target": model_target(server),
            "concurrency": 1,
            "evaluators": [{"ref": "exact-match"}],
            "budget": {"wallClock": "100ms"},
        }
        outcome = await execute_run(make_run(tmp_path, spec, QUESTIONS), base_dir=tmp_path, retry=FAST)
        assert len(server.requests) == 1  # the call in flight finished; nothing else started
    document = outcome.results.run
    assert document.state == RUN_STATE_BUDGET_EXCEEDED
    assert document.message.startswith("wall-clock budget exceeded: 0.1 s elapsed")
    assert document.progress.cancelled == 6  # the one generated output was not graded either


async def test_cancelling_stops_the_run(tmp_path: Path) -> None:
    cancel = asyncio.Event()
    cancel.set()
    async with FakeOpenAI(reply=lambda body: "yes") as server:
        spec = {"target": model_target(server), "evaluators": [{"ref": "exact-match"}]}
        outcome = await execute_run(make_run(tmp_path, spec, QUESTIONS), base_dir=tmp_path, cancel=cancel)
        assert server.requests == []
    assert outcome.results.run.state == RUN_STATE_CANCELLED
    assert all(r.outcome == OUTCOME_CANCELLED for r in outcome.results.results)


async def test_prompt_templates_render_record_fields_and_skip_what_is_missing(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "input": "2+2", "reference": "4", "topic": "math"},
        {"id": "b", "input": "hi", "reference": "x"},
    ]
    async with FakeOpenAI(reply=lambda body: "4") as server:
        target = model_target(server)
        target["model"]["promptTemplate"] = "[{{metadata.topic}}] {{input}} (id {{id}})"
        spec = {"target": target, "evaluators": [{"ref": "exact-match"}]}
        outcome = await execute_run(make_run(tmp_path, spec, rows), base_dir=tmp_path, retry=FAST)
        assert [r["messages"][-1]["content"] for r in server.requests] == ["[math] 2+2 (id a)"]
    skipped = [r for r in outcome.results.results if r.record_id == "b"]
    assert skipped[0].outcome == OUTCOME_SKIPPED and "no metadata 'topic'" in skipped[0].reason


async def test_what_embedded_runs_cannot_do_is_bad_input(tmp_path: Path) -> None:
    run = make_run(tmp_path, {"evaluators": [{"ref": "exact-match"}]})
    run.spec.dataset.ref = "datasets/support@v3"
    with pytest.raises(BadInputError, match=r"spec\.dataset\.ref: .* needs the server"):
        await run_embedded(run, base_dir=tmp_path)
    agent_spec = {"target": {"agent": {"http": {"url": "http://agent", "agent": "shop"}}},
                  "sandbox": {"class": "gpu"}, "evaluators": [{"ref": "exact-match"}]}
    agent = make_run(tmp_path, agent_spec)
    with pytest.raises(BadInputError, match=r"spec\.sandbox\.class: 'gpu' is not a sandbox class here"):
        await run_embedded(agent, base_dir=tmp_path)
    no_outputs = make_run(tmp_path, {"evaluators": [{"ref": "exact-match"}]}, QUESTIONS)
    with pytest.raises(BadInputError, match="no record has an output"):
        await run_embedded(no_outputs, base_dir=tmp_path)
