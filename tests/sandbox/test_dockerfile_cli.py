"""`evalsi sandbox image build` as a user runs it: a real process, the real bwrap rung, the cache of its evalsi.yaml;
the printed path is a root `evalsi sandbox run --root` takes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def _evalsi(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).parent / "evalsi"), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def test_build_prints_the_digest_then_finds_it_cached_and_the_image_runs(tmp_path: Path) -> None:
    (tmp_path / "evalsi.yaml").write_text(f"sandbox:\n  cache_dir: {tmp_path / 'cache'}\n")
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "Dockerfile").write_text("FROM evalsi/runtime\nWORKDIR /srv\nCOPY note.txt .\n"
                                                 "RUN wc -c < note.txt > size\nENV ANSWER=42\n")
    (tmp_path / "ctx" / "note.txt").write_text("hello\n")
    first = _evalsi("sandbox", "image", "build", "--file", "ctx/Dockerfile", "--format", "json", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    built = json.loads(first.stdout)
    assert (built["steps_run"], built["steps_cached"], built["workdir"]) == (4, 0, "/srv")
    assert built["env"] == {"ANSWER": "42"} and built["digest"].startswith("sha256:")
    again = _evalsi("sandbox", "image", "build", "-f", "ctx/Dockerfile", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert f"digest:   {built['digest']}" in again.stdout and "steps:    0 run, 4 cached" in again.stdout
    ran = _evalsi("sandbox", "run", "--ladder", "bwrap", "--root", built["path"], "--", "cat", "/srv/size",
                  cwd=tmp_path)
    assert (ran.returncode, ran.stdout) == (0, "6\n"), ran.stderr


def test_a_failing_run_exits_2_naming_the_line(tmp_path: Path) -> None:
    (tmp_path / "evalsi.yaml").write_text(f"sandbox:\n  cache_dir: {tmp_path / 'cache'}\n")
    (tmp_path / "Dockerfile").write_text("FROM evalsi/runtime\n\nRUN echo no compiler here >&2 && false\n")
    done = _evalsi("sandbox", "image", "build", "-f", "Dockerfile", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == "error: Dockerfile:3: RUN '/bin/sh -c echo no compiler here >&2 && false' exited 1: " \
                          "no compiler here\n"
    helped = _evalsi("sandbox", "image", "build", "--help", cwd=tmp_path)
    assert "Build the image of a Dockerfile" in helped.stdout and "--allow HOST:PORT" in helped.stdout
