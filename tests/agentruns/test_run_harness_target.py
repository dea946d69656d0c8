"""The built-in harness in embedded runs: the reference agent on the target model (a local fake that asks for
tools), with the spec's tools, steps and per-task budgets; its trials scored by the agent and core packs."""

from __future__ import annotations

import pytest
from agentrun_support import EXAMPLES, FAST, example

from evalsi.runs.embedded import dry_run, execute_run
from evalsi.testing import FakeOpenAI
from evalsi.v1alpha1.record_pb2 import STEP_TYPE_AGENT, STEP_TYPE_LLM, STEP_TYPE_TOOL
from evalsi.v1alpha1.run_pb2 import RUN_STATE_FAILED, RUN_STATE_SUCCEEDED
from evalsi.v1alpha1.score_pb2 import ERROR_KIND_INFRA, OUTCOME_ERROR, OUTCOME_SCORED


@pytest.fixture(autouse=True)
def weather_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))  # weather_tools (the harness's tool) and weather_model (the fake)


def metric(run: object, name: str) -> object:
    return next(s for s in run.summaries if s.metric == name)  # type: ignore[attr-defined]


async def test_the_reference_agent_runs_each_record_as_a_task_with_trials() -> None:
    from weather_model import reply

    async with FakeOpenAI(reply=reply) as model:
        run = example("agent-harness.yaml")
        run.spec.target.model.base_url = model.base_url
        outcome = await execute_run(run, base_dir=EXAMPLES, retry=FAST)
    result = outcome.results.run
    assert result.state == RUN_STATE_SUCCEEDED, result.message
    assert metric(result, "tool-call-accuracy.exact.pass^2").mean == 1.0  # type: ignore[attr-defined]
    assert metric(result, "contains").n == 6 and metric(result, "contains").mean == 1.0  # type: ignore[attr-defined]
    assert all(g.passed for g in result.gates)
    assert len(model.requests) == 12  # 3 tasks x 2 trials x (ask for the tool, answer from its result)
    assert model.requests[0]["messages"][0] == {"role": "system", "content": "Answer with the tools you have."}
    assert [t["function"]["name"] for t in model.requests[0]["tools"]] == ["get_weather"]

    oslo = next(r for r in outcome.records if r.id == "oslo-chat" and r.provenance.trial == 1)
    assert oslo.output.text == "It is 21 C in Oslo."
    assert [s.type for s in oslo.trajectory.steps] == [STEP_TYPE_AGENT, STEP_TYPE_LLM, STEP_TYPE_TOOL, STEP_TYPE_LLM]
    assert oslo.metadata["harness.stop_reason"].string_value == "final_answer"
    assert oslo.usage.total_tokens > 0 and oslo.usage.cost_usd > 0
    # The chat went to the model as that conversation, after the harness's system prompt.
    oslo_request = next(r for r in model.requests if r["messages"][-1]["content"] == "What is the weather in Oslo?")
    assert [m["role"] for m in oslo_request["messages"]] == ["system", "user", "assistant", "user"]
    assert oslo.provenance.target.startswith("evalsi-harness(maxSteps=5, tools=[py:weather_tools:get_weather]) on ")
    assert result.manifest.target == oslo.provenance.target
    assert result.progress.usage.total_tokens == sum(r.usage.total_tokens for r in outcome.records)


async def test_a_model_down_is_an_infra_error_and_a_step_limit_is_a_result() -> None:
    async with FakeOpenAI(reply=lambda body: ("tool_calls", [{"name": "get_weather", "arguments": {"city": "X"}}]),
                          ) as model:
        run = example("agent-harness.yaml")
        run.spec.target.model.base_url = model.base_url
        run.spec.harness.builtin.max_steps = 2  # the model never stops asking: the step limit ends each task
        run.spec.trials = 1
        del run.spec.gates[:]
        looping = await execute_run(run, base_dir=EXAMPLES, retry=FAST)
    records = looping.records
    assert {r.metadata["harness.stop_reason"].string_value for r in records} == {"max_steps"}
    assert {r.outcome for r in looping.results.run.results} == {OUTCOME_SCORED}  # a result, not an error
    assert metric(looping.results.run, "contains").mean == 0.0  # type: ignore[attr-defined]

    async with FakeOpenAI() as model:
        model.enqueue(*[("status", 500)] * 100)
        run = example("agent-harness.yaml")
        run.spec.target.model.base_url = model.base_url
        run.spec.target.model.params["max_retries"] = 1
        down = await execute_run(run, base_dir=EXAMPLES, retry=FAST)
    assert down.results.run.state == RUN_STATE_FAILED
    assert {(r.outcome, r.error_kind) for r in down.results.run.results} == {(OUTCOME_ERROR, ERROR_KIND_INFRA)}
    assert "evalsi-harness:" in down.results.run.results[0].reason


def test_agent_and_harness_generation_is_planned_on_the_harness_pool() -> None:
    prepared, projection = dry_run(example("agent-harness.yaml"), base_dir=EXAMPLES)
    generate = [t for t in prepared.plan.tasks() if t.stage == "generate"]
    assert [(t.pool, t.trial) for t in generate] == [("harness", 0), ("harness", 1)]
    assert projection.tasks_by_pool["harness"] == 2 and projection.target_calls == 6
    assert projection.target_cost_usd is None and any("agent takes" in u for u in projection.unknown)
    prepared, _ = dry_run(example("agent-http.yaml"), base_dir=EXAMPLES)
    assert {t.pool for t in prepared.plan.tasks() if t.stage == "generate"} == {"harness"}
