"""SWE-bench instances as harness tasks: ``swebench://<instances file>``.

The file (JSON lines, or a JSON list) holds SWE-bench's instances: ``instance_id``, ``repo`` (``owner/name``),
``base_commit``, ``problem_statement``, ``test_patch``, ``FAIL_TO_PASS`` and ``PASS_TO_PASS`` (lists, or their
JSON text as SWE-bench ships them), and optionally a prediction's ``model_patch``. Each repository is a local git
repository at ``repos/<owner>__<name>`` beside the file (no network): the files of ``base_commit`` are read from it
with ``git ls-tree`` and ``git cat-file`` (raw blobs: no checkout, no filters, hooks or attributes run).

Each instance becomes a row: ``input`` the problem statement, metadata ``environment`` a harness environment
(``evalsi.harness.environment``) whose workspace is the repository at ``base_commit`` plus ``.swebench/``: the
patch-and-grade script (``swebench_main.py``) with SWE-bench's harness data (``swebench_specs.py``), the test
patch, the tests, ``spec.json`` (the repository's test command, log parser and test directives) for a repository
SWE-bench knows, and ``model.patch`` when the instance carries a prediction. Its checker applies the test patch, runs
the tests and grades by FAIL_TO_PASS/PASS_TO_PASS as SWE-bench does; ``builtin/task-success`` reads the verdict.
Metadata ``swebench`` keeps the instance's identity and, for a known repository, the spec its environment needs
(Python version, install command: for an image built with network; nothing here installs it).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from evalsi.datasets import swebench_specs
from evalsi.datasets.formats import check_file, read_rows
from evalsi.errors import BadInputError
from evalsi.harness.environment import MAX_FILES, MAX_FILES_BYTES

SCHEME = "swebench://"
FORMAT = "swebench"
REPOS_DIR = "repos"
STATE_DIR = ".swebench"
CHECK_TIMEOUT = "300s"
APPLY_COMMAND = ["python3", f"{STATE_DIR}/swebench.py", "apply", f"{STATE_DIR}/model.patch"]
_GIT_TIMEOUT_S = 60
# No configuration but the repository's own; nothing that runs a program on its behalf is consulted by ls-tree and
# cat-file, and these keep the user's and system's out too.
_GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.devnull, "LC_ALL": "C"}


def instances_file(target: str, name: str) -> Path:
    path = Path(target).expanduser()
    check_file(path, name)
    return path


@cache
def _script(name: str) -> str:
    return (Path(__file__).parent / name).read_text(encoding="utf-8")


def read_swebench(path: Path, name: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(position, row)`` for each instance of the file."""
    fmt = "json" if path.suffix == ".json" else "jsonl"
    repos = path.parent / REPOS_DIR
    for position, instance in read_rows(path, fmt, name=name):
        where = f"{name}:{position}" if fmt == "jsonl" else f"{name}: record {position}"
        yield position, instance_row(instance, repos, where)


def _tests(instance: Mapping[str, Any], key: str, where: str) -> list[str]:
    value = instance.get(key, [])
    if isinstance(value, str):  # SWE-bench ships these as JSON text
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            value = None
    if not isinstance(value, list) or not all(isinstance(test, str) for test in value):
        raise BadInputError(f"{where}: {key}: expected a list of test ids (or its JSON text)")
    return value


def instance_row(instance: Any, repos: Path, where: str) -> dict[str, Any]:
    if not isinstance(instance, Mapping):
        raise BadInputError(f"{where}: expected a SWE-bench instance object")
    for key in ("instance_id", "repo", "base_commit", "problem_statement"):
        if not isinstance(instance.get(key), str) or not instance[key]:
            raise BadInputError(f"{where}: {key}: expected a non-empty string")
    repo = str(instance["repo"])
    if repo.count("/") != 1 or any(part in ("", ".", "..") for part in repo.split("/")):
        raise BadInputError(f"{where}: repo: expected owner/name, got {repo!r}")
    tests = {"FAIL_TO_PASS": _tests(instance, "FAIL_TO_PASS", where),
             "PASS_TO_PASS": _tests(instance, "PASS_TO_PASS", where)}
    checkout = repos / repo.replace("/", "__")
    if not checkout.resolve().is_relative_to(repos.parent.resolve()):
        raise BadInputError(f"{where}: repo {repo}: {REPOS_DIR}/{checkout.name} leads outside the instances file's "
                            "directory")
    files = repository_files(checkout, str(instance["base_commit"]), f"{where}: repo {repo}")
    test_patch = str(instance.get("test_patch") or "")
    version = instance.get("version", "")
    if not isinstance(version, str | int | float) or isinstance(version, bool):
        raise BadInputError(f"{where}: version: expected a string such as \"3.0\", got {type(version).__name__}")
    spec = swebench_specs.spec_for(repo, str(version))
    files[f"{STATE_DIR}/swebench.py"] = _script("swebench_main.py")
    files[f"{STATE_DIR}/swebench_specs.py"] = _script("swebench_specs.py")
    files[f"{STATE_DIR}/test.patch"] = test_patch
    files[f"{STATE_DIR}/tests.json"] = json.dumps(tests)
    if spec is not None:
        files[f"{STATE_DIR}/spec.json"] = json.dumps({
            "test_command": spec.test_command, "log_parser": spec.log_parser,
            "directives": swebench_specs.patch_directives(repo, test_patch)})
    if instance.get("model_patch"):
        files[f"{STATE_DIR}/model.patch"] = str(instance["model_patch"])
    _check_bounds(files, where)
    return {
        "id": str(instance["instance_id"]),
        "input": str(instance["problem_statement"]),
        "environment": {
            "files": files,
            "check": {"command": ["python3", f"{STATE_DIR}/swebench.py", "check"], "format": "json",
                      "timeout": CHECK_TIMEOUT},
            "env": {"PYTHONDONTWRITEBYTECODE": "1"},
            "sandbox": {"minIsolation": "namespaced", "network": "deny"},
        },
        "swebench": {"instance_id": instance["instance_id"], "repo": repo, "base_commit": instance["base_commit"],
                     "version": str(version), **tests, **({"spec": _spec_metadata(spec)} if spec else {})},
    }


def _spec_metadata(spec: swebench_specs.Spec) -> dict[str, Any]:
    """What an environment for the instance needs, for whoever builds its image with network."""
    return {"python": spec.python, "install": spec.install, "pre_install": list(spec.pre_install),
            "test_command": spec.test_command, "log_parser": spec.log_parser}


def _check_bounds(files: Mapping[str, str], where: str) -> None:
    size = sum(len(text.encode()) for text in files.values())
    if len(files) > MAX_FILES or size > MAX_FILES_BYTES:
        raise BadInputError(f"{where}: {len(files)} files of {size} bytes with {STATE_DIR}/; an environment holds "
                            f"at most {MAX_FILES} files and {MAX_FILES_BYTES >> 20} MiB (fixture-sized repositories "
                            "only: a larger one needs an image root)")


def _git(checkout: Path, args: list[str], where: str, stdin: bytes = b"") -> bytes:
    try:
        done = subprocess.run(["git", "-C", str(checkout), *args], input=stdin, capture_output=True,
                              env=_GIT_ENV, timeout=_GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BadInputError(f"{where}: git {args[0]}: {exc}") from None
    if done.returncode != 0:
        raise BadInputError(f"{where}: git {args[0]} failed: {done.stderr.decode(errors='replace').strip()[-300:]}")
    return done.stdout


def repository_files(checkout: Path, commit: str, where: str) -> dict[str, str]:
    """The text files of ``commit`` in the git repository ``checkout``, read as raw blobs."""
    if not (checkout / ".git").exists() and not (checkout / "HEAD").exists():
        raise BadInputError(f"{where}: no git repository at {checkout}")
    if not all(c in "0123456789abcdefABCDEF" for c in commit) or not 4 <= len(commit) <= 64:
        raise BadInputError(f"{where}: base_commit: expected a commit hash, got {commit[:80]!r}")
    listing = _git(checkout, ["ls-tree", "-r", "-z", "-l", "--full-tree", commit], where)
    blobs: list[tuple[str, str]] = []
    total = 0
    for entry in listing.split(b"\0"):
        if not entry:
            continue
        meta, _, raw_path = entry.partition(b"\t")
        mode, kind, sha, blob_size = meta.decode().split()
        if kind != "blob" or mode == "120000":  # submodules and symbolic links are not files of the workspace
            continue
        blobs.append((raw_path.decode("utf-8", "replace"), sha))
        total += int(blob_size)
    if len(blobs) > MAX_FILES or total > MAX_FILES_BYTES:
        raise BadInputError(f"{where}: {len(blobs)} files of {total} bytes at {commit[:12]}; an environment holds "
                            f"at most {MAX_FILES} files and {MAX_FILES_BYTES >> 20} MiB (a larger one needs an image "
                            "root)")
    batch = _git(checkout, ["cat-file", "--batch"], where, "".join(f"{sha}\n" for _p, sha in blobs).encode())
    files: dict[str, str] = {}
    offset = 0
    for path, _sha in blobs:
        header_end = batch.index(b"\n", offset)
        size = int(batch[offset:header_end].split()[2])
        body = batch[header_end + 1:header_end + 1 + size]
        offset = header_end + 1 + size + 1
        try:
            files[path] = body.decode("utf-8")
        except UnicodeDecodeError:
            raise BadInputError(f"{where}: {path} is not UTF-8 text; environments hold text files") from None
    return files
