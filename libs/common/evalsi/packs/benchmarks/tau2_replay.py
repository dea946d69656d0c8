"""tau2's environment replay, run INSIDE the sandbox as ``python3 -I -S replay.py`` (standard library only).

It reads one JSON line on stdin: ``{"nonce", "db", "initial_actions", "agent_data", "gold_actions",
"predicted_calls"}`` and loads ``tools.py`` (the domain's toolkit, written against tau2's ``ToolKitBase``,
``is_tool`` and ``ToolType``, given here as a small module of the same names: the DB is the domain's JSON object,
not tau2's pydantic models). As tau2's environment evaluator does, it builds two environments from the same
initial state, replays the predicted tool calls on one and the expected actions on the other (a call that raises
changes nothing and is not an error), and prints ``<nonce> {"gold": <hash>, "predicted": <hash>, ...}``: the
sha256 of each final DB's canonical JSON. The host reads only the line that starts with the nonce.
"""

import copy
import enum
import hashlib
import json
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


def main():
    request = json.loads(sys.stdin.readline())
    _install_tau2_names()
    namespace = {"__name__": "tools"}
    with open("tools.py", encoding="utf-8") as source:
        exec(compile(source.read(), "tools.py", "exec"), namespace)  # the domain's own toolkit
    kit_class = _toolkit_class(namespace)
    predicted = _environment(kit_class, request)
    errors = [name for name, arguments in request["predicted_calls"]
              if _call(predicted, name, arguments)[0] == "error"]
    gold = _environment(kit_class, request)
    gold_errors = [action["name"] for action in request["gold_actions"]
                   if _call(gold, action["name"], action.get("arguments") or {})[0] == "error"]
    result = {"gold": _hash(gold.db), "predicted": _hash(predicted.db), "failed_calls": errors[:20],
              "failed_gold_actions": gold_errors[:20]}
    print(request["nonce"], json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
