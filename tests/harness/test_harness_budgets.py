"""Budgets: steps, tokens, dollars and wall clock each stop a trial with a recorded reason, never a crash."""

from __future__ import annotations

from harness_helpers import make_config

from evalsi.harness import Harness, Task
from evalsi.testing import FakeOpenAI
from evalsi.v1alpha1.record_pb2 import STEP_TYPE_LLM

TOOLS = {"tools": {"python": ["harness_tools:add", "harness_tools:slow"]}}
ADD = ("tool_calls", [{"name": "add", "arguments": {"a": 1, "b": 2}}])


def _model_calls(result) -> int:
    return sum(1 for s in result.record.trajectory.steps if s.type == STEP_TYPE_LLM)


async def test_max_steps_caps_model_calls() -> None:
    async with FakeOpenAI() as server:
        server.enqueue(ADD, ADD, ADD, ("text", "never reached"))
        async with Harness.open(make_config(server.base_url, max_steps=2, **TOOLS)) as harness:
            result = await harness.run(Task(id="loop", input="keep adding"))
    assert result.stop_reason == "max_steps" and result.error is None
    assert _model_calls(result) == 2 and len(server.requests) == 2
    assert result.record.output.text == ""  # no answer: outcome evaluators fail it rather than skip it
    assert result.record.metadata["harness.stop_reason"].string_value == "max_steps"


async def test_token_budget_stops_before_the_next_model_call() -> None:
    async with FakeOpenAI() as server:
        server.enqueue(ADD, ADD, ("text", "done"))
        async with Harness.open(make_config(server.base_url, budget={"tokens": 5}, **TOOLS)) as harness:
            result = await harness.run(Task(id="tok", input="add one and two please"))
    assert result.stop_reason == "budget_tokens"
    assert _model_calls(result) == 1
    assert result.record.usage.total_tokens >= 5


async def test_usd_budget_counts_dollars_from_pricing() -> None:
    async with FakeOpenAI() as server:
        server.enqueue(ADD, ADD, ADD, ("text", "done"))
        config = make_config(server.base_url, budget={"usd": 0.00002}, **TOOLS,
                             pricing={"input_per_mtok": 1.0, "output_per_mtok": 2.0})
        async with Harness.open(config) as harness:
            result = await harness.run(Task(id="usd", input="add one and two please"))
    assert result.stop_reason == "budget_usd"
    usage = result.record.usage
    assert usage.cost_usd == (usage.input_tokens * 1.0 + usage.output_tokens * 2.0) / 1e6
    assert usage.cost_usd >= 0.00002
    assert _model_calls(result) < 4


async def test_wall_clock_budget_cuts_a_slow_tool_step() -> None:
    async with FakeOpenAI() as server:
        server.enqueue(("tool_calls", [{"name": "slow", "arguments": {"seconds": 2}}]), ("text", "done"))
        config = make_config(server.base_url, budget={"wall_clock": "300ms"}, **TOOLS)
        async with Harness.open(config) as harness:
            result = await harness.run(Task(id="wall", input="wait"))
    assert result.stop_reason == "budget_wall_clock" and result.error is None
    assert len(server.requests) == 1
    assert 0.3 <= result.record.usage.latency.ToNanoseconds() / 1e9 < 1.5
