"""Terminal-Bench tasks as harness tasks: ``terminal-bench://<task dir or tasks dir>``.

A task directory holds Terminal-Bench's files: ``task.yaml`` (``instruction``, ``max_agent_timeout_sec``,
``max_test_timeout_sec``, ``difficulty``, ``category``, ``tags``), ``Dockerfile`` (the task's container),
``run-tests.sh`` and ``tests/`` (run after the agent, with ``$TEST_DIR`` the tests). ``terminal-bench://`` names one
task directory, or a directory of them (each subdirectory with a ``task.yaml``).

Each task becomes a row: ``input`` the instruction, metadata ``environment`` a harness environment whose root is
built from the task's Dockerfile (``root: {dockerfile, context}``: the subset of docs/environments.md, embedded
only) and whose checker runs ``run-tests.sh`` on the tests (copied into ``.tbench/``) and grades by the pytest
summary as Terminal-Bench's parser does (``terminal_bench_main.py``); metadata ``terminal_bench`` the task's
name, difficulty, category and tags.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from evalsi.datasets import harbor
from evalsi.datasets.task_dirs import task_directories
from evalsi.errors import BadInputError
from evalsi.harness.environment import MAX_FILES, MAX_FILES_BYTES
from evalsi.yaml_files import read_yaml_file

SCHEME = "terminal-bench://"
FORMAT = "terminal-bench"
STATE_DIR = ".tbench"
DEFAULT_TEST_TIMEOUT_S = 180.0
_REQUIRED = ("task.yaml", "Dockerfile", "run-tests.sh")


def tasks_dir(target: str, name: str) -> Path:
    """What ``terminal-bench://`` names: a task directory (or its task.yaml), a directory of them, or a task list."""
    path = Path(target).expanduser()
    if not path.exists():
        raise BadInputError(f"{name}: no such file or directory; terminal-bench:// names a task directory "
                            f"({', '.join(_REQUIRED)}, tests/) or its task.yaml, a directory of them, or a list file "
                            "of them")
    return path


@cache
def _script() -> str:
    return (Path(__file__).parent / "terminal_bench_main.py").read_text(encoding="utf-8")


def read_terminal_bench(path: Path, name: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(index, row)`` for the task at ``path`` (its directory or its task.yaml), for each task directory in it
    (sorted by name), or for each task a list file names (one directory a line, relative to the file's directory:
    what a run spec's ``dataset.path``, which names a file, gives for several tasks). Terminal-Bench 2.0's tasks
    (a ``task.toml``, no ``task.yaml``) are read as Harbor's (``evalsi.datasets.harbor``)."""
    if harbor.is_harbor(path):
        yield from harbor.read_harbor(path, name)
        return
    for index, (task, where) in enumerate(task_directories(path, name, "task.yaml")):
        yield index, task_row(task, where)


def task_row(task: Path, where: str) -> dict[str, Any]:
    real = task.resolve()
    for file in _REQUIRED:
        if not (task / file).is_file() or not (task / file).resolve().is_relative_to(real):
            raise BadInputError(f"{where}/{file}: missing (a Terminal-Bench task has {', '.join(_REQUIRED)})")
    config = read_yaml_file(task / "task.yaml")
    if not isinstance(config, Mapping) or not isinstance(config.get("instruction"), str):
        raise BadInputError(f"{where}/task.yaml: instruction: expected the task's instruction text")
    test_timeout = config.get("max_test_timeout_sec", DEFAULT_TEST_TIMEOUT_S)
    if isinstance(test_timeout, bool) or not isinstance(test_timeout, int | float) or not 0 < test_timeout <= 3000:
        raise BadInputError(f"{where}/task.yaml: max_test_timeout_sec: expected seconds in (0, 3000]")
    files = {f"{STATE_DIR}/check.py": _script(),
             f"{STATE_DIR}/run-tests.sh": (task / "run-tests.sh").read_text(encoding="utf-8")}
    files.update(_tests(task, real, where))
    return {
        "id": task.name,
        "input": config["instruction"],
        "environment": {
            "root": {"dockerfile": str(real / "Dockerfile"), "context": str(real)},
            "files": files,
            # run-tests.sh's own timeout, and room for the check script around it
            "check": {"command": ["python3", f"{STATE_DIR}/check.py", f"{float(test_timeout):g}"], "format": "json",
                      "timeout": f"{int(test_timeout) + 30}s"},
            "sandbox": {"minIsolation": "namespaced", "network": "deny"},
        },
        "terminal_bench": {"task": task.name, **{key: config[key] for key in (
            "difficulty", "category", "tags", "max_agent_timeout_sec", "max_test_timeout_sec") if key in config}},
    }


def _tests(task: Path, real: Path, where: str) -> dict[str, str]:
    files: dict[str, str] = {}
    total = 0
    folder = task / "tests"
    for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if not path.is_file():
            continue
        relative = path.relative_to(folder).as_posix()
        if not path.resolve().is_relative_to(real):
            raise BadInputError(f"{where}/tests/{relative}: leads outside the task directory")
        total += path.stat().st_size
        if len(files) >= MAX_FILES - 2 or total > MAX_FILES_BYTES // 2:
            raise BadInputError(f"{where}/tests: over {MAX_FILES - 2} files or {MAX_FILES_BYTES >> 21} MiB")
        try:
            files[f"{STATE_DIR}/tests/{relative}"] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise BadInputError(f"{where}/tests/{relative}: not UTF-8 text; environments hold text files") from None
    return files
