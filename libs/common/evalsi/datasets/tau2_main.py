"""A tau2 domain's toolkit, run INSIDE the sandbox (standard library only) as ``.tau2/tau2.py``.

The domain's ``tools.py`` is written against tau2's ``ToolKitBase``, ``is_tool`` and ``ToolType``, given here as a
small module of the same names (the DB is the domain's JSON object, not tau2's pydantic models). Two modes:

- ``python3 -I -S tau2.py replay`` (``builtin/tau2``'s DB check): reads one JSON line on stdin, ``{"nonce", "db",
  "initial_actions", "agent_data", "gold_actions", "env_assertions", "predicted_calls"}``. As tau2's environment
  evaluator does, it builds two environments from the same initial state, replays the predicted tool calls on one
  and the expected actions on the other (a call that raises changes nothing and is not an error), runs each env
  assertion (a toolkit method and its arguments) on the predicted one, and prints ``<nonce> {"gold": <hash>,
  "predicted": <hash>, "env_assertions": [{"func_name", "met"}], ...}``: the sha256 of each final DB's canonical
  JSON; an assertion is met when its method returns ``assert_value`` (default true). The host reads only that line.
- ``python3 tau2.py serve`` (the harness environment of a ``tau2://`` record): an MCP server over stdio whose tools
  are the toolkit's, on ``db.json`` beside it with the task's initial state (``initial_state.json``) applied, so
  the built-in agent acts on the domain in the sandbox.
"""

import copy
import enum
import hashlib
import inspect
import json
import os
import sys
import types


class ToolType(enum.Enum):
    READ = "read"
    WRITE = "write"
    THINK = "think"
    GENERIC = "generic"


def is_tool(tool_type=ToolType.READ):
    def mark(function):
        function.__tool__ = tool_type
        return function
    return mark


class ToolKitBase:
    def __init__(self, db=None):
        self.db = db


def _install_tau2_names():
    toolkit = types.ModuleType("tau2.environment.toolkit")
    toolkit.ToolKitBase, toolkit.ToolType, toolkit.is_tool = ToolKitBase, ToolType, is_tool
    environment = types.ModuleType("tau2.environment")
    environment.toolkit = toolkit
    package = types.ModuleType("tau2")
    package.environment = environment
    sys.modules.update({"tau2": package, "tau2.environment": environment, "tau2.environment.toolkit": toolkit})


def _toolkit_class(namespace):
    found = [value for value in namespace.values()
             if isinstance(value, type) and issubclass(value, ToolKitBase) and value is not ToolKitBase]
    if len(found) != 1:
        raise SystemExit(f"tools.py: expected one ToolKitBase subclass, found {len(found)}")
    return found[0]


def _deep_update(target, update):
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _deep_update(target[key], value)
        else:
            target[key] = value


def _call(toolkit, name, arguments):
    method = getattr(type(toolkit), name, None)
    if method is None or not hasattr(method, "__tool__") or not isinstance(arguments, dict):
        return "error", f"no tool {name!r}"
    try:
        return "ok", method(toolkit, **arguments)
    except Exception as exc:  # a failing call changes nothing, as in tau2
        return "error", f"{type(exc).__name__}: {exc}"


def _environment(kit_class, request):
    toolkit = kit_class(copy.deepcopy(request["db"]))
    _deep_update(toolkit.db, request.get("agent_data") or {})
    for action in request.get("initial_actions") or []:
        _call(toolkit, action["name"], action.get("arguments") or {})
    return toolkit


def _hash(db):
    return hashlib.sha256(json.dumps(db, sort_keys=True, default=str).encode()).hexdigest()


def replay():
    request = json.loads(sys.stdin.readline())
    kit_class = _load_toolkit()
    predicted = _environment(kit_class, request)
    errors = [name for name, arguments in request["predicted_calls"]
              if _call(predicted, name, arguments)[0] == "error"]
    gold = _environment(kit_class, request)
    gold_errors = [action["name"] for action in request["gold_actions"]
                   if _call(gold, action["name"], action.get("arguments") or {})[0] == "error"]
    checks = [{"func_name": check["func_name"], "met": _asserted(predicted, check)}
              for check in request.get("env_assertions") or []]
    result = {"gold": _hash(gold.db), "predicted": _hash(predicted.db), "failed_calls": errors[:20],
              "failed_gold_actions": gold_errors[:20], "env_assertions": checks}
    print(request["nonce"], json.dumps(result), flush=True)


def _asserted(toolkit, check):
    """tau2's ``run_env_assertion``: the toolkit's method (a tool or not, never a private one) on the final DB
    returns the assertion's value; a method that raises or is missing fails it."""
    name = check["func_name"]
    method = getattr(type(toolkit), name, None)
    if name.startswith("_") or not callable(method):
        return False
    try:
        return method(toolkit, **(check.get("arguments") or {})) == check.get("assert_value", True)
    except Exception:  # tau2: raise_assertion_error=False, a failing check is unmet
        return False


def _load_toolkit():
    _install_tau2_names()
    namespace = {"__name__": "tools"}
    with open("tools.py", encoding="utf-8") as source:
        exec(compile(source.read(), "tools.py", "exec"), namespace)  # the domain's own toolkit
    return _toolkit_class(namespace)


_SCHEMA_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}


def _tool_schema(name, method):
    properties, required = {}, []
    for parameter in list(inspect.signature(method).parameters.values())[1:]:
        annotation = parameter.annotation
        origin = getattr(annotation, "__origin__", annotation)
        kind = _SCHEMA_TYPES.get(origin) or {"str": "string", "int": "integer", "float": "number", "bool": "boolean",
                                              "list": "array", "dict": "object"}.get(str(annotation), "string")
        properties[parameter.name] = {"type": kind}
        if parameter.default is inspect.Parameter.empty:
            required.append(parameter.name)
    return {"name": name, "description": inspect.getdoc(method) or "",
            "inputSchema": {"type": "object", "properties": properties, "required": required}}


def serve():
    os.chdir(os.path.dirname(os.path.abspath(__file__)))  # the domain's files beside this script
    kit_class = _load_toolkit()
    with open("db.json", encoding="utf-8") as handle:
        db = json.load(handle)
    with open("initial_state.json", encoding="utf-8") as handle:
        initial = json.load(handle)
    toolkit = _environment(kit_class, {"db": db, "agent_data": initial.get("agent_data"),
                                       "initial_actions": initial.get("actions")})
    tools = [_tool_schema(name, method) for name, method in sorted(vars(kit_class).items())
             if callable(method) and hasattr(method, "__tool__")]
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue
        method, params = message.get("method"), message.get("params") or {}
        if method == "initialize":
            result = {"protocolVersion": params.get("protocolVersion"), "capabilities": {"tools": {}},
                      "serverInfo": {"name": "tau2", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": tools}
        elif method == "tools/call":
            status, value = _call(toolkit, params.get("name"), params.get("arguments") or {})
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            result = {"content": [{"type": "text", "text": text}], "isError": status == "error"}
        else:
            reply = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "no such method"}}
            print(json.dumps(reply), flush=True)
            continue
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["serve"]:
        serve()
    else:
        replay()
