"""A tiny MCP stdio server for the environment tests, written into the sandbox's workspace and run there by the
runtime image's python3: one tool, ``read``, answering a file's text (any path the server's process can open),
or an error. Its argv carries a token the tests look for among the host's processes; with ``--die-on-call`` it
exits (status 5) when a tool is called."""

import json
import sys


def answer(request: dict) -> dict | None:
    method, params = request.get("method"), request.get("params") or {}
    if "id" not in request:  # a notification (initialized)
        return None
    if method == "initialize":
        result = {"protocolVersion": params.get("protocolVersion", "2025-06-18"), "capabilities": {"tools": {}},
                  "serverInfo": {"name": "sandbox-fs", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "read", "description": "Read a file's text.",
                             "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}},
                                             "required": ["path"]}}]}
    elif method == "tools/call" and "--die-on-call" in sys.argv:
        sys.exit(5)
    elif method == "tools/call" and params.get("name") == "read":
        try:
            with open(params["arguments"]["path"]) as handle:
                result = {"content": [{"type": "text", "text": handle.read()}]}
        except OSError as exc:
            result = {"content": [{"type": "text", "text": f"cannot read: {exc.strerror}"}], "isError": True}
    else:
        return {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": f"no {method}"}}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


for line in sys.stdin:
    reply = answer(json.loads(line))
    if reply is not None:
        print(json.dumps(reply), flush=True)
