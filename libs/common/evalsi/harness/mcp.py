"""A small MCP client: JSON-RPC 2.0 over stdio or streamable HTTP, enough to list and call tools.

The handshake is ``initialize`` then ``notifications/initialized``; then ``tools/list`` (following
``nextCursor``) and ``tools/call``. Over streamable HTTP every message is a POST; the server's answer is JSON
or an SSE stream carrying it, the ``Mcp-Session-Id`` it hands out on ``initialize`` goes on every later
request, as does the negotiated ``MCP-Protocol-Version``, and the session is ended with a DELETE.

Failures split as the harness needs them: a server that cannot be reached, dies, or answers outside the
protocol is an ``InfraError`` (the trial could not run); a tool that fails (``isError``, or a JSON-RPC error
on ``tools/call`` such as an unknown tool) is a ``ToolResult`` with an error, the agent's observation.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp

from evalsi.cases.transport import iter_sse
from evalsi.errors import InfraError

from .config import McpServerConfig
from .tools import ToolResult, ToolSpec

PROTOCOL_VERSION = "2025-06-18"
CLIENT_INFO = {"name": "evalsi-harness", "version": "1"}
_METHOD_NOT_FOUND = -32601


class McpError(InfraError):
    """The MCP server could not be used: not started, unreachable, or not speaking the protocol."""


class JsonRpcError(Exception):
    """An ``error`` answer to a request; for ``tools/call`` it becomes the tool's error result."""

    def __init__(self, error: Any) -> None:
        self.code = error.get("code") if isinstance(error, Mapping) else None
        message = error.get("message") if isinstance(error, Mapping) else None
        super().__init__(str(message or error))


class McpClient(ABC):
    """One connection to one MCP server. ``start`` connects and initializes; ``close`` ends the session."""

    # How long the handshake (initialize, tools/list) may take: a server that never answers (or answers only
    # with lines that are not JSON-RPC) is the trial's infrastructure error, not a hang.
    handshake_timeout_s = 60.0

    def __init__(self, config: McpServerConfig) -> None:
        self.config = config
        self._ids = itertools.count(1)
        self.server_info: Mapping[str, Any] = {}
        self.negotiated_version = ""

    @abstractmethod
    async def _connect(self) -> None: ...

    @abstractmethod
    async def _request(self, method: str, params: Mapping[str, Any] | None) -> Any:
        """The ``result`` of one request; ``JsonRpcError`` for an error answer, ``McpError`` for the rest."""

    @abstractmethod
    async def _notify(self, method: str) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    async def start(self) -> None:
        await self._connect()
        try:
            result = await self._handshake("initialize", {
                "protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO,
            })
        except JsonRpcError as exc:
            raise McpError(f"MCP server {self.config.label}: initialize refused: {exc}") from None
        if not isinstance(result, Mapping) or "protocolVersion" not in result:
            raise McpError(f"MCP server {self.config.label}: initialize answered without a protocolVersion")
        self.negotiated_version = str(result["protocolVersion"])
        self.server_info = result.get("serverInfo") or {}
        await self._notify("notifications/initialized")

    async def list_tools(self) -> list[ToolSpec]:
        specs: list[ToolSpec] = []
        cursor: str | None = None
        while True:
            try:
                result = await self._handshake("tools/list", {"cursor": cursor} if cursor else None)
            except JsonRpcError as exc:
                raise McpError(f"MCP server {self.config.label}: tools/list failed: {exc}") from None
            tools = result.get("tools") if isinstance(result, Mapping) else None
            if not isinstance(tools, list):
                raise McpError(f"MCP server {self.config.label}: tools/list answered without a tools list")
            for tool in tools:
                if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
                    raise McpError(f"MCP server {self.config.label}: tools/list gave a tool without a name")
                specs.append(ToolSpec(name=tool["name"], description=str(tool.get("description") or ""),
                                      parameters=dict(tool.get("inputSchema") or {"type": "object"})))
            cursor = result.get("nextCursor")
            if not cursor:
                return specs

    async def _handshake(self, method: str, params: Mapping[str, Any] | None) -> Any:
        try:
            async with asyncio.timeout(self.handshake_timeout_s):
                return await self._request(method, params)
        except TimeoutError:
            raise McpError(f"MCP server {self.config.label}: no answer to {method} within "
                           f"{self.handshake_timeout_s:g}s") from None

    async def call_tool(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        try:
            result = await self._request("tools/call", {"name": name, "arguments": dict(arguments)})
        except JsonRpcError as exc:
            return ToolResult(error=str(exc))
        if not isinstance(result, Mapping):
            raise McpError(f"MCP server {self.config.label}: tools/call {name} answered {result!r}, not a result")
        texts = [part.get("text", "") for part in result.get("content") or [] if isinstance(part, Mapping)
                 and part.get("type") == "text"]
        text = "\n".join(texts)
        if result.get("isError"):
            return ToolResult(error=text or "the tool reported an error")
        if "structuredContent" in result:
            return ToolResult(value=result["structuredContent"])
        return ToolResult(value=text)

    def _message(self, method: str, params: Mapping[str, Any] | None) -> tuple[int, dict[str, Any]]:
        request_id = next(self._ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = dict(params)
        return request_id, message

    def _result(self, message: Any, request_id: int) -> Any:
        if not isinstance(message, Mapping) or message.get("jsonrpc") != "2.0":
            raise McpError(f"MCP server {self.config.label}: answered {message!r}, not JSON-RPC 2.0")
        if "error" in message:
            raise JsonRpcError(message["error"])
        if "result" not in message:
            raise McpError(f"MCP server {self.config.label}: the answer to request {request_id} has no result")
        return message["result"]


# --- stdio ---------------------------------------------------------------------------------------------------


class LineChannel(ABC):
    """A server's stdin and stdout, wherever it runs: a host subprocess (``HostProcessChannel``) or a process in
    the task's sandbox (``mcp_sandbox.SandboxChannel``)."""

    @abstractmethod
    async def readline(self) -> bytes:
        """The next stdout line (b"" at the end); ``McpError`` for a line over the channel's bound."""

    @abstractmethod
    async def write(self, data: bytes) -> None:
        """To stdin; ``BrokenPipeError``/``ConnectionResetError`` once the server is gone."""

    @abstractmethod
    async def ended(self) -> str:
        """How the server ended (waiting for it), with the tail of its stderr."""

    @abstractmethod
    async def close(self) -> None:
        """Stop the server and release everything it held."""


class HostProcessChannel(LineChannel):
    """A server started as a subprocess on the host (a harness config's ``tools.mcp`` command)."""

    _STDERR_KEEP = 2000  # the tail of the server's stderr, quoted when it dies
    MAX_LINE = 16 * 1024 * 1024

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process
        self._stderr = b""
        self._stderr_task = asyncio.create_task(self._read_stderr())

    @classmethod
    async def start(cls, config: McpServerConfig) -> HostProcessChannel:
        try:
            process = await asyncio.create_subprocess_exec(
                *config.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env={**os.environ, **config.env}, limit=cls.MAX_LINE,
            )
        except OSError as exc:
            raise McpError(f"MCP server {config.label}: cannot start: {exc}") from None
        return cls(process)

    async def _read_stderr(self) -> None:
        assert self._process.stderr is not None
        while chunk := await self._process.stderr.read(4096):
            self._stderr = (self._stderr + chunk)[-self._STDERR_KEEP:]

    async def readline(self) -> bytes:
        assert self._process.stdout is not None
        try:
            return await self._process.stdout.readline()
        except ValueError:  # asyncio's limit: a line longer than MAX_LINE
            raise McpError(f"wrote a line of more than {self.MAX_LINE} bytes") from None

    async def write(self, data: bytes) -> None:
        stdin = self._process.stdin
        if stdin is None or self._process.returncode is not None:
            raise BrokenPipeError("the server has exited")
        stdin.write(data)
        await stdin.drain()

    async def ended(self) -> str:
        return f"exited (code {await self._process.wait()}); stderr ends: " \
               f"{self._stderr.decode(errors='replace')[-500:]!r}"

    async def close(self) -> None:
        process = self._process
        if process.returncode is None:
            if process.stdin is not None:
                process.stdin.close()  # the spec's shutdown: close stdin, then escalate
            try:
                await asyncio.wait_for(process.wait(), timeout=2.0)
            except TimeoutError:
                process.terminate()
                try:
                    await asyncio.wait_for(process.wait(), timeout=2.0)
                except TimeoutError:
                    process.kill()
                    await process.wait()
        self._stderr_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._stderr_task


ChannelOpener = Callable[[], Awaitable[LineChannel]]


class StdioMcpClient(McpClient):
    """One JSON-RPC message per line over a ``LineChannel``: by default a subprocess on the host started from the
    config's command; ``opener`` gives another (a process in the task's sandbox)."""

    def __init__(self, config: McpServerConfig, opener: ChannelOpener | None = None) -> None:
        super().__init__(config)
        self._opener = opener
        self._channel: LineChannel | None = None
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._reader: asyncio.Task[None] | None = None
        self._write_lock = asyncio.Lock()
        self._dead: McpError | None = None  # set once the server's stdout closed: every later request fails

    async def _connect(self) -> None:
        if self._opener is not None:
            self._channel = await self._opener()
        else:
            self._channel = await HostProcessChannel.start(self.config)
        self._reader = asyncio.create_task(self._read_stdout(self._channel))

    async def _read_stdout(self, channel: LineChannel) -> None:
        try:
            while line := await channel.readline():
                try:
                    message = json.loads(line)
                except json.JSONDecodeError:
                    continue  # servers may log to stdout by mistake; only JSON-RPC lines are ours
                if not isinstance(message, Mapping):
                    continue
                if "method" in message and "id" in message:
                    await self._answer_server_request(message)
                elif message.get("id") in self._pending:
                    future = self._pending.pop(message["id"])
                    if not future.done():
                        future.set_result(message)
            died = McpError(f"MCP server {self.config.label}: {await channel.ended()}")
        except McpError as exc:  # a line over the channel's bound: the server is not speaking the protocol
            died = McpError(f"MCP server {self.config.label}: {exc}")
        self._dead = died
        for future in self._pending.values():
            if not future.done():
                future.set_exception(died)
        self._pending.clear()

    async def _answer_server_request(self, message: Mapping[str, Any]) -> None:
        # A server may ping; anything else it asks of a client (sampling, roots) this one does not offer.
        if message.get("method") == "ping":
            await self._write({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        else:
            await self._write({"jsonrpc": "2.0", "id": message["id"],
                               "error": {"code": _METHOD_NOT_FOUND, "message": "not supported by evalsi-harness"}})

    async def _write(self, message: Mapping[str, Any]) -> None:
        channel = self._channel
        if channel is None or self._dead is not None:
            raise self._dead or McpError(f"MCP server {self.config.label}: not running")
        async with self._write_lock:
            try:
                await channel.write(json.dumps(message).encode() + b"\n")
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise McpError(f"MCP server {self.config.label}: cannot write: {exc}") from None

    async def _request(self, method: str, params: Mapping[str, Any] | None) -> Any:
        request_id, message = self._message(method, params)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            if self._dead is not None:
                raise self._dead
            await self._write(message)
            answer = await future
        finally:
            self._pending.pop(request_id, None)
        return self._result(answer, request_id)

    async def _notify(self, method: str) -> None:
        await self._write({"jsonrpc": "2.0", "method": method})

    async def close(self) -> None:
        channel, self._channel = self._channel, None
        if channel is None:
            return
        await channel.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader


# --- streamable HTTP -----------------------------------------------------------------------------------------


class HttpMcpClient(McpClient):
    """A server at a URL, spoken to with POSTs whose answers are JSON or an SSE stream."""

    def __init__(self, config: McpServerConfig, *, timeout_s: float = 60.0) -> None:
        super().__init__(config)
        self._session: aiohttp.ClientSession | None = None
        self._session_id: str | None = None
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def _connect(self) -> None:
        self._session = aiohttp.ClientSession()

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   **self.config.headers}
        if self._session_id:
            headers["Mcp-Session-Id"] = self._session_id
        if self.negotiated_version:
            headers["MCP-Protocol-Version"] = self.negotiated_version
        return headers

    async def _post(self, message: Mapping[str, Any]) -> aiohttp.ClientResponse:
        if self._session is None:
            raise McpError(f"MCP server {self.config.label}: not connected")
        try:
            return await self._session.post(self.config.url, json=message, headers=self._headers(),
                                            timeout=self._timeout)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise McpError(f"MCP server {self.config.url}: {type(exc).__name__}: {exc}") from None

    async def _request(self, method: str, params: Mapping[str, Any] | None) -> Any:
        request_id, message = self._message(method, params)
        response = await self._post(message)
        try:
            if response.status != 200:
                body = (await response.text())[:300]
                raise McpError(f"MCP server {self.config.url}: {method} got HTTP {response.status}: {body}")
            if method == "initialize" and response.headers.get("Mcp-Session-Id"):
                self._session_id = response.headers["Mcp-Session-Id"]
            answer = await self._read_answer(response, request_id, method)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise McpError(f"MCP server {self.config.url}: {method}: {type(exc).__name__}: {exc}") from None
        finally:
            response.release()
        return self._result(answer, request_id)

    async def _read_answer(self, response: aiohttp.ClientResponse, request_id: int, method: str) -> Any:
        content_type = response.headers.get("Content-Type", "")
        if content_type.startswith("application/json"):
            try:
                return json.loads(await response.read())
            except json.JSONDecodeError:
                raise McpError(f"MCP server {self.config.url}: {method}: the answer is not JSON") from None
        if content_type.startswith("text/event-stream"):
            # The stream may carry the server's own requests and notifications before our answer.
            async for _event, data in iter_sse(response.content):
                try:
                    message = json.loads(data) if data else None
                except json.JSONDecodeError:
                    raise McpError(f"MCP server {self.config.url}: {method}: an SSE event is not JSON") from None
                if isinstance(message, Mapping) and message.get("id") == request_id and "method" not in message:
                    return message
            raise McpError(f"MCP server {self.config.url}: {method}: the stream ended without an answer")
        raise McpError(f"MCP server {self.config.url}: {method}: answered {content_type or 'no content type'}, "
                       "not JSON or an event stream")

    async def _notify(self, method: str) -> None:
        response = await self._post({"jsonrpc": "2.0", "method": method})
        response.release()
        if response.status not in (200, 202, 204):
            raise McpError(f"MCP server {self.config.url}: {method} got HTTP {response.status}")

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is None:
            return
        if self._session_id:
            # Ending the session is a courtesy; a server that has gone already is no failure of the trial.
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.delete(self.config.url, headers=self._headers(),
                                          timeout=aiohttp.ClientTimeout(total=5)):
                    pass
        await session.close()


def mcp_client(config: McpServerConfig, *, timeout_s: float = 60.0) -> McpClient:
    return HttpMcpClient(config, timeout_s=timeout_s) if config.url else StdioMcpClient(config)


class McpTool:
    """One tool of a connected MCP server."""

    def __init__(self, client: McpClient, spec: ToolSpec) -> None:
        self.client = client
        self.spec = spec

    async def call(self, arguments: Mapping[str, Any]) -> ToolResult:
        return await self.client.call_tool(self.spec.name, arguments)
