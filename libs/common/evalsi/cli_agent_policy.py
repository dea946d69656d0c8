"""Whether a server runs bring-your-own CLI agents (``spec.target.agent.cli``): evalsi.yaml's ``cli_agents:``.

A served run's CLI agent is a command chosen by a caller the server does not trust. It runs only inside a sandbox,
and only as the operator allows:

    cli_agents:
      commands: [sh, python3, "/opt/agents/*"]   # argv[0]: an exact name (looked up on the sandbox's PATH) or a
                                                 # glob of absolute paths as the sandbox sees them
      min_isolation: namespaced                  # at least namespaced (bubblewrap, gVisor, a microVM)
      max_timeout_s: 600                         # the longest a CLI agent runs (default 600)
      projects: [team-a]                         # projects that may run them (absent: every project)

Without the section every CLI agent is refused, naming it. Paths are the sandbox's, never the host's: the command
is resolved inside the sandbox's root (the server's runtime image or the environment's image), so a pattern names
files there (``/workspace/agent.sh``, ``/opt/agents/*``). A glob's ``*`` never crosses a ``/``, and a command with
``.`` or ``..`` components or a relative path is refused. An allowed interpreter runs whatever the caller feeds it
(``sh -c ...``): that is the operator's choice, and it still runs in the sandbox. CLI agents never run on the
host's root: a spec asking for it is refused, and a sandbox that reports the host root is not used.

``commands`` is not the security boundary (the sandbox is): the environment's setup and checker run other commands
in the same sandbox, and the caller's env may set PATH there. It names the agent programs the operator supports.

``cli_problems`` checks a spec at submit (the api: INVALID_ARGUMENT naming the field and the setting);
``policy_request`` and ``check_root`` are the worker's enforcement, the same rules again.
"""

from __future__ import annotations

import difflib
import fnmatch
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evalsi.errors import BadInputError
from evalsi.sandbox.model import Level
from evalsi.v1alpha1 import run_pb2

__all__ = ["SETTING", "CliAgentPolicy", "check_command", "check_root", "cli_problems", "granted", "load_cli_policy",
           "policy_request"]

SETTING = "cli_agents"
_KEYS = ("commands", "min_isolation", "max_timeout_s", "projects")
DEFAULT_MAX_TIMEOUT_S = 600.0
MAX_TIMEOUT_S = 24 * 3600.0  # the sandbox's own bound on one execution
MAX_COMMANDS = 256
_WHERE = "spec.target.agent.cli"
_ENV_WHERE = "spec.harness.environment"


@dataclass(frozen=True)
class CliAgentPolicy:
    """The operator's rules for CLI agents on a server (``cli_agents:``)."""

    commands: tuple[str, ...]
    min_isolation: Level = Level.NAMESPACED
    max_timeout_s: float = DEFAULT_MAX_TIMEOUT_S
    projects: tuple[str, ...] = ()  # empty: every project

    def to_document(self) -> dict[str, Any]:
        document: dict[str, Any] = {"commands": list(self.commands), "min_isolation": self.min_isolation.label,
                                    "max_timeout_s": self.max_timeout_s}
        if self.projects:
            document["projects"] = list(self.projects)
        return document


def load_cli_policy(value: Any, where: str = "evalsi.yaml") -> CliAgentPolicy | None:
    """The ``cli_agents:`` section, checked (None when absent: CLI agents are refused)."""
    if value is None:
        return None
    path = f"{where}: {SETTING}"
    if not isinstance(value, Mapping):
        raise BadInputError(f"{path}: expected a mapping of {', '.join(_KEYS)}")
    for key in value:
        if key not in _KEYS:
            close = difflib.get_close_matches(str(key), _KEYS, n=1)
            raise BadInputError(f"{path}.{key}: unknown key; " + (f"did you mean {close[0]}?" if close else
                                                                  f"accepted: {', '.join(_KEYS)}"))
    commands = value.get("commands")
    if (not isinstance(commands, list) or not commands or len(commands) > MAX_COMMANDS
            or not all(isinstance(c, str) and c for c in commands)):
        raise BadInputError(f"{path}.commands: a non-empty list (at most {MAX_COMMANDS}) of command names or "
                            "absolute path globs inside the sandbox")
    for index, pattern in enumerate(commands):
        _check_pattern(pattern, f"{path}.commands[{index}]")
    level = Level.parse(str(value.get("min_isolation", "namespaced")), f"{path}.min_isolation")
    if level < Level.NAMESPACED:
        raise BadInputError(f"{path}.min_isolation: {level.label!r} is below namespaced; a caller's command runs "
                            "with its own root, PID and network namespaces or stronger; accepted: namespaced, "
                            "kernel, vm")
    timeout = value.get("max_timeout_s", DEFAULT_MAX_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= MAX_TIMEOUT_S:
        raise BadInputError(f"{path}.max_timeout_s: seconds in (0, {MAX_TIMEOUT_S:g}], got {timeout!r}")
    projects = value.get("projects")
    if projects is not None and (not isinstance(projects, list) or not projects
                                 or not all(isinstance(p, str) and p for p in projects)):
        raise BadInputError(f"{path}.projects: a non-empty list of project names")
    return CliAgentPolicy(tuple(commands), level, float(timeout), tuple(projects or ()))


def _check_pattern(pattern: str, where: str) -> None:
    if "/" not in pattern:
        if any(ch in pattern for ch in "*?[") or pattern in (".", ".."):
            raise BadInputError(f"{where}: {pattern!r}: a bare name is matched exactly; a glob names absolute "
                                "paths inside the sandbox (e.g. /opt/agents/*)")
        return
    if not pattern.startswith("/") or posixpath.normpath(pattern) != pattern or "/../" in f"{pattern}/":
        raise BadInputError(f"{where}: {pattern!r}: a path glob is absolute and normalized (no '.', '..' or '//'), "
                            "as the sandbox sees it (e.g. /workspace/agent.sh, /opt/agents/*)")


def _matches(pattern: str, command: str) -> bool:
    if "/" not in pattern:
        return pattern == command
    parts, given = pattern.split("/"), command.split("/")
    return len(parts) == len(given) and all(fnmatch.fnmatchcase(g, p) for p, g in zip(parts, given, strict=True))


def check_command(policy: CliAgentPolicy, command: str, where: str = f"{_WHERE}.command[0]") -> None:
    """``BadInputError`` naming ``where`` and the setting unless the policy allows ``command`` (argv[0])."""
    allowed = ", ".join(policy.commands)
    if "/" in command and (not command.startswith("/") or posixpath.normpath(command) != command):
        raise BadInputError(f"{where}: {command[:200]!r}: a path must be absolute and normalized (as the sandbox "
                            f"sees it); the server's evalsi.yaml {SETTING}.commands allows: {allowed}")
    if not any(_matches(pattern, command) for pattern in policy.commands):
        raise BadInputError(f"{where}: {command[:200]!r} is not a command the server's evalsi.yaml "
                            f"{SETTING}.commands allows; accepted: {allowed}")


def _grant_problem(policy: CliAgentPolicy | None, project: str) -> str:
    if policy is None:
        return (f"{_WHERE}: CLI agents are not run on this server (project {project!r}); the operator allows them "
                f"with evalsi.yaml's {SETTING}: section ({SETTING}: {{commands: [...], min_isolation: namespaced, "
                "max_timeout_s: 600}})")
    if policy.projects and project not in policy.projects:
        return (f"{_WHERE}: project {project!r} may not run CLI agents; the server's evalsi.yaml "
                f"{SETTING}.projects allows: {', '.join(policy.projects)}")
    return ""


def granted(policy: CliAgentPolicy | None, project: str) -> CliAgentPolicy:
    """``policy`` when it lets ``project`` run CLI agents; else ``BadInputError`` naming the setting."""
    problem = _grant_problem(policy, project)
    if problem or policy is None:
        raise BadInputError(problem)
    return policy


def cli_problems(policy: CliAgentPolicy | None, run: run_pb2.EvalRun, project: str) -> list[str]:
    """What a served spec's CLI agent asks that ``policy`` does not allow ``project``, each naming its field and the
    setting (nothing when the target is no CLI agent)."""
    target = run.spec.target
    if target.WhichOneof("kind") != "agent" or target.agent.WhichOneof("kind") != "cli":
        return []
    problem = _grant_problem(policy, project)
    if problem or policy is None:
        return [problem]
    cli, problems = target.agent.cli, []
    if cli.command:
        try:
            check_command(policy, cli.command[0])
        except BadInputError as exc:
            problems.append(str(exc))
    if cli.HasField("timeout") and cli.timeout.ToNanoseconds() / 1e9 > policy.max_timeout_s:
        problems.append(f"{_WHERE}.timeout: {cli.timeout.ToNanoseconds() / 1e9:g}s is over the server's cap of "
                        f"{policy.max_timeout_s:g}s (evalsi.yaml {SETTING}.max_timeout_s)")
    environment = run.spec.harness.environment if run.spec.harness.HasField("environment") else None
    sandbox = environment.fields.get("sandbox") if environment is not None else None
    asked = sandbox.struct_value.fields.get("minIsolation") if sandbox is not None else None
    if asked is not None and asked.string_value:
        try:
            level = Level.parse(asked.string_value, f"{_ENV_WHERE}.sandbox.minIsolation")
        except BadInputError as exc:
            problems.append(str(exc))
        else:
            if level < policy.min_isolation:
                problems.append(f"{_ENV_WHERE}.sandbox.minIsolation: {level.label!r} is below what the server "
                                f"runs CLI agents under ({policy.min_isolation.label}, evalsi.yaml "
                                f"{SETTING}.min_isolation); ask for it or a stronger level, or leave it unset")
    root = environment.fields.get("root") if environment is not None else None
    if root is not None and _asks_host_root(root):
        problems.append(f"{_ENV_WHERE}.root: a CLI agent never runs on the host's root (evalsi.yaml {SETTING}); "
                        "give an image directory or tarball under the server's image roots, or leave it unset (the "
                        "server's runtime image)")
    return problems


def _asks_host_root(root: Any) -> bool:
    """An environment root naming the host: the string ``host``, ``{host: ...}``, or ``/`` (``//``) as the image."""
    if root.WhichOneof("kind") == "string_value":
        return root.string_value.strip() in ("host", "/")
    if root.WhichOneof("kind") != "struct_value":
        return False
    fields = root.struct_value.fields
    paths = [fields[key].string_value for key in ("image", "tarball", "path") if key in fields]
    # normpath keeps a leading '//' (POSIX leaves its meaning to the system): '//' is the root all the same.
    return "host" in fields or any(path and not posixpath.normpath(path).strip("/") for path in paths)


def policy_request(policy: CliAgentPolicy, request: run_pb2.SandboxSpec, base: Level) -> run_pb2.SandboxSpec:
    """The environment's sandbox request with its minimum raised to the policy's (``base``: the opener's minimum
    when the request names none); never lowered."""
    asked = Level.parse(request.min_isolation, "environment.sandbox.minIsolation") if request.min_isolation else base
    if asked >= policy.min_isolation:
        return request
    raised = run_pb2.SandboxSpec()
    raised.CopyFrom(request)
    raised.min_isolation = policy.min_isolation.label
    return raised


def check_root(policy: CliAgentPolicy, bounds: Mapping[str, str]) -> None:
    """``BadInputError`` when the sandbox reports the host's root (its isolation report's ``root`` bound)."""
    root = bounds.get("root", "")
    if root.startswith("host"):
        raise BadInputError(f"the sandbox's root is the host's ({root}); the server's CLI agent policy (evalsi.yaml "
                            f"{SETTING}) never runs a CLI agent there: set sandbox.root to an image (or the "
                            "runtime image)")
