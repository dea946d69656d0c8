"""The report files, made by ``evalsi report`` (docs/reports.md): the HTML report and the Markdown summary of a
result, compared with a baseline when there is one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from evalsi.errors import EvalsiError

# Rendering a run of a million results takes a while; a renderer that hangs must not hold the CI job forever.
RENDER_TIMEOUT_S = 900.0
_EVALSI = "from evalsi.cli.main import main; main()"


def render(source: Path, output: Path, fmt: str, *, baseline: Path | None = None, title: str = "") -> Path:
    """``evalsi report SOURCE [--compare BASELINE] --format FMT --output OUTPUT``, run by this interpreter; its
    failure is an EvalsiError with what it said."""
    argv = [sys.executable, "-c", _EVALSI, "report", str(source), "--format", fmt, "--output", str(output)]
    if baseline is not None:
        argv += ["--compare", str(baseline)]
    if title:
        argv += ["--title", title]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=RENDER_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise EvalsiError(f"evalsi report --format {fmt}: no report after {RENDER_TIMEOUT_S:.0f} s") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()[-2000:]
        raise EvalsiError(f"evalsi report --format {fmt} exited {done.returncode}: {said}")
    return output
