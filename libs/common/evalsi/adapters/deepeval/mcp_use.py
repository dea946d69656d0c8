"""DeepEval's MCP use metric as an Evals.si evaluator, judged: whether the agent used the primitives of its MCP servers
well for the input. The servers (their names and the tools, resources and prompts they offer, as MCP lists them) come
from a param or the record's metadata ``mcp_servers``; the calls are the trajectory's tool calls, typed MCP where the
tool is one a server offers (DeepEval's ``ToolCallType.MCP``). Runs in DeepEval's virtualenv."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from deepeval import metrics as deepeval_metrics  # type: ignore[import-not-found]
from deepeval.test_case import LLMTestCase, MCPServer, ToolCall, ToolCallType  # type: ignore[import-not-found]

from evalsi.adapters.deepeval import UPSTREAM
from evalsi.adapters.deepeval.cases import MAX_TOOL_CALLS, tool_call_fields
from evalsi.adapters.deepeval.judge_model import JudgeLLM
from evalsi.adapters.deepeval.scoring import COMMON_PARAMS, VERSION, check_threshold, measure, outputs, template
from evalsi.adapters.deepeval.traces import request_text
from evalsi.errors import BadInputError, SkipRecord
from evalsi.evaluators import EvalContext, evaluator
from evalsi.records import canonical_json, content_text, from_value
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

MCP_METADATA = "mcp_servers"
MAX_SERVERS = 20
TRANSPORTS = ("stdio", "sse", "streamable-http")  # DeepEval's MCPServer.transport
PRIMITIVES = ("available_tools", "available_resources", "available_prompts")


def server_fields(items: Any, source: str, error: type[Exception]) -> list[dict[str, Any]]:
    """``MCPServer`` keyword arguments of a list of servers read from ``source``: each an object with a
    ``server_name``, optionally a ``transport`` and the lists of what it offers (objects, as MCP lists them). A bad
    one raises ``error`` (BadInputError for a param; ValueError for a record's, which fails that record only)."""
    if not isinstance(items, list | tuple) or not 0 < len(items) <= MAX_SERVERS:
        raise error(f"{source} must be a list of 1 to {MAX_SERVERS} MCP servers, got {type(items).__name__}"
                    f"{f' of {len(items)}' if isinstance(items, list | tuple) else ''}")
    servers = []
    for index, item in enumerate(items):
        where = f"{source}[{index}]"
        if not isinstance(item, Mapping) or not isinstance(item.get("server_name"), str) or not item["server_name"]:
            raise error(f"{where} must be an object with a 'server_name' (and optionally 'transport', "
                        f"{', '.join(repr(p) for p in PRIMITIVES)}), got {item!r}"[:500])
        unknown = sorted(set(item) - {"server_name", "transport", *PRIMITIVES})
        if unknown:
            raise error(f"{where}: {unknown} not known; an MCP server has server_name, transport, "
                        f"{', '.join(PRIMITIVES)}")
        if item.get("transport") is not None and item["transport"] not in TRANSPORTS:
            raise error(f"{where}.transport must be one of {', '.join(TRANSPORTS)}, got {item['transport']!r}")
        server: dict[str, Any] = {"server_name": item["server_name"], "transport": item.get("transport")}
        for primitive in PRIMITIVES:
            listed = item.get(primitive)
            if listed is not None and (not isinstance(listed, list | tuple) or len(listed) > MAX_TOOL_CALLS
                                       or not all(isinstance(p, Mapping) for p in listed)):
                raise error(f"{where}.{primitive} must be a list of at most {MAX_TOOL_CALLS} objects")
            server[primitive] = None if listed is None else list(listed)
        servers.append(server)
    return servers


def mcp_servers(record: Record, given: list | None) -> list[dict[str, Any]]:
    """The MCP servers the agent had: the param when given, else the metadata's ``mcp_servers``. None: skipped."""
    if given is not None:
        return server_fields(given, "param 'mcp_servers'", BadInputError)
    if MCP_METADATA in record.metadata:
        return server_fields(from_value(record.metadata[MCP_METADATA]), f"metadata '{MCP_METADATA}'", ValueError)
    raise SkipRecord(f"no MCP servers: set param 'mcp_servers' or metadata '{MCP_METADATA}'")


def mcp_case(record: Record, servers: list[dict[str, Any]]) -> LLMTestCase:
    """The record's ``LLMTestCase``: the request, the reply, the servers, and the trajectory's tool calls (DeepEval
    reads them when no MCP tool calls are given), typed MCP where a server offers the tool."""
    offered = {tool.get("name") for server in servers for tool in server["available_tools"] or []}
    calls = [ToolCall(**call, type=ToolCallType.MCP if call["name"] in offered else ToolCallType.FUNCTION)
             for call in tool_call_fields(record)]
    return LLMTestCase(input=request_text(record), actual_output=content_text(record.output),
                       tools_called=calls or None, mcp_servers=[MCPServer(**server) for server in servers])


def _check_servers(*, threshold: float, mcp_servers: list | None, **_: Any) -> None:
    check_threshold(threshold=threshold)
    if mcp_servers is not None:
        server_fields(mcp_servers, "param 'mcp_servers'", BadInputError)


@evaluator("deepeval/mcp-use", version=VERSION, requires=("input", "output", "judge"),
           outputs=outputs("the lower of the judge's grades of the MCP primitives used and of their arguments"),
           check=_check_servers,
           description=f"DeepEval's MCPUseMetric ({UPSTREAM}): the judge grades the MCP primitives the agent used "
                       "(the trajectory's tool calls) against those its servers offer, and their arguments.",
           params={"mcp_servers": "the agent's MCP servers: {server_name, transport, available_tools, "
                                  "available_resources, available_prompts} objects; unset to read metadata "
                                  "mcp_servers", **COMMON_PARAMS})
async def mcp_use(record: Record, ctx: EvalContext, *, mcp_servers: list | None = None, threshold: float = 0.5,
                  include_reason: bool = True, strict_mode: bool = False) -> list[Score]:
    servers = _servers(record, mcp_servers)
    case = mcp_case(record, servers)
    # The servers are in the template key: calls judged against some servers are never reused for others.
    digest = hashlib.sha256(canonical_json(servers).encode()).hexdigest()[:16]
    model = JudgeLLM(ctx.require_judge(), f"{template('mcp-use')}:{digest}")
    metric = deepeval_metrics.MCPUseMetric(
        threshold=threshold, model=model, eval_mode="llm", include_reason=include_reason, strict_mode=strict_mode,
        async_mode=True, verbose_mode=False)
    return await measure(metric, model, case)


_servers = mcp_servers  # the param of mcp_use shadows the function's name
