"""The tools of a harness: Python functions and MCP servers, with mocks over them and faults injected.

``open_toolbox`` starts every MCP server and loads every function once (a run's trials share them), and
checks that no two tools share a name. ``ToolBox.call`` is one call as the agent experiences it: mocked or
real, faulted or not, bounded by the tool timeout. The call number and the fault draw belong to the trial,
so the caller passes them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalsi.errors import BadInputError

from . import faults
from .config import HarnessConfig, MockConfig
from .mcp import McpClient, McpTool, mcp_client
from .tools import Tool, ToolResult, ToolSpec, load_python_tool


@dataclass(frozen=True)
class ToolOutcome:
    """A call's result and how it came about: ``mocked`` (never reached the tool), ``fault`` (injected)."""

    result: ToolResult
    mocked: bool = False
    fault: str | None = None


class ToolBox:
    def __init__(self, tools: Mapping[str, Tool], mocks: Mapping[str, MockConfig], config: HarnessConfig) -> None:
        self._tools = dict(tools)
        self._mocks = dict(mocks)
        self._config = config
        specs = {name: tool.spec for name, tool in self._tools.items()}
        for name, mock in self._mocks.items():
            if name not in specs or mock.parameters is not None or mock.description:
                real = specs.get(name)
                specs[name] = ToolSpec(
                    name=name,
                    description=mock.description or (real.description if real else ""),
                    parameters=dict(mock.parameters if mock.parameters is not None
                                    else real.parameters if real else {"type": "object", "properties": {}}),
                )
        self.specs: tuple[ToolSpec, ...] = tuple(specs[name] for name in sorted(specs))
        for fault in config.faults:
            if fault.tool not in specs:
                raise BadInputError(f"{config.source}: faults: tool {fault.tool!r} is not among the tools "
                                    f"({', '.join(sorted(specs)) or 'none'})")

    def bound(self, tools: Mapping[str, Tool]) -> ToolBox:
        """This toolbox with ``tools`` in place of its tools of the same names (one task's sandbox tools): the
        model was told these names once, so none may be new."""
        extra = [name for name in tools if name not in self._tools]
        if extra:
            raise ValueError(f"tools {', '.join(sorted(extra))} are not among this harness's tools")
        return ToolBox({**self._tools, **tools}, self._mocks, self._config)

    def joined(self, tools: Mapping[str, Tool]) -> ToolBox:
        """This toolbox with ``tools`` added (one task's environment MCP servers, whose tools are known only once
        they run in its sandbox); a name the harness already has is refused."""
        clash = sorted(name for name in tools if any(spec.name == name for spec in self.specs))
        if clash:
            raise BadInputError(f"environment.tools.mcp: tool {clash[0]!r} is also one of the harness's tools; tool "
                                "names must be unique (rename the server)")
        return ToolBox({**self._tools, **tools}, self._mocks, self._config)

    async def call(self, name: str, arguments: Mapping[str, Any], *, call_index: int, task_id: str,
                   trial: int) -> ToolOutcome:
        """The ``call_index``-th call (1-based, this trial) of tool ``name``."""
        if not any(spec.name == name for spec in self.specs):
            return ToolOutcome(ToolResult(error=f"unknown tool {name!r}; the tools are "
                                                f"{', '.join(spec.name for spec in self.specs)}"))
        fault = faults.fault_for(self._config.faults, name, call_index, seed=self._config.seed, task_id=task_id,
                                 trial=trial)
        if fault == "timeout":
            return ToolOutcome(faults.timeout_result(name, self._config.tool_timeout_s), fault=fault)
        if fault == "error":
            return ToolOutcome(faults.error_result(name), fault=fault)
        mock = self._mocks.get(name)
        if mock is not None:
            value, error = mock.answer(call_index)
            result = ToolResult(value=value, error=error)
        else:
            result = await self._call_real(name, arguments)
        if fault == "malformed":
            result = faults.malformed(result)
        return ToolOutcome(result, mocked=mock is not None, fault=fault)

    async def _call_real(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        try:
            return await asyncio.wait_for(self._tools[name].call(arguments), timeout=self._config.tool_timeout_s)
        except TimeoutError:
            return faults.timeout_result(name, self._config.tool_timeout_s)


@contextlib.asynccontextmanager
async def open_toolbox(config: HarnessConfig, extra: Sequence[Tool] = ()) -> AsyncIterator[ToolBox]:
    """Start the config's MCP servers, load its Python tools (and ``extra``: the environment's sandbox tools);
    close the servers on exit."""
    tools: dict[str, Tool] = {}
    origin: dict[str, str] = {}

    def add(tool: Tool, where: str) -> None:
        name = tool.spec.name
        if name in tools:
            raise BadInputError(f"{config.source}: {where}: tool {name!r} is also provided by {origin[name]}; "
                                "tool names must be unique")
        tools[name], origin[name] = tool, where

    for tool in extra:
        add(tool, "the environment")
    for i, reference in enumerate(config.python_tools):
        add(load_python_tool(reference, f"{config.source}: tools.python[{i}]"), f"tools.python[{i}]")
    clients: list[McpClient] = []
    try:
        for i, server in enumerate(config.mcp_servers):
            client = mcp_client(server, timeout_s=config.tool_timeout_s)
            clients.append(client)
            await client.start()
            for tool_spec in await client.list_tools():
                add(McpTool(client, tool_spec), f"tools.mcp[{i}] ({server.label})")
        yield ToolBox(tools, config.mocks, config)
    finally:
        for client in clients:
            await client.close()
