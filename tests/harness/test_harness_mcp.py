"""The MCP client against a real MCP server (the MCP Python SDK's), over stdio and streamable HTTP."""

from __future__ import annotations

import sys

import pytest
from harness_helpers import MCP_SERVER, make_config, mcp_http_server

from evalsi.harness import Harness, HttpMcpClient, McpError, McpServerConfig, StdioMcpClient, Task
from evalsi.records import from_value
from evalsi.testing import FakeOpenAI
from evalsi.v1alpha1.record_pb2 import STEP_TYPE_TOOL, TOOL_CALL_STATUS_ERROR


async def _exercise(client) -> None:
    await client.start()
    try:
        assert client.server_info["name"] == "harness-test-tools"
        specs = {spec.name: spec for spec in await client.list_tools()}
        assert set(specs) == {"lookup_order", "multiply", "explode"}
        assert specs["multiply"].parameters["required"] == ["a", "b"]
        assert specs["lookup_order"].description == "Look up an order's status by its id."
        assert (await client.call_tool("multiply", {"a": 6, "b": 7})).value == {"result": 42}
        failed = await client.call_tool("explode", {"reason": "boom"})
        assert failed.error and "explode" in failed.error
        unknown = await client.call_tool("no_such_tool", {})
        assert unknown.error and "no_such_tool" in unknown.error
    finally:
        await client.close()


async def test_stdio_client_lists_and_calls_tools() -> None:
    await _exercise(StdioMcpClient(McpServerConfig(command=(sys.executable, MCP_SERVER, "stdio"))))


@pytest.mark.parametrize("json_response", [False, True], ids=["sse-answers", "json-answers"])
async def test_streamable_http_client_lists_and_calls_tools(json_response: bool) -> None:
    async with mcp_http_server(json_response=json_response) as url:
        await _exercise(HttpMcpClient(McpServerConfig(url=url)))


async def test_a_server_that_cannot_start_is_an_infrastructure_error() -> None:
    client = StdioMcpClient(McpServerConfig(command=(sys.executable, "-c", "import sys; sys.exit(3)")))
    with pytest.raises(McpError, match="exited"):
        await client.start()
    await client.close()


async def test_the_loop_calls_tools_on_http_and_stdio_servers() -> None:
    async with mcp_http_server() as url, FakeOpenAI() as server:
        server.enqueue(("tool_calls", [{"name": "multiply", "arguments": {"a": 3, "b": 4}}]), ("text", "12"))
        config = make_config(server.base_url, tools={"mcp": [{"url": url}]})
        async with Harness.open(config) as harness:
            result = await harness.run(Task(id="mcp-http", input="3*4?"))
        assert result.stop_reason == "final_answer" and result.record.output.text == "12"
        step = next(s for s in result.record.trajectory.steps if s.type == STEP_TYPE_TOOL)
        assert from_value(step.tool_call.result) == {"result": 12}
        assert "12" in server.requests[1]["messages"][-1]["content"]

        server.enqueue(("tool_calls", [{"name": "explode", "arguments": {"reason": "x"}}]), ("text", "it failed"))
        stdio = make_config(server.base_url, tools={"mcp": [{"command": [sys.executable, MCP_SERVER, "stdio"]}]})
        async with Harness.open(stdio) as harness:
            result = await harness.run(Task(id="mcp-stdio", input="explode"))
        step = next(s for s in result.record.trajectory.steps if s.type == STEP_TYPE_TOOL)
        assert step.tool_call.status == TOOL_CALL_STATUS_ERROR
        assert result.stop_reason == "final_answer"


async def test_tool_names_must_be_unique_across_servers() -> None:
    async with mcp_http_server() as url:
        config = make_config("http://127.0.0.1:9/v1", tools={"mcp": [
            {"url": url}, {"command": [sys.executable, MCP_SERVER, "stdio"]}]})
        with pytest.raises(Exception, match=r"test.yaml: tools.mcp\[1\].*'(lookup_order|multiply|explode)' is also "
                                            r"provided by tools.mcp\[0\]"):
            async with Harness.open(config):
                pass
