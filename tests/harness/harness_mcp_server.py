"""A real MCP tool server (the MCP Python SDK's MCPServer, formerly FastMCP) for the harness tests.

Run as ``python harness_mcp_server.py stdio`` or ``python harness_mcp_server.py http PORT [json]`` (``json``:
plain JSON answers instead of SSE streams).
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("harness-test-tools", log_level="CRITICAL")


@server.tool()
def lookup_order(order_id: str) -> str:
    """Look up an order's status by its id."""
    return f"order {order_id}: shipped"


@server.tool()
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


@server.tool()
def explode(reason: str) -> str:
    """Always fails, with the given reason."""
    raise ValueError(reason)


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", port=int(sys.argv[2]), host="127.0.0.1", json_response=sys.argv[3:] == ["json"])
