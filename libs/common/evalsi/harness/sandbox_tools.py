"""The built-in agent's shell and file tools, acting inside the task's environment sandbox (§11).

``run_shell``, ``read_file``, ``write_file`` and ``list_files``: each output is bounded, each path is the
workspace's (the sandbox's host-side file access never follows a link the agent planted), and a denial by the
sandbox (a blocked syscall, the memory cap, the output cap) comes back to the agent as a tool error and is
recorded on the step as a sandbox policy event (``ToolResult.sandbox_event``). A runner failure of the
sandbox is infrastructure: it ends the trial as an infrastructure error, never as the agent's mistake.

``request_escalation`` asks for a strictly wider mode (egress to more endpoints, a wider file-access mode); the
environment's harness policy decides (deny by default), a grant moves the task to a wider sandbox holding the
same files, and every request is a sandbox policy event of kind ``escalation_request`` (``escalation``).

``SANDBOX_TOOL_SPECS`` are known before any sandbox exists (the model is told its tools once per harness);
``sandbox_tools(session)`` binds them to one task's sandbox.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evalsi.errors import BadInputError, InfraError
from evalsi.sandbox.model import SandboxSession

from .escalation import MAX_REASON_CHARS, MAX_REQUEST_ENDPOINTS, Decision, escalation_request
from .tools import Tool, ToolResult, ToolSpec

MAX_TOOL_OUTPUT = 16 * 1024  # characters of a command's output, or of a file, the model is shown
MAX_WRITE_BYTES = 1024 * 1024
MAX_COMMAND_CHARS = 16 * 1024
MAX_LIST_ENTRIES = 500
DEFAULT_SHELL_TIMEOUT_S = 60.0

_STRING = {"type": "string"}
SANDBOX_TOOL_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec("run_shell", "Run a shell command (sh -c) in the task's workspace; returns its exit code, stdout and "
             "stderr (each cut to 16 KiB).",
             {"type": "object", "properties": {"command": {**_STRING, "description": "the shell command"},
                                               "timeout": {"type": "number", "description": "seconds (default 60)"}},
              "required": ["command"]}),
    ToolSpec("read_file", "Read a text file of the workspace (cut to 16 KiB).",
             {"type": "object", "properties": {"path": {**_STRING, "description": "a workspace path"}},
              "required": ["path"]}),
    ToolSpec("write_file", "Write (create or replace) a text file in the workspace.",
             {"type": "object", "properties": {"path": {**_STRING, "description": "a workspace path"},
                                               "content": {**_STRING, "description": "the whole new text"}},
              "required": ["path", "content"]}),
    ToolSpec("list_files", "List the files under a workspace directory (recursively, at most 500).",
             {"type": "object", "properties": {"path": {**_STRING, "description": "a workspace directory (default "
                                                                                 "'.')"}}}),
    ToolSpec("request_escalation", "Ask for a wider sandbox than the task's: network access to HOST:PORT endpoints "
             "and/or a wider file-access mode (read-only < workspace-write < full-access). The environment's policy "
             "decides; every request is recorded. A grant keeps the workspace's files.",
             {"type": "object", "properties": {
                 "network": {"type": "array", "items": {**_STRING, "description": "HOST:PORT"},
                             "maxItems": MAX_REQUEST_ENDPOINTS, "description": "endpoints to reach"},
                 "file_access": {"type": "string", "enum": ["read-only", "workspace-write", "full-access"],
                                 "description": "the file-access mode needed"},
                 "reason": {**_STRING, "maxLength": MAX_REASON_CHARS, "description": "why the task needs it"}},
              "required": ["reason"]}),
)
SANDBOX_TOOL_NAMES = frozenset(spec.name for spec in SANDBOX_TOOL_SPECS)


class SandboxToolFailure(InfraError):
    """The sandbox could not run a tool's command (a runner failure): the trial's infrastructure error."""


def _cut(data: bytes) -> str:
    text = data.decode("utf-8", "replace")
    if len(text) <= MAX_TOOL_OUTPUT:
        return text
    return text[:MAX_TOOL_OUTPUT] + f"\n[... cut: {len(text) - MAX_TOOL_OUTPUT} more characters]"


def _string(arguments: Mapping[str, Any], key: str, *, required: bool = True, default: str = "") -> str:
    value = arguments.get(key, None if required else default)
    if not isinstance(value, str):
        raise ValueError(f"{key}: expected a string")
    return value


@dataclass(frozen=True)
class SandboxTool:
    spec: ToolSpec
    session: SandboxSession

    async def call(self, arguments: Mapping[str, Any]) -> ToolResult:
        try:
            if self.spec.name == "run_shell":
                return await self._run_shell(arguments)
            if self.spec.name == "request_escalation":
                return await self._request_escalation(arguments)
            if self.spec.name == "read_file":
                return await self._read_file(arguments)
            if self.spec.name == "write_file":
                return await self._write_file(arguments)
            return await self._list_files(arguments)
        # The agent's bad argument or path (host_files' refusal, or sandboxd's INVALID_ARGUMENT): its observation.
        except (ValueError, BadInputError) as exc:
            return ToolResult(error=f"{self.spec.name}: {exc}")

    async def _exec(self, argv: list[str], timeout_s: float) -> tuple[int | None, str, str, ToolResult | None]:
        """(exit code, stdout, stderr, a result to return instead when the sandbox stopped the command)."""
        result = await self.session.exec(argv, timeout_s=timeout_s)
        outcome = result.outcome
        if outcome.kind == "runner_failure":
            raise SandboxToolFailure(f"{self.spec.name}: the sandbox failed to run the command: {outcome.signature}")
        if outcome.kind == "denied":
            return None, "", "", ToolResult(
                error=f"denied by the sandbox: {outcome.effect}",
                sandbox_event={"kind": "denied", "effect": outcome.effect, "tool": self.spec.name,
                               "driver": result.isolation.driver})
        if outcome.kind == "timeout":
            return None, "", "", ToolResult(error=f"the command timed out after {timeout_s:g}s")
        return outcome.code, _cut(result.stdout), _cut(result.stderr), None

    async def _run_shell(self, arguments: Mapping[str, Any]) -> ToolResult:
        command = _string(arguments, "command")
        if not command.strip() or len(command) > MAX_COMMAND_CHARS:
            raise ValueError(f"command: a non-empty command of at most {MAX_COMMAND_CHARS} characters")
        timeout = arguments.get("timeout", DEFAULT_SHELL_TIMEOUT_S)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 600:
            raise ValueError("timeout: seconds, more than 0 and at most 600")
        code, stdout, stderr, stopped = await self._exec(["sh", "-c", command], float(timeout))
        if stopped is not None:
            return stopped
        return ToolResult(value={"exit_code": code, "stderr": stderr, "stdout": stdout})

    async def _request_escalation(self, arguments: Mapping[str, Any]) -> ToolResult:
        request = escalation_request(arguments)
        escalate = getattr(self.session, "escalate", None)  # an EnvironmentSession: the environment's policy
        if callable(escalate):
            decision: Decision = await escalate(request)
        else:
            decision = Decision("denied", "this sandbox has no escalation policy: every request is denied")
        event: dict[str, Any] = {"kind": "escalation_request", "decision": decision.kind, "why": decision.why,
                                 "requested": request.to_event(), "reason": request.reason, "tool": self.spec.name,
                                 "driver": self.session.isolation.driver}
        if decision.kind != "granted":
            return ToolResult(error=f"escalation {decision.kind}: {decision.why}", sandbox_event=event)
        # What is in force now: the whole egress allowlist, and the file-access mode when it was widened.
        granted: dict[str, Any] = {"network": [f"{e.host}:{e.port}" for e in decision.network]}
        if decision.file_access is not None:
            granted["file_access"] = decision.file_access
        event["granted"] = granted
        return ToolResult(value={"granted": True, "why": decision.why, **granted}, sandbox_event=event)

    async def _read_file(self, arguments: Mapping[str, Any]) -> ToolResult:
        path = _string(arguments, "path")
        data = (await self.session.read_files([path], max_bytes=MAX_WRITE_BYTES))[path]
        return ToolResult(value=_cut(data))

    async def _write_file(self, arguments: Mapping[str, Any]) -> ToolResult:
        path, content = _string(arguments, "path"), _string(arguments, "content")
        data = content.encode()
        if len(data) > MAX_WRITE_BYTES:
            raise ValueError(f"content: at most {MAX_WRITE_BYTES} bytes")
        await self.session.write_files({path: data})
        return ToolResult(value=f"wrote {len(data)} bytes to {path}")

    async def _list_files(self, arguments: Mapping[str, Any]) -> ToolResult:
        path = _string(arguments, "path", required=False, default=".") or "."
        if path.startswith("-") or "\0" in path:
            raise ValueError("path: a workspace directory")
        code, stdout, stderr, stopped = await self._exec(
            ["find", path, "-type", "f", "-not", "-path", "*/.evalsi/*"], 30.0)
        if stopped is not None:
            return stopped
        if code != 0:
            return ToolResult(error=f"list_files: {stderr.strip() or f'find exited {code}'}")
        names = sorted(line.removeprefix("./") for line in stdout.splitlines() if line)
        more = len(names) - MAX_LIST_ENTRIES
        return ToolResult(value=names[:MAX_LIST_ENTRIES] + ([f"[... {more} more]"] if more > 0 else []))


def sandbox_tools(session: SandboxSession) -> dict[str, Tool]:
    """The five tools bound to ``session``."""
    return {spec.name: SandboxTool(spec, session) for spec in SANDBOX_TOOL_SPECS}


@dataclass(frozen=True)
class UnboundSandboxTool:
    """A sandbox tool's place in a harness before any task's sandbox exists: calling it is an error."""

    spec: ToolSpec

    async def call(self, arguments: Mapping[str, Any]) -> ToolResult:
        return ToolResult(error=f"{self.spec.name}: this task has no environment sandbox")
