"""Mocked tools and deterministic fault injection (timeouts, errors, malformed results) by seed."""

from __future__ import annotations

import json

import pytest
from harness_helpers import make_config

from evalsi.errors import BadInputError
from evalsi.harness import FaultConfig, Harness, Task
from evalsi.harness.faults import fault_for
from evalsi.records import from_value
from evalsi.testing import FakeOpenAI
from evalsi.v1alpha1.record_pb2 import STEP_TYPE_TOOL, TOOL_CALL_STATUS_ERROR, TOOL_CALL_STATUS_OK

TOOLS = {"tools": {"python": ["harness_tools:get_weather"]}}


def _weather_calls(n: int) -> tuple:
    return ("tool_calls", [{"name": "get_weather", "arguments": {"city": f"c{i}"}} for i in range(n)])


def _tool_steps(result):
    return [s for s in result.record.trajectory.steps if s.type == STEP_TYPE_TOOL]


async def test_mocks_fixed_scripted_error_and_declared_tools() -> None:
    mocks = {
        "get_weather": {"results": [{"temperature": 1}, {"temperature": 2}]},
        "send_email": {"error": "SMTP down", "description": "Send an email.",
                       "parameters": {"type": "object", "properties": {"to": {"type": "string"}}}},
        "lookup": {"result": "always this"},
    }
    async with FakeOpenAI() as server:
        config = make_config(server.base_url, **TOOLS, mocks=mocks)
        server.enqueue(_weather_calls(3), ("tool_calls", [{"name": "send_email", "arguments": {"to": "a@b"}},
                                                          {"name": "lookup", "arguments": {}}]), ("text", "ok"))
        async with Harness.open(config) as harness:
            result = await harness.run(Task(id="m", input="go"))
    steps = _tool_steps(result)
    # Scripted: the n-th call gets the n-th result, the last repeats.
    assert [from_value(s.tool_call.result) for s in steps[:3]] == [{"temperature": 1}, {"temperature": 2},
                                                                   {"temperature": 2}]
    assert steps[3].tool_call.status == TOOL_CALL_STATUS_ERROR and steps[3].tool_call.error == "SMTP down"
    assert from_value(steps[4].tool_call.result) == "always this"
    assert all(s.attributes["evalsi.tool.mocked"].bool_value for s in steps)
    tools = {t["function"]["name"]: t["function"] for t in server.requests[0]["tools"]}
    assert tools["send_email"]["description"] == "Send an email."
    assert tools["get_weather"]["parameters"]["required"] == ["city"]  # the real tool's schema is kept


@pytest.mark.parametrize("kind", ["timeout", "error", "malformed"])
async def test_each_fault_kind_on_listed_calls(kind: str) -> None:
    async with FakeOpenAI() as server:
        config = make_config(server.base_url, **TOOLS, faults=[{"tool": "get_weather", "kind": kind, "calls": [2]}])
        server.enqueue(_weather_calls(3), ("text", "ok"))
        async with Harness.open(config) as harness:
            result = await harness.run(Task(id="f", input="go"))
    first, second, third = _tool_steps(result)
    assert first.tool_call.status == third.tool_call.status == TOOL_CALL_STATUS_OK
    assert "evalsi.fault" not in first.attributes
    assert second.attributes["evalsi.fault"].string_value == kind
    if kind == "timeout":
        assert second.tool_call.error == "tool get_weather timed out after 60 s"
    elif kind == "error":
        assert "injected fault" in second.tool_call.error
    else:
        text = from_value(second.tool_call.result)
        assert second.tool_call.status == TOOL_CALL_STATUS_OK
        assert isinstance(text, str) and text.startswith('{"city": "c1"')
        with pytest.raises(json.JSONDecodeError):
            json.loads(text)
    sent = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert sent[1] != sent[0].replace("c0", "c1")


async def test_rate_faults_are_the_same_on_a_rerun_and_follow_the_seed() -> None:
    def faulted(seed: int) -> list[int]:
        faults = (FaultConfig(tool="get_weather", kind="error", rate=0.5),)
        return [n for n in range(1, 41) if fault_for(faults, "get_weather", n, seed=seed, task_id="t", trial=1)]

    assert faulted(7) == faulted(7)
    assert faulted(7) != faulted(8)
    assert 8 < len(faulted(7)) < 32  # about half of 40

    async def injected(seed: int) -> list[str]:
        async with FakeOpenAI() as server:
            config = make_config(server.base_url, **TOOLS, seed=seed,
                                 faults=[{"tool": "get_weather", "kind": "error", "rate": 0.5}])
            server.enqueue(_weather_calls(12), ("text", "ok"))
            async with Harness.open(config) as harness:
                result = await harness.run(Task(id="t", input="go"))
        return [s.attributes["evalsi.fault"].string_value if "evalsi.fault" in s.attributes else ""
                for s in _tool_steps(result)]

    first, again = await injected(7), await injected(7)
    assert first == again and "error" in first and "" in first
    assert first == ["error" if n in faulted(7) else "" for n in range(1, 13)]


async def test_a_fault_on_an_unknown_tool_is_bad_config() -> None:
    config = make_config("http://127.0.0.1:9/v1", **TOOLS, faults=[{"tool": "nope", "kind": "error", "rate": 1}])
    with pytest.raises(BadInputError, match=r"test.yaml: faults: tool 'nope' is not among the tools \(get_weather\)"):
        async with Harness.open(config):
            pass
