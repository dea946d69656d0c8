"""Harness environments (§11): the files a task starts from, the setup commands that prepare them, the checker
that grades the end state, and the sandbox they all run in (docs/environments.md).

An environment is one JSON/YAML object, the same in a run spec's ``spec.harness.environment`` (every record's
default) and in a record's metadata ``environment`` (that record's own, replacing the default)::

    files: {"calc.py": "def add(a, b):\\n    return a - b\\n"}     # workspace path -> text
    setup: ["python3 -m py_compile calc.py"]                       # shell commands (or argv lists), in order
    check:
      command: "python3 test_calc.py"                              # shell command or argv list
      format: exit                                                 # exit | json | junit
      junit: report.xml                                            # junit: the report the command writes
      timeout: 60s
    sandbox: {minIsolation: namespaced, network: deny, resources: {timeout: 30s, memory: 536870912}}
    root: {image: /srv/images/python}                              # or {tarball: ...}, {oci: python:3.12-slim},
                                                                   # {dockerfile: env/Dockerfile, context: env}
    env: {PYTHONDONTWRITEBYTECODE: "1"}                            # for every command in the sandbox
    fileAccess: workspace-write                                    # or read-only
    escalation: {allow: {network: ["pypi.org:443"]}}               # the harness policy; default: deny
    snapshot: true                                                 # trials share one setup (false: setup per trial)
    tools: {mcp: [{name: fs, command: ["python3", "fs_server.py"], env: {ROOT: "."}, timeout: 1h}]}

``environment_from_mapping`` is the only reader: every mistake is a ``BadInputError`` naming the field and what
is accepted, and every size is bounded (a hostile spec or dataset row cannot make the harness write gigabytes).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from google.protobuf import json_format

from evalsi.durations import parse_duration
from evalsi.errors import BadInputError
from evalsi.sandbox.access import sandbox_problems, sandbox_request
from evalsi.sandbox.host_files import HostFileError, relative_path
from evalsi.sandbox.model import FileAccess, RootFilesystem, SandboxSpec
from evalsi.sandbox.oci_ref import parse_reference
from evalsi.v1alpha1 import run_pb2

from .escalation import GRANTABLE_FILE_ACCESS, EscalationPolicy, escalation_policy

__all__ = [
    "CHECK_FORMATS",
    "Checker",
    "Environment",
    "SandboxMcpServer",
    "environment_from_mapping",
]

CheckFormat = Literal["exit", "json", "junit"]
CHECK_FORMATS: tuple[str, ...] = ("exit", "json", "junit")

MAX_FILES = 256
MAX_FILES_BYTES = 8 * 1024 * 1024
MAX_PATH = 512
MAX_COMMANDS = 32
MAX_COMMAND_BYTES = 16 * 1024
MAX_ARGS = 256
DEFAULT_CHECK_TIMEOUT_S = 60.0
MAX_CHECK_TIMEOUT_S = 3600.0

_KEYS = ("files", "setup", "check", "sandbox", "root", "env", "fileAccess", "escalation", "snapshot", "tools")
MAX_ENV = 64
MAX_ENV_BYTES = 64 * 1024
_CHECK_KEYS = ("command", "format", "junit", "timeout")
MAX_MCP_SERVERS = 8
_MCP_KEYS = ("name", "command", "env", "timeout")
# A server's name prefixes its tools' names (``fs`` + ``read`` -> ``fs_read``): the characters model APIs accept.
MCP_NAME = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,23}")
DEFAULT_MCP_LIFETIME_S = 3600.0
MAX_MCP_LIFETIME_S = 86400.0


@dataclass(frozen=True)
class Checker:
    """Grades the sandbox's end state: ``exit`` (status 0 passes), ``json`` (the last stdout line that is a JSON
    object: ``{"success": bool, "reason": str, "score": number}``) or ``junit`` (the report at ``junit``: passes
    when it has tests and none failed or errored)."""

    argv: tuple[str, ...]
    format: CheckFormat = "exit"
    junit: str = ""
    timeout_s: float = DEFAULT_CHECK_TIMEOUT_S


@dataclass(frozen=True)
class SandboxMcpServer:
    """An MCP server started inside the environment's sandbox (stdio), its tools given to the agent as
    ``<name>_<tool>``; ``timeout_s`` bounds its lifetime as a command's timeout bounds the command."""

    name: str
    command: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = DEFAULT_MCP_LIFETIME_S


@dataclass(frozen=True)
class Environment:
    files: Mapping[str, bytes] = field(default_factory=dict)
    setup: tuple[tuple[str, ...], ...] = ()
    check: Checker | None = None
    # The sandbox request as a run spec's spec.sandbox (validated), resolved over the opener's base at open time,
    # so evalsi.yaml's sandbox section (or sandboxd's defaults) fills what the environment leaves unset.
    request: run_pb2.SandboxSpec = field(default_factory=run_pb2.SandboxSpec)
    root: RootFilesystem | None = None
    # Variables every execution in the sandbox sees (setup, the agent's commands, the checker).
    env: Mapping[str, str] = field(default_factory=dict)
    # The workspace's mode for the agent's commands (read-only or workspace-write); an escalation may widen it.
    file_access: FileAccess = "workspace-write"
    # The harness policy deciding the agent's escalation requests (deny all by default).
    escalation: EscalationPolicy = field(default_factory=EscalationPolicy)
    # Trials of this environment start from a snapshot of one prepared sandbox, where the rung can snapshot
    # (evalsi.harness.environment_snapshots); False runs the setup in every trial.
    snapshot: bool = True
    # MCP servers run inside the sandbox, under its root, workspace, network policy and bounds (mcp_sandbox.py).
    mcp: tuple[SandboxMcpServer, ...] = ()

    def sandbox_spec(self, base: SandboxSpec | None = None) -> SandboxSpec:
        spec = sandbox_request(self.request, "environment.sandbox", base=base)
        if self.env:
            spec = replace(spec, env={**spec.env, **self.env})
        spec = replace(spec, file_access=self.file_access)
        return replace(spec, root=self.root) if self.root is not None else spec


def environment_from_mapping(doc: Any, where: str) -> Environment:
    """Validate one environment object; ``where`` (``spec.harness.environment``, ``records.jsonl:3: metadata.
    environment``) prefixes every error."""
    if not isinstance(doc, Mapping):
        raise BadInputError(f"{where}: expected an object with {', '.join(_KEYS)}, got {_type(doc)}")
    unknown = [key for key in doc if key not in _KEYS]
    if unknown:
        raise BadInputError(f"{where}.{str(unknown[0])[:100]}: unknown key; expected one of {', '.join(_KEYS)}")
    files = _files(doc.get("files", {}), f"{where}.files")
    setup_doc = doc.get("setup", [])
    if not isinstance(setup_doc, list):
        raise BadInputError(f"{where}.setup: expected a list of commands, got {_type(setup_doc)}")
    if len(setup_doc) > MAX_COMMANDS:
        raise BadInputError(f"{where}.setup: {len(setup_doc)} commands is over the limit of {MAX_COMMANDS}")
    setup = tuple(_command(item, f"{where}.setup[{i}]") for i, item in enumerate(setup_doc))
    check = _checker(doc["check"], f"{where}.check") if doc.get("check") is not None else None
    request = _sandbox(doc.get("sandbox", {}), f"{where}.sandbox")
    root = _root(doc["root"], f"{where}.root") if doc.get("root") is not None else None
    env = _env(doc.get("env", {}), f"{where}.env")
    file_access = doc.get("fileAccess", "workspace-write")
    if file_access not in GRANTABLE_FILE_ACCESS:
        raise BadInputError(f"{where}.fileAccess: {str(file_access)[:100]!r}; accepted: "
                            f"{', '.join(GRANTABLE_FILE_ACCESS)}")
    escalation = escalation_policy(doc.get("escalation", "deny"), f"{where}.escalation")
    snapshot = doc.get("snapshot", True)
    if not isinstance(snapshot, bool):
        raise BadInputError(f"{where}.snapshot: expected true (trials share one setup) or false (setup per trial), "
                            f"got {_type(snapshot)}")
    mcp = _tools(doc.get("tools", {}), f"{where}.tools")
    return Environment(files=files, setup=setup, check=check, request=request, root=root, env=env,
                       file_access=file_access, escalation=escalation, snapshot=snapshot, mcp=mcp)


def _tools(value: Any, where: str) -> tuple[SandboxMcpServer, ...]:
    if not isinstance(value, Mapping) or any(key != "mcp" for key in value):
        raise BadInputError(f"{where}: expected an object with mcp (a list of servers started in the sandbox)")
    servers = value.get("mcp", [])
    if not isinstance(servers, list) or len(servers) > MAX_MCP_SERVERS:
        raise BadInputError(f"{where}.mcp: expected a list of at most {MAX_MCP_SERVERS} servers "
                            "({name, command, env, timeout})")
    out: list[SandboxMcpServer] = []
    for i, doc in enumerate(servers):
        at = f"{where}.mcp[{i}]"
        if not isinstance(doc, Mapping):
            raise BadInputError(f"{at}: expected an object with {', '.join(_MCP_KEYS)}, got {_type(doc)}")
        unknown = [key for key in doc if key not in _MCP_KEYS]
        if unknown:
            raise BadInputError(f"{at}.{str(unknown[0])[:100]}: unknown key; expected one of {', '.join(_MCP_KEYS)}")
        name = doc.get("name")
        if not isinstance(name, str) or not MCP_NAME.fullmatch(name):
            raise BadInputError(f"{at}.name: {str(name)[:100]!r}; a name is a letter then up to 23 letters, digits "
                                "or '-' (it prefixes the server's tool names)")
        if any(server.name == name for server in out):
            raise BadInputError(f"{at}.name: {name!r} names another server too; names are unique")
        if doc.get("command") is None:
            raise BadInputError(f"{at}.command: required (an argv list, or a shell command)")
        timeout_s = DEFAULT_MCP_LIFETIME_S
        if doc.get("timeout") is not None:
            try:
                timeout_s = float(parse_duration(doc["timeout"])[:-1])
            except ValueError as exc:
                raise BadInputError(f"{at}.timeout: {exc}") from None
            if not 0 < timeout_s <= MAX_MCP_LIFETIME_S:
                raise BadInputError(f"{at}.timeout: the server's lifetime, more than 0 and at most "
                                    f"{MAX_MCP_LIFETIME_S:g}s, got {doc['timeout']!r}")
        out.append(SandboxMcpServer(name=name, command=_command(doc["command"], f"{at}.command"),
                                    env=_env(doc.get("env", {}), f"{at}.env"), timeout_s=timeout_s))
    return tuple(out)


def _env(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, Mapping) or len(value) > MAX_ENV:
        raise BadInputError(f"{where}: expected an object of at most {MAX_ENV} NAME: value strings")
    size = 0
    for name, text in value.items():
        if not isinstance(name, str) or not name or "=" in name or "\0" in name or not isinstance(text, str) \
                or "\0" in text:
            raise BadInputError(f"{where}.{str(name)[:100]}: a name without '=' or NUL and a string value without NUL")
        size += len(name) + len(text)
    if size > MAX_ENV_BYTES:
        raise BadInputError(f"{where}: over the limit of {MAX_ENV_BYTES} characters")
    return dict(value)


def _files(value: Any, where: str) -> dict[str, bytes]:
    if not isinstance(value, Mapping):
        raise BadInputError(f"{where}: expected an object of workspace path -> text, got {_type(value)}")
    if len(value) > MAX_FILES:
        raise BadInputError(f"{where}: {len(value)} files is over the limit of {MAX_FILES}")
    out: dict[str, bytes] = {}
    total = 0
    for path, text in value.items():
        if not isinstance(path, str) or not path or len(path) > MAX_PATH or "\0" in path:
            raise BadInputError(f"{where}: {str(path)[:100]!r}: a path is a non-empty string of at most {MAX_PATH} "
                                "characters")
        relative = _workspace_path(path, f"{where}.{path[:100]}")
        if relative in out:
            raise BadInputError(f"{where}.{path[:100]}: names the file {relative!r} a second time")
        if not isinstance(text, str):
            raise BadInputError(f"{where}.{path[:100]}: expected the file's text (a string), got {_type(text)}")
        data = text.encode()
        total += len(data)
        if total > MAX_FILES_BYTES:
            raise BadInputError(f"{where}: the files are over the limit of {MAX_FILES_BYTES} bytes in all")
        out[relative] = data
    return out


def _workspace_path(path: str, where: str) -> str:
    """A file of the workspace as the host's file access names it (one rule, sandbox.host_files.relative_path)."""
    try:
        return relative_path(path)
    except HostFileError as exc:
        raise BadInputError(f"{where}: a file lives in the workspace: a relative path without '..' (or one under "
                            f"/workspace/); {exc}") from None


def _command(value: Any, where: str) -> tuple[str, ...]:
    """A shell command (run with ``sh -c``) or an argv list."""
    if isinstance(value, str):
        if not value.strip():
            raise BadInputError(f"{where}: an empty command")
        argv: tuple[str, ...] = ("sh", "-c", value)
    elif isinstance(value, list) and value and all(isinstance(part, str) for part in value):
        if len(value) > MAX_ARGS:
            raise BadInputError(f"{where}: {len(value)} arguments is over the limit of {MAX_ARGS}")
        argv = tuple(value)
    else:
        raise BadInputError(f"{where}: expected a shell command (a string) or an argv list of strings, got "
                            f"{_type(value)}")
    if sum(len(part) for part in argv) > MAX_COMMAND_BYTES or any("\0" in part for part in argv):
        raise BadInputError(f"{where}: a command is at most {MAX_COMMAND_BYTES} characters, without NUL")
    return argv


def _checker(value: Any, where: str) -> Checker:
    if isinstance(value, str | list):
        return Checker(argv=_command(value, where))
    if not isinstance(value, Mapping):
        raise BadInputError(f"{where}: expected a command or an object with {', '.join(_CHECK_KEYS)}, got "
                            f"{_type(value)}")
    unknown = [key for key in value if key not in _CHECK_KEYS]
    if unknown:
        raise BadInputError(f"{where}.{str(unknown[0])[:100]}: unknown key; expected one of {', '.join(_CHECK_KEYS)}")
    if "command" not in value:
        raise BadInputError(f"{where}.command: required (the command that grades the workspace)")
    kind = value.get("format", "exit")
    if kind not in CHECK_FORMATS:
        raise BadInputError(f"{where}.format: {str(kind)[:100]!r}; accepted: {', '.join(CHECK_FORMATS)}")
    junit = value.get("junit", "")
    if kind == "junit" and (not isinstance(junit, str) or not junit or len(junit) > MAX_PATH):
        raise BadInputError(f"{where}.junit: format junit needs the report's workspace path (a relative path "
                            "without '..')")
    if kind == "junit":
        _workspace_path(junit, f"{where}.junit")
    if kind != "junit" and junit:
        raise BadInputError(f"{where}.junit: only used with format: junit")
    timeout_s = DEFAULT_CHECK_TIMEOUT_S
    if value.get("timeout") is not None:
        try:
            timeout_s = float(parse_duration(value["timeout"])[:-1])
        except ValueError as exc:
            raise BadInputError(f"{where}.timeout: {exc}") from None
        if not 0 < timeout_s <= MAX_CHECK_TIMEOUT_S:
            raise BadInputError(f"{where}.timeout: must be between 0 and {MAX_CHECK_TIMEOUT_S:g}s, got "
                                f"{value['timeout']!r}")
    return Checker(argv=_command(value["command"], f"{where}.command"), format=kind, junit=junit,
                   timeout_s=timeout_s)


def _sandbox(value: Any, where: str) -> run_pb2.SandboxSpec:
    """The run spec's SandboxSpec fields (minIsolation, network, allow, resources), checked by the code pack's
    checks."""
    if not isinstance(value, Mapping):
        raise BadInputError(f"{where}: expected an object (minIsolation, network, allow, resources), got "
                            f"{_type(value)}")
    message = run_pb2.SandboxSpec()
    try:
        json_format.ParseDict(dict(value), message)
    except json_format.ParseError as exc:
        raise BadInputError(f"{where}: {exc}; accepted keys: minIsolation, network, allow, resources "
                            "(timeout, memory, pids, outputBytes, cpuSeconds)") from None
    problems = sandbox_problems(message, where)
    if problems:
        raise BadInputError("; ".join(problems))
    return message


def _root(value: Any, where: str) -> RootFilesystem:
    if isinstance(value, Mapping) and "dockerfile" in value:
        return _dockerfile_root(value, where)
    if not isinstance(value, Mapping) or len(value) != 1 or next(iter(value)) not in ("image", "tarball", "oci"):
        raise BadInputError(f"{where}: expected {{image: DIR}} or {{tarball: FILE}} (the sandbox's whole root), "
                            "{oci: IMAGE} (an OCI image reference such as python:3.12-slim, or an image layout or "
                            "archive's absolute path), or {dockerfile: FILE, context: DIR} (an image built from it)")
    kind, path = next(iter(value.items()))
    if not isinstance(path, str) or not path or len(path) > 4096:
        raise BadInputError(f"{where}.{kind}: expected a {'reference or path' if kind == 'oci' else 'path'}")
    if kind == "oci" and not path.startswith("/"):
        parse_reference(path, f"{where}.oci")
    return RootFilesystem(kind=kind, path=path)


def _dockerfile_root(value: Mapping[str, Any], where: str) -> RootFilesystem:
    """``{dockerfile: FILE, context: DIR}`` (paths as ``image`` and ``tarball`` take them; the context defaults to
    the Dockerfile's directory). The file is not read here: the API reads specs too, and a path a caller chose
    must not make it echo a file of its own host; the build reads and parses it (image_build.py)."""
    unknown = [key for key in value if key not in ("dockerfile", "context")]
    if unknown:
        raise BadInputError(f"{where}.{str(unknown[0])[:100]}: unknown key; expected dockerfile and context")
    path, context = value["dockerfile"], value.get("context", "")
    for key, text in (("dockerfile", path), ("context", context)):
        if not isinstance(text, str) or len(text) > 4096 or "\0" in text or (key == "dockerfile" and not text):
            raise BadInputError(f"{where}.{key}: expected a path")
    return RootFilesystem(kind="dockerfile", path=path, context=context)


def _type(value: Any) -> str:
    return "null" if value is None else type(value).__name__
