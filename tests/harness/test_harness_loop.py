"""The agent loop against local OpenAI-compatible and Anthropic servers that emit tool calls."""

from __future__ import annotations

from harness_helpers import make_config
from harness_tools import get_weather

from evalsi.harness import Harness, Task, function_spec
from evalsi.records import from_value
from evalsi.testing import FakeAnthropic, FakeOpenAI
from evalsi.v1alpha1.record_pb2 import (
    STEP_TYPE_AGENT,
    STEP_TYPE_LLM,
    STEP_TYPE_TOOL,
    TOOL_CALL_STATUS_ERROR,
    TOOL_CALL_STATUS_OK,
)

WEATHER = {"tools": {"python": ["harness_tools:get_weather", "harness_tools:add", "harness_tools:slow",
                                "harness_tools:broken"]}}


def _seconds(ts) -> float:
    return ts.seconds + ts.nanos / 1e9


async def test_openai_parallel_tool_calls_then_final_answer() -> None:
    async with FakeOpenAI() as server:
        server.enqueue(
            ("tool_calls", [{"name": "get_weather", "arguments": {"city": "Paris"}},
                            {"name": "add", "arguments": {"a": 2, "b": 3}}]),
            ("text", "21 degrees, and 5."),
        )
        config = make_config(server.base_url, system="Be brief.", **WEATHER)
        async with Harness.open(config) as harness:
            result = await harness.run(Task(id="t1", input="weather in Paris? and 2+3?"), run_id="r1", trial=2)

    record = result.record
    assert result.stop_reason == "final_answer" and result.error is None
    assert record.output.text == "21 degrees, and 5."
    assert [s.type for s in record.trajectory.steps] == [STEP_TYPE_AGENT, STEP_TYPE_LLM, STEP_TYPE_TOOL,
                                                         STEP_TYPE_TOOL, STEP_TYPE_LLM]
    weather, add = record.trajectory.steps[2].tool_call, record.trajectory.steps[3].tool_call
    assert (weather.name, from_value(weather.arguments), weather.status) == ("get_weather", {"city": "Paris"},
                                                                             TOOL_CALL_STATUS_OK)
    assert from_value(weather.result) == {"city": "Paris", "temperature": 21, "unit": "c"}
    assert from_value(add.result) == 5
    # The second request carries the system prompt, the call and both results, each answering its call id.
    second = server.requests[1]["messages"]
    assert second[0] == {"role": "system", "content": "Be brief."}
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool", "tool"]
    call_ids = [c["id"] for c in second[2]["tool_calls"]]
    assert [m["tool_call_id"] for m in second[3:]] == call_ids
    assert second[4]["content"] == "5"
    assert {t["function"]["name"] for t in server.requests[0]["tools"]} == {"get_weather", "add", "slow", "broken"}
    # Usage sums the model calls; provenance names the run, trial and task.
    llm_tokens = sum(s.usage.total_tokens for s in record.trajectory.steps if s.type == STEP_TYPE_LLM)
    assert record.usage.total_tokens == llm_tokens > 0
    assert (record.provenance.run_id, record.provenance.trial, record.provenance.sample_id) == ("r1", 2, "t1")
    assert record.metadata["harness.stop_reason"].string_value == "final_answer"
    assert record.metadata["harness.tool_calls"].number_value == 2


async def test_parallel_calls_overlap_in_time() -> None:
    async with FakeOpenAI() as server:
        server.enqueue(("tool_calls", [{"name": "slow", "arguments": {"seconds": 0.4}},
                                       {"name": "slow", "arguments": {"seconds": 0.4}}]), ("text", "done"))
        async with Harness.open(make_config(server.base_url, **WEATHER)) as harness:
            record = (await harness.run(Task(id="p", input="go"))).record
    first, second = [s for s in record.trajectory.steps if s.type == STEP_TYPE_TOOL]
    # Run one after the other, the second would start after the first ended.
    assert _seconds(second.start_time) < _seconds(first.start_time) + _seconds(first.duration)


async def test_sequential_when_parallel_tool_calls_is_off() -> None:
    async with FakeOpenAI() as server:
        server.enqueue(("tool_calls", [{"name": "slow", "arguments": {"seconds": 0.2}},
                                       {"name": "slow", "arguments": {"seconds": 0.2}}]), ("text", "done"))
        config = make_config(server.base_url, parallel_tool_calls=False, **WEATHER)
        async with Harness.open(config) as harness:
            record = (await harness.run(Task(id="s", input="go"))).record
    first, second = [s for s in record.trajectory.steps if s.type == STEP_TYPE_TOOL]
    assert _seconds(second.start_time) >= _seconds(first.start_time) + _seconds(first.duration)
    assert server.requests[0]["parallel_tool_calls"] is False


async def test_anthropic_tool_use_and_tool_result_blocks() -> None:
    async with FakeAnthropic() as server:
        server.enqueue(("tool_calls", [{"name": "get_weather", "arguments": {"city": "Lima", "unit": "f"}}]),
                       ("text", "70F in Lima."))
        config = make_config(server.base_url, provider="anthropic", system="You help.", **WEATHER)
        async with Harness.open(config) as harness:
            result = await harness.run(Task(id="a1", input="Lima?"))
    assert result.stop_reason == "final_answer"
    assert result.record.output.text == "70F in Lima."
    first, second = server.requests
    assert first["system"] == "You help." and first["max_tokens"] > 0
    assert {t["name"] for t in first["tools"]} >= {"get_weather"} and "input_schema" in first["tools"][0]
    assistant, results = second["messages"][1], second["messages"][2]
    use = assistant["content"][0]
    assert use["type"] == "tool_use" and use["input"] == {"city": "Lima", "unit": "f"}
    assert results["role"] == "user"
    assert results["content"][0]["type"] == "tool_result" and results["content"][0]["tool_use_id"] == use["id"]
    tool = result.record.trajectory.steps[2].tool_call
    assert from_value(tool.result) == {"city": "Lima", "temperature": 70, "unit": "f"}


async def test_a_failing_python_tool_is_an_observation_not_a_crash() -> None:
    async with FakeOpenAI() as server:
        server.enqueue(("tool_calls", [{"name": "broken", "arguments": {"reason": "disk full"}},
                                       {"name": "no_such_tool", "arguments": {}}]), ("text", "sorry"))
        async with Harness.open(make_config(server.base_url, **WEATHER)) as harness:
            result = await harness.run(Task(id="f", input="try"))
    broken, unknown = [s.tool_call for s in result.record.trajectory.steps if s.type == STEP_TYPE_TOOL]
    assert result.stop_reason == "final_answer"
    assert broken.status == TOOL_CALL_STATUS_ERROR and broken.error == "RuntimeError: disk full"
    assert unknown.status == TOOL_CALL_STATUS_ERROR and "unknown tool 'no_such_tool'" in unknown.error
    tool_messages = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert tool_messages[0]["content"] == "error: RuntimeError: disk full"


async def test_a_provider_down_after_retries_is_an_infrastructure_error() -> None:
    async with FakeOpenAI() as server:
        server.enqueue(("tool_calls", [{"name": "add", "arguments": {"a": 1, "b": 1}}]), ("status", 503))
        async with Harness.open(make_config(server.base_url, **WEATHER)) as harness:
            result = await harness.run(Task(id="down", input="add"))
    assert result.infra_error and result.stop_reason == "error"
    assert "503" in (result.error or "")
    # What happened before the failure is kept; the root step carries the error.
    assert [s.type for s in result.record.trajectory.steps] == [STEP_TYPE_AGENT, STEP_TYPE_LLM, STEP_TYPE_TOOL]
    assert result.record.trajectory.steps[0].error == result.error
    assert result.record.metadata["harness.error"].string_value == result.error


def test_function_schema_from_signature_annotations_and_docstring() -> None:
    spec = function_spec(get_weather)
    assert spec.name == "get_weather"
    assert spec.description == "The current weather in a city."
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city's name."},
            "unit": {"enum": ["c", "f"], "description": "Celsius (c) or Fahrenheit (f).", "default": "c"},
        },
        "required": ["city"],
    }
