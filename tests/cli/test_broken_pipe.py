"""`evalsi … | head`: a reader that goes away ends the command quietly, as it does any Unix tool."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_closed_stdout_exits_141_without_a_traceback() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written
    try:
        done = subprocess.run(
            [str(Path(sys.executable).parent / "evalsi"), "eval", "--data", str(ROOT / "examples/quickstart/qa.jsonl"),
             "-e", "exact-match", "--format", "json"],
            stdout=write_end, stderr=subprocess.PIPE, timeout=120, check=False)
    finally:
        os.close(write_end)
    assert done.returncode == 141, done.stderr.decode()
    assert b"internal error" not in done.stderr and b"Traceback" not in done.stderr
