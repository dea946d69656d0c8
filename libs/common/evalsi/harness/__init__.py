"""evalsi-harness: the built-in reference agent (docs/harness.md).

A tool-calling loop over OpenAI-compatible and Anthropic models, with tools from Python functions and MCP
servers (stdio and streamable HTTP), parallel tool calls, budgets, mocks and seeded fault injection, every
exchange recorded to a cassette that replays with no model or tool call, every step an OpenTelemetry span.
"""

from .cassette import Cassette, CassetteMismatch, cassette_name, read_cassette
from .config import (
    Budget,
    FaultConfig,
    HarnessConfig,
    McpServerConfig,
    MockConfig,
    Pricing,
    config_from_mapping,
    load_config,
)
from .loop import STOP_REASONS, TrialResult, run_trial
from .mcp import HttpMcpClient, McpClient, McpError, StdioMcpClient
from .models import ConnectorModel, ModelAnswer, ModelToolCall
from .runner import Harness, replay
from .tasks import Task, load_tasks
from .tools import ToolResult, ToolSpec, function_spec

__all__ = [
    "STOP_REASONS",
    "Budget",
    "Cassette",
    "CassetteMismatch",
    "ConnectorModel",
    "FaultConfig",
    "Harness",
    "HarnessConfig",
    "HttpMcpClient",
    "McpClient",
    "McpError",
    "McpServerConfig",
    "MockConfig",
    "ModelAnswer",
    "ModelToolCall",
    "Pricing",
    "StdioMcpClient",
    "Task",
    "ToolResult",
    "ToolSpec",
    "TrialResult",
    "cassette_name",
    "config_from_mapping",
    "function_spec",
    "load_config",
    "load_tasks",
    "read_cassette",
    "replay",
    "run_trial",
]
