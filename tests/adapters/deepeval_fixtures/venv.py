"""The adapter's plugin for the DeepEval contract tests: a plugins directory linking the shipped plugin (as
docs/adapters.md tells a user to), its virtualenv built once per test session in one directory under pytest's
basetemp (every test module that asks finds it built: ensure_venv caches by the manifest's digest), and the
scripted judge of examples/deepeval."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from evalsi.adapters.deepeval import PLUGIN_DIR
from evalsi.plugins.manifest import MANIFEST_NAME, read_manifest
from evalsi.plugins.venv import ensure_venv, venv_python

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parents[2] / "examples" / "deepeval"


def scripted_reply() -> Any:
    """examples/deepeval/scripted_judge.py's ``reply``: DeepEval's prompts answered with the JSON they ask for."""
    spec = importlib.util.spec_from_file_location("scripted_judge", EXAMPLE / "scripted_judge.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.reply


def venv_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.getbasetemp() / "deepeval-plugin-venvs"


def adapter_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of DeepEval's venv (built now, the first time in this session)."""
    return venv_python(ensure_venv(read_manifest(PLUGIN_DIR / MANIFEST_NAME), venv_cache(tmp_path_factory)))


def plugins_dir(root: Path) -> Path:
    """A plugins directory holding the adapter's plugin by a link, as the docs' one-liner makes it."""
    (root / "deepeval").symlink_to(PLUGIN_DIR)
    return root


def run_in_venv(python: Path, script: str, spec: dict[str, Any], cwd: Path) -> str:
    """Run one of this directory's scripts with the venv's python, in a scrubbed environment (no proxy, no keys,
    a private HOME) as a plugin process gets; its JSON answer is written to a file (DeepEval prints to stdout)."""
    answer = cwd / f"{script}.json"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd), "LANG": "C.UTF-8"}
    done = subprocess.run([str(python), str(HERE / script), str(answer)], input=json.dumps(spec), text=True,
                          capture_output=True, cwd=cwd, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return answer.read_text()
