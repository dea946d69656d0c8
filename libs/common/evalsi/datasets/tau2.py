"""tau2-bench domains as dataset rows: ``tau2://<domain-dir>``.

A domain directory holds tau2's files: ``tasks.json`` (the tasks: ``id``, ``user_scenario``, ``initial_state``,
``evaluation_criteria``), ``db.json`` (the domain's database) and ``policy.md`` (the agent's policy), plus
``tools.py``: the domain's toolkit, a ``ToolKitBase`` subclass whose ``@is_tool(ToolType...)`` methods act on
``self.db`` (tau2's toolkit API; the DB is the JSON object of ``db.json``).

Each task becomes a row: ``input`` the user scenario as text (what a simulated user acts out), metadata
``tau2_policy`` (the agent's system prompt), ``tools`` (the toolkit's tools as OpenAI-style tools, read from
``tools.py``'s signatures and docstrings without running it), ``user_scenario`` and ``tau2_domain``; ``reference``
the JSON text ``builtin/tau2`` grades against: the evaluation criteria, the initial state, the DB and the toolkit's
source (so the grader replays the calls in a sandbox wherever the record goes). Tasks that need tau2's user
environment (user tools, user data, a message history) are refused by name.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from evalsi.datasets.formats import check_file
from evalsi.errors import BadInputError

SCHEME = "tau2://"
FORMAT = "tau2"
FILES = ("tasks.json", "db.json", "tools.py")
STATE_DIR = ".tau2"
MCP_NAME = "tau2"  # the environment's MCP server: its tools reach the built-in agent as tau2_<tool>
MAX_NL_ASSERTIONS = 50  # one judge call grades them all
MAX_BYTES = {"tasks.json": 64 << 20, "db.json": 1 << 20, "tools.py": 1 << 20, "policy.md": 1 << 20}
_JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "list": "array",
               "dict": "object", "List": "array", "Dict": "object"}


def domain_dir(target: str, name: str) -> Path:
    path = Path(target).expanduser()
    if not path.is_dir():
        raise BadInputError(f"{name}: not a directory; tau2:// names a domain directory holding "
                            f"{', '.join(FILES)} (and policy.md)")
    return path


def read_tau2(path: Path, name: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(index, row)`` for each task of the domain directory ``path`` (or of a ``tasks.json`` named directly,
    the domain's other files beside it, none leading out of its directory)."""
    folder = path.parent if path.is_file() else path
    if path.is_file():  # errors name the domain's files as the given file's siblings
        name = name.rpartition("/")[0] or "."
    texts = {file: _read(folder, file, name) for file in (*FILES, "policy.md") if file != "policy.md" or (
        folder / file).exists()}
    try:
        tasks, db = json.loads(texts["tasks.json"]), json.loads(texts["db.json"])
    except json.JSONDecodeError as exc:
        raise BadInputError(f"{name}: {exc.msg} at line {exc.lineno} of tasks.json or db.json") from None
    if not isinstance(tasks, list) or not tasks:
        raise BadInputError(f"{name}/tasks.json: expected a non-empty list of tasks")
    if not isinstance(db, Mapping):
        raise BadInputError(f"{name}/db.json: expected an object (the domain's database)")
    tools = toolkit_tools(texts["tools.py"], f"{name}/tools.py")
    domain = folder.resolve().name
    for index, task in enumerate(tasks):
        yield index, task_row(task, f"{name}/tasks.json: task {index}", db=db, tools_source=texts["tools.py"],
                              tools=tools, policy=texts.get("policy.md", ""), domain=domain)


def _read(folder: Path, file: str, name: str) -> str:
    path = folder / file
    shown = f"{name}/{file}"
    check_file(path, shown)
    if not path.resolve().is_relative_to(folder.resolve()):
        raise BadInputError(f"{shown}: leads outside the domain directory")
    if path.stat().st_size > MAX_BYTES[file]:
        raise BadInputError(f"{shown}: over {MAX_BYTES[file] >> 20} MiB")
    return path.read_text(encoding="utf-8")


def task_row(task: Any, where: str, *, db: Mapping[str, Any], tools_source: str, tools: list[dict[str, Any]],
             policy: str, domain: str) -> dict[str, Any]:
    """One tau2 task as a row."""
    if not isinstance(task, Mapping) or task.get("id") in (None, ""):
        raise BadInputError(f"{where}: expected a task object with an id")
    where = f"{where} (id {task['id']!r})"
    given = task.get("evaluation_criteria")
    criteria = given or {}
    if not isinstance(criteria, Mapping):
        raise BadInputError(f"{where}: evaluation_criteria: expected an object")
    actions = criteria.get("actions") or []
    if not isinstance(actions, list) or not all(isinstance(a, Mapping) and isinstance(a.get("name"), str)
                                                for a in actions):
        raise BadInputError(f"{where}: evaluation_criteria.actions: expected a list of {{name, arguments}}")
    if any(a.get("requestor", "assistant") != "assistant" for a in actions):
        raise BadInputError(f"{where}: evaluation_criteria.actions: a user's action needs tau2's user "
                            "environment, which is not imported")
    _check_assertions(criteria, where)
    scenario = task.get("user_scenario") or {}
    initial_state = _initial_state(task.get("initial_state"), where)
    return {
        "id": str(task["id"]),
        "input": scenario_text(scenario),
        "reference": json.dumps({
            "task_id": str(task["id"]),
            "evaluation_criteria": None if given is None else {key: criteria.get(key) for key in (
                "actions", "communicate_info", "nl_assertions", "env_assertions", "reward_basis")},
            "initial_state": initial_state,
            "db": db, "tools_source": tools_source,
        }, ensure_ascii=False, sort_keys=True),
        "tools": tools,
        "environment": _environment(db, tools_source, initial_state),
        "tau2_policy": policy,
        "tau2_domain": domain,
        "user_scenario": scenario,
    }


def _check_assertions(criteria: Mapping[str, Any], where: str) -> None:
    """``nl_assertions`` (strings, for the judge) and ``env_assertions`` (``{func_name, arguments, assert_value}``
    on the assistant's environment) as ``builtin/tau2`` grades them."""
    nl = criteria.get("nl_assertions")
    if nl is not None and not (isinstance(nl, list) and all(isinstance(a, str) for a in nl)):
        raise BadInputError(f"{where}: evaluation_criteria.nl_assertions: expected a list of strings")
    if nl is not None and len(nl) > MAX_NL_ASSERTIONS:
        raise BadInputError(f"{where}: evaluation_criteria.nl_assertions: {len(nl)} over the limit of "
                            f"{MAX_NL_ASSERTIONS}")
    env = criteria.get("env_assertions")
    if env is None:
        return
    if not isinstance(env, list) or not all(
            isinstance(a, Mapping) and isinstance(a.get("func_name"), str) and a["func_name"].isidentifier()
            and not a["func_name"].startswith("_") and isinstance(a.get("arguments") or {}, Mapping) for a in env):
        raise BadInputError(f"{where}: evaluation_criteria.env_assertions: expected a list of {{func_name (a "
                            "public toolkit method), arguments (an object), assert_value}}")
    if any(a.get("env_type", "assistant") != "assistant" for a in env):
        raise BadInputError(f"{where}: evaluation_criteria.env_assertions: an assertion on the user's "
                            "environment needs tau2's user environment, which is not imported")


@cache
def _script() -> str:
    return (Path(__file__).parent / "tau2_main.py").read_text(encoding="utf-8")


def _environment(db: Mapping[str, Any], tools_source: str, initial_state: Mapping[str, Any]) -> dict[str, Any]:
    """A harness environment whose MCP server (in the sandbox) is the domain's toolkit at the task's initial state:
    the built-in agent calls its tools as ``tau2_<tool>``."""
    return {
        "files": {f"{STATE_DIR}/tau2.py": _script(), f"{STATE_DIR}/tools.py": tools_source,
                  f"{STATE_DIR}/db.json": json.dumps(db), f"{STATE_DIR}/initial_state.json": json.dumps(initial_state)},
        "tools": {"mcp": [{"name": MCP_NAME, "command": ["python3", f"{STATE_DIR}/tau2.py", "serve"]}]},
        "sandbox": {"minIsolation": "namespaced", "network": "deny"},
    }


def _initial_state(state: Any, where: str) -> dict[str, Any]:
    if not state:
        return {}
    if not isinstance(state, Mapping):
        raise BadInputError(f"{where}: initial_state: expected an object")
    data = state.get("initialization_data") or {}
    if data.get("user_data") or state.get("message_history"):
        raise BadInputError(f"{where}: initial_state: user_data and message_history need tau2's user "
                            "environment, which is not imported")
    actions = []
    for action in state.get("initialization_actions") or []:
        if not isinstance(action, Mapping) or action.get("env_type", "assistant") != "assistant":
            raise BadInputError(f"{where}: initial_state.initialization_actions: only the assistant's "
                                "environment is imported")
        actions.append({"name": action.get("func_name"), "arguments": action.get("arguments") or {}})
    return {"agent_data": data.get("agent_data"), "actions": actions}


def scenario_text(scenario: Any) -> str:
    """The user scenario as tau2 renders it for its user simulator: persona, then the instructions' parts."""
    if isinstance(scenario, str):
        return scenario
    if not isinstance(scenario, Mapping):
        return ""
    lines = []
    if scenario.get("persona"):
        lines += ["Persona:", f"  {scenario['persona']}"]
    instructions = scenario.get("instructions")
    if isinstance(instructions, Mapping):
        for key, title in (("domain", "Domain"), ("reason_for_call", "Reason for call"),
                           ("known_info", "Known info"), ("unknown_info", "Unknown info"),
                           ("task_instructions", "Task instructions")):
            if instructions.get(key):
                lines += [f"{title}:", f"  {instructions[key]}"]
    elif instructions:
        lines += ["Instructions:", f"  {instructions}"]
    return "\n".join(lines)


def toolkit_tools(source: str, name: str) -> list[dict[str, Any]]:
    """The ``@is_tool`` methods of ``tools.py`` as OpenAI-style tools, read from the source (never run here)."""
    try:
        tree = ast.parse(source, filename=name)
    except SyntaxError as exc:
        raise BadInputError(f"{name}:{exc.lineno}: {exc.msg}") from None
    tools = [_tool(node) for cls in tree.body if isinstance(cls, ast.ClassDef) for node in cls.body
             if isinstance(node, ast.FunctionDef) and any(_is_tool(d) for d in node.decorator_list)]
    if not tools:
        raise BadInputError(f"{name}: no @is_tool methods in a ToolKitBase subclass")
    return tools


def _is_tool(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Name) and target.id == "is_tool"


def _tool(node: ast.FunctionDef) -> dict[str, Any]:
    doc = ast.get_docstring(node) or ""
    summary, _, rest = doc.partition("\n\n")
    described = _arg_docs(rest)
    params = node.args.args[1:]  # self
    first_default = len(params) - len(node.args.defaults)
    properties = {arg.arg: {"type": _json_type(arg.annotation), "description": described.get(arg.arg, "")}
                  for arg in params}
    return {"type": "function", "function": {
        "name": node.name, "description": " ".join(summary.split()),
        "parameters": {"type": "object", "properties": properties,
                       "required": [arg.arg for arg in params[:first_default]]},
    }}


def _json_type(annotation: ast.expr | None) -> str:
    base = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    return _JSON_TYPES.get(base.id, "string") if isinstance(base, ast.Name) else "string"


def _arg_docs(text: str) -> dict[str, str]:
    """``name: description`` lines of a Google-style ``Args:`` section."""
    out: dict[str, str] = {}
    in_args = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.endswith(":") and " " not in stripped:
            in_args = stripped == "Args:"
            continue
        if in_args and ":" in stripped:
            key, _, value = stripped.partition(":")
            if key.isidentifier():
                out[key] = value.strip()
    return out
