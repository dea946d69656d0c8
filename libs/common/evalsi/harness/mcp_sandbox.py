"""An environment's MCP servers (``tools.mcp``), started inside the task's sandbox and spoken to over stdio.

Each server is a long-lived process of the sandbox (``evalsi.sandbox.spawned``): the same root, workspace, network
policy and bounds as the agent's shell tool, its lifetime bounded by its ``timeout``. The protocol is mcp.py's
``StdioMcpClient`` over a ``SandboxChannel``; its tools join the agent's as ``<server>_<tool>`` and are called
like any other tool (bounded by the tool timeout, recorded in the trajectory).

A server that cannot start, dies, writes a line over ``MAX_LINE`` or never completes the handshake is an
``McpError`` (an infrastructure error of the trial); a rung that cannot host one is ``SpawnUnsupported``. When an
escalation moves the task to a wider sandbox, the servers are restarted in it (the old sandbox and its processes
are gone) and must offer the same tools. On exit every server is killed.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from evalsi.sandbox.model import SandboxSession
from evalsi.sandbox.spawned import LineTooLong, SandboxProcess, spawn_in

from .config import McpServerConfig
from .environment import SandboxMcpServer
from .environment_session import EnvironmentSession
from .mcp import LineChannel, McpError, StdioMcpClient
from .tools import Tool, ToolResult, ToolSpec

__all__ = ["MAX_LINE", "SandboxChannel", "SandboxMcpServers", "sandbox_mcp_tools"]

MAX_LINE = 1024 * 1024  # one JSON-RPC message from a server in the sandbox
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class SandboxChannel(LineChannel):
    """A server's stdio as a ``SandboxProcess``: lines bounded, ``close`` kills it."""

    def __init__(self, process: SandboxProcess) -> None:
        self._process = process

    async def readline(self) -> bytes:
        try:
            return await self._process.readline()
        except LineTooLong as exc:
            raise McpError(f"wrote {exc}") from None

    async def write(self, data: bytes) -> None:
        await self._process.write(data)

    async def ended(self) -> str:
        result = await self._process.result()
        if result is None:
            how = "ended (killed, or its sandbox failed)"
        else:
            outcome = result.outcome
            how = {"exit": f"exited (code {outcome.code})", "timeout": "ran past its timeout",
                   "denied": f"was stopped by the sandbox ({outcome.effect})",
                   "runner_failure": f"could not run ({outcome.signature})"}[outcome.kind]
        return f"{how}; stderr ends: {self._process.stderr_tail[-500:]!r}"

    async def close(self) -> None:
        await self._process.kill()


class _Server:
    """One configured server and its client in the current sandbox."""

    def __init__(self, index: int, server: SandboxMcpServer, where: str) -> None:
        self.index = index
        self.server = server
        self.where = f"{where}[{index}] ({server.name})"
        self.config = McpServerConfig(command=server.command, env=dict(server.env))
        self.client: StdioMcpClient | None = None

    async def start(self, session: SandboxSession) -> list[ToolSpec]:
        async def open_channel() -> LineChannel:
            return SandboxChannel(await spawn_in(session, list(self.server.command), where=self.where,
                                                 env=self.server.env, timeout_s=self.server.timeout_s,
                                                 max_line=MAX_LINE))

        client = StdioMcpClient(self.config, open_channel)
        self.client = client
        try:
            await client.start()
            specs = await client.list_tools()
        except McpError as exc:
            raise McpError(f"{self.where}: {exc}") from None
        return specs

    async def close(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            await client.close()

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> ToolResult:
        client = self.client
        if client is None:
            raise McpError(f"{self.where}: the server is not running")
        return await client.call_tool(tool, arguments)


class _SandboxMcpTool:
    """One tool of a server in the sandbox, as the agent names it (``<server>_<tool>``)."""

    def __init__(self, server: _Server, remote: str, spec: ToolSpec, session: SandboxSession) -> None:
        self._server = server
        self._remote = remote
        self._session = session
        self.spec = spec

    async def call(self, arguments: Mapping[str, Any]) -> ToolResult:
        if isinstance(self._session, EnvironmentSession):
            async with self._session.using():  # never while an escalation replaces the sandbox
                return await self._server.call(self._remote, arguments)
        return await self._server.call(self._remote, arguments)


class SandboxMcpServers:
    """The environment's servers in one trial's sandbox; ``tools`` once started."""

    def __init__(self, servers: Sequence[SandboxMcpServer], session: SandboxSession,
                 where: str = "environment.tools.mcp") -> None:
        self._servers = [_Server(i, server, where) for i, server in enumerate(servers)]
        self._session = session
        self.tools: dict[str, Tool] = {}

    async def start(self, session: SandboxSession | None = None) -> None:
        """Start every server in ``session`` (the current one by default) and collect their tools."""
        target = session if session is not None else self._session
        tools: dict[str, Tool] = {}
        for server in self._servers:
            for spec in await server.start(target):
                name = f"{server.server.name}_{spec.name}"
                if not _TOOL_NAME.fullmatch(name):
                    raise McpError(f"{server.where}: tool {spec.name[:100]!r} makes the name {name[:100]!r}; a tool "
                                   "name is 1-64 letters, digits, '_' or '-'")
                if name in tools:
                    raise McpError(f"{server.where}: lists the tool {spec.name[:100]!r} twice")
                tools[name] = _SandboxMcpTool(server, spec.name,
                                              ToolSpec(name, spec.description, spec.parameters), self._session)
        if self.tools and set(tools) != set(self.tools):
            raise McpError(f"restarted in the wider sandbox, the servers offer {', '.join(sorted(tools))} instead "
                           f"of {', '.join(sorted(self.tools))}")
        self.tools = tools

    async def restart(self, session: SandboxSession) -> None:
        """The servers moved to ``session`` (an escalation's wider sandbox): the old ones killed first."""
        await self.close()
        await self.start(session)

    async def close(self) -> None:
        for server in self._servers:
            await server.close()


@contextlib.asynccontextmanager
async def sandbox_mcp_tools(servers: Sequence[SandboxMcpServer], session: SandboxSession
                            ) -> AsyncIterator[dict[str, Tool]]:
    """The servers started in ``session`` (restarted there after an escalation), their tools by the agent's
    names; every server killed on exit."""
    if not servers:
        yield {}
        return
    running = SandboxMcpServers(servers, session)
    if isinstance(session, EnvironmentSession):
        session.on_swap.append(running.restart)
    try:
        await running.start()
        yield running.tools
    finally:
        if isinstance(session, EnvironmentSession):
            session.on_swap.remove(running.restart)
        await running.close()
