"""Harbor tasks (Terminal-Bench 2.0's format) as harness tasks: ``harbor://<task dir, dir of tasks, or task list>``.

A task directory holds ``instruction.md`` (the prompt), ``task.toml`` (``version``; ``[metadata]``,
``[verifier] timeout_sec``, ``[agent] timeout_sec``, ``[environment]`` build and resource settings),
``environment/Dockerfile`` (its build context ``environment/``), ``tests/test.sh`` (the verifier, which writes the
reward) and optionally ``solution/solve.sh`` (the oracle). ``terminal-bench://`` reads these too, where it finds a
``task.toml`` and no ``task.yaml``.

Each task becomes a row: ``input`` the instruction, metadata ``environment`` a harness environment whose root is
built from ``environment/Dockerfile`` (the subset of docs/environments.md; without one, ``docker_image`` as an OCI
root) and whose checker runs test.sh and reads the reward as Harbor does (``harbor_main.py``); metadata ``harbor``
the task's name, version, metadata and timeouts. The ``harbor-oracle`` format adds ``solution/`` to the workspace
for the oracle agent (``python3 .harbor/check.py solve``), Harbor's sanity check of a task.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from evalsi.datasets.task_dirs import task_directories
from evalsi.errors import BadInputError
from evalsi.harness.environment import MAX_FILES, MAX_FILES_BYTES

SCHEME = "harbor://"
FORMAT = "harbor"
ORACLE_SCHEME = "harbor-oracle://"
ORACLE_FORMAT = "harbor-oracle"
ORACLE_COMMAND = ("python3", ".harbor/check.py", "solve")
STATE_DIR = ".harbor"
MARKER = "task.toml"
DEFAULT_TIMEOUT_S = 600.0  # Harbor's default for the verifier and the agent
# The checker's own bound is an hour, the script around test.sh needs room: a task's longer timeout (TB 2.0 has
# tasks of 3600 s) gives test.sh this much
MAX_TEST_TIMEOUT_S = 3570.0
_CHECK_ROOM_S = 30
_MAX_TEXT_BYTES = 1 << 20
_REQUIRED = ("instruction.md", "task.toml", "tests/test.sh")
_NUMBER = "a number"
# The keys read here and their types, as Harbor's task config types them; any other key is tolerated, as Harbor's
# config ignores it. [metadata] is Harbor's free-form table (TB 2.0's author_name is a string or a list).
_KEYS: dict[str, dict[str, str]] = {
    "metadata": {},
    "verifier": {"timeout_sec": _NUMBER},
    "agent": {"timeout_sec": _NUMBER},
    "environment": {"build_timeout_sec": _NUMBER, "docker_image": "a string", "cpus": "an integer",
                    "memory": "a string", "memory_mb": "an integer", "storage_mb": "an integer",
                    "gpus": "an integer", "allow_internet": "a boolean"},
}


def tasks_dir(target: str, name: str) -> Path:
    """What ``harbor://`` names: a task directory (or its task.toml), a directory of them, or a task list."""
    path = Path(target).expanduser()
    if not path.exists():
        raise BadInputError(f"{name}: no such file or directory; harbor:// names a task directory "
                            f"({', '.join(_REQUIRED)}, environment/Dockerfile) or its task.toml, a directory of them, "
                            "or a list file of them")
    return path


def is_harbor(path: Path) -> bool:
    """Whether ``path`` (as ``terminal-bench://`` names it) holds Harbor tasks and no Terminal-Bench 1.0 task."""
    if path.is_file() and path.name != MARKER and path.stat().st_size <= _MAX_TEXT_BYTES:  # a task list
        first = next((line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
                      if line.strip() and not line.startswith("#")), None)
        return first is not None and (path.parent / first).is_dir() and is_harbor(path.parent / first)
    if path.is_file():
        return path.name == MARKER
    if (path / "task.yaml").is_file():
        return False
    return (path / MARKER).is_file() or any((child / MARKER).is_file() for child in path.iterdir())


def read_harbor(path: Path, name: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(index, row)`` for the task at ``path``, each task directory in it (sorted), or each task a list names."""
    return _read(path, name, oracle=False)


def read_harbor_oracle(path: Path, name: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """As :func:`read_harbor`, with each task's ``solution/`` in the workspace for the oracle agent."""
    return _read(path, name, oracle=True)


def _read(path: Path, name: str, *, oracle: bool) -> Iterator[tuple[int, dict[str, Any]]]:
    for index, (task, where) in enumerate(task_directories(path, name, MARKER)):
        yield index, task_row(task, where, oracle=oracle)


def task_row(task: Path, where: str, *, oracle: bool = False) -> dict[str, Any]:
    real = task.resolve()
    for file in _REQUIRED:
        if not (task / file).is_file() or not (task / file).resolve().is_relative_to(real):
            raise BadInputError(f"{where}/{file}: missing (a Harbor task has {', '.join(_REQUIRED)} and "
                                "environment/Dockerfile)")
    config = task_config(task / MARKER, f"{where}/{MARKER}")
    verifier_timeout = float(config.get("verifier", {}).get("timeout_sec", DEFAULT_TIMEOUT_S))
    if verifier_timeout <= 0:
        raise BadInputError(f"{where}/{MARKER}: verifier.timeout_sec: expected seconds over 0, got "
                            f"{verifier_timeout:g}")
    test_timeout = min(verifier_timeout, MAX_TEST_TIMEOUT_S)
    files = {f"{STATE_DIR}/check.py": _script()}
    files.update(_tree(task, real, "tests", where, files))
    if oracle:
        files.update(_tree(task, real, "solution", where, files))
    return {
        "id": task.name,
        "input": _text(task / "instruction.md", f"{where}/instruction.md"),
        "environment": {
            "root": _root(task, real, config, where),
            "files": files,
            # test.sh's own timeout, and room for the check script around it
            "check": {"command": ["python3", f"{STATE_DIR}/check.py", "verify", f"{test_timeout:g}"],
                      "format": "json", "timeout": f"{int(test_timeout) + _CHECK_ROOM_S}s"},
            "sandbox": {"minIsolation": "namespaced", "network": "deny"},
        },
        "harbor": _metadata(task.name, config),
    }


def task_config(path: Path, where: str) -> dict[str, Any]:
    """task.toml read and its known keys' types checked; unknown keys kept, as Harbor tolerates them."""
    try:
        config = tomllib.loads(_text(path, where))
    except tomllib.TOMLDecodeError as exc:
        raise BadInputError(f"{where}: not TOML: {exc}") from None
    version = config.get("version")
    if version is not None and not isinstance(version, str):
        raise BadInputError(f"{where}: version: expected a string (as \"1.0\"), got {_type(version)}")
    for section, keys in _KEYS.items():
        table = config.get(section, {})
        if not isinstance(table, Mapping):
            raise BadInputError(f"{where}: {section}: expected a table ([{section}]), got {_type(table)}")
        for key, expected in keys.items():
            if key in table and not _is(table[key], expected):
                raise BadInputError(f"{where}: {section}.{key}: expected {expected}, got {_type(table[key])}")
    verifier_env = config.get("verifier", {}).get("env")
    if verifier_env:
        raise BadInputError(f"{where}: verifier.env: the verifier's own variables are not built (the sandbox's "
                            "commands share one environment, so the agent would see them)")
    return config


def _is(value: Any, expected: str) -> bool:
    if isinstance(value, bool):
        return expected == "a boolean"
    if expected == _NUMBER:
        return isinstance(value, int | float) and value >= 0
    if expected == "an integer":
        return isinstance(value, int) and value >= 0
    return isinstance(value, str) if expected == "a string" else False


def _type(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"[:120]


def _root(task: Path, real: Path, config: Mapping[str, Any], where: str) -> dict[str, str]:
    """Harbor builds environment/Dockerfile (or pulls docker_image); a compose file's several containers are not
    built here."""
    environment = task / "environment"
    for compose in ("docker-compose.yaml", "docker-compose.yml"):
        if (environment / compose).exists():
            raise BadInputError(f"{where}/environment/{compose}: several containers (docker compose) are not built; "
                                "a task's environment is environment/Dockerfile or [environment] docker_image")
    dockerfile = environment / "Dockerfile"
    if dockerfile.is_file():
        if not dockerfile.resolve().is_relative_to(real):
            raise BadInputError(f"{where}/environment/Dockerfile: leads outside the task directory")
        return {"dockerfile": str(dockerfile.resolve()), "context": str(environment.resolve())}
    image = config.get("environment", {}).get("docker_image")
    if image:
        return {"oci": image}
    raise BadInputError(f"{where}/environment/Dockerfile: missing, and task.toml sets no [environment] docker_image")


def _metadata(name: str, config: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"task": name}
    if "version" in config:
        out["version"] = config["version"]
    # Harbor's [metadata] is free-form (Terminal-Bench 2.0 adds expert_time_estimate_min...): what JSON can hold
    for key, value in config.get("metadata", {}).items():
        if _plain(value) or (isinstance(value, list) and all(_plain(item) for item in value)):
            out[key] = value
    for section in ("verifier", "agent"):
        if "timeout_sec" in config.get(section, {}):
            out[f"{section}_timeout_sec"] = config[section]["timeout_sec"]
    environment = {key: value for key, value in config.get("environment", {}).items() if key in _KEYS["environment"]}
    if environment:
        out["environment"] = environment
    return out


def _plain(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


@cache
def _script() -> str:
    return (Path(__file__).parent / "harbor_main.py").read_text(encoding="utf-8")


def _text(path: Path, where: str) -> str:
    if path.stat().st_size > _MAX_TEXT_BYTES:
        raise BadInputError(f"{where}: over 1 MiB")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise BadInputError(f"{where}: not UTF-8 text") from None


def _tree(task: Path, real: Path, part: str, where: str, files: Mapping[str, str]) -> dict[str, str]:
    """The text files under ``task/part`` as workspace files under ``.harbor/part``, within the environment's
    bounds together with ``files``."""
    out: dict[str, str] = {}
    total = sum(len(text.encode()) for text in files.values())
    folder = task / part
    for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if not path.is_file():
            continue
        relative = path.relative_to(folder).as_posix()
        if not path.resolve().is_relative_to(real):
            raise BadInputError(f"{where}/{part}/{relative}: leads outside the task directory")
        total += path.stat().st_size
        if len(files) + len(out) >= MAX_FILES or total > MAX_FILES_BYTES:
            raise BadInputError(f"{where}/{part}: over {MAX_FILES} files or {MAX_FILES_BYTES >> 20} MiB with the "
                                "task's other files")
        try:
            out[f"{STATE_DIR}/{part}/{relative}"] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise BadInputError(f"{where}/{part}/{relative}: not UTF-8 text; environments hold text files") from None
    return out
