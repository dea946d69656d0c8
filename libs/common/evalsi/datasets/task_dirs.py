"""Which task directories a benchmark's ``scheme://`` names, for the formats whose task is a directory marked by one
file (Terminal-Bench's ``task.yaml``, Harbor's ``task.toml``): the marker file itself, a task directory, a directory
of them (sorted by name), or a list file of them (one directory a line, relative to the file's directory: what a run
spec's ``dataset.path``, which names a file, gives for several tasks)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from evalsi.errors import BadInputError

MAX_TASKS = 1000
_MAX_LIST_BYTES = 1 << 20


def task_directories(path: Path, name: str, marker: str) -> Iterator[tuple[Path, str]]:
    """``(task directory, where)`` for each task ``path`` names, ``where`` naming it in errors as ``name`` does."""
    if path.is_file() and path.name == marker:
        yield path.parent, name.rpartition("/")[0] or path.parent.name
        return
    # each task named as the given directory's entry, or as the given list's sibling
    folder = (name.rpartition("/")[0] + "/" if "/" in name else "") if path.is_file() else f"{name}/"
    if path.is_file():
        tasks = _listed(path, name, marker)
    elif (path / marker).is_file():
        tasks = [path]
    else:
        tasks = sorted(child for child in path.iterdir() if (child / marker).is_file())[:MAX_TASKS + 1]
    if not tasks:
        raise BadInputError(f"{name}: no {marker} here nor in any subdirectory")
    if len(tasks) > MAX_TASKS:
        raise BadInputError(f"{name}: more than {MAX_TASKS} tasks")
    for task in tasks:
        yield task, name if task == path else f"{folder}{task.name}"


def _listed(path: Path, name: str, marker: str) -> list[Path]:
    if path.stat().st_size > _MAX_LIST_BYTES:
        raise BadInputError(f"{name}: a task list over 1 MiB")
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    tasks = [path.parent / line for line in lines if line and not line.startswith("#")]
    for task in tasks:
        if not task.resolve().is_relative_to(path.parent.resolve()) or not (task / marker).is_file():
            raise BadInputError(f"{name}: {task.name!r}: not a task directory (with a {marker}) beside the list")
    return tasks[:MAX_TASKS + 1]
