"""A real ``evalsi-sandboxd`` process for the tests: started on a Unix socket (or loopback) under a temporary
directory, its "listening" line read for the address, stopped by its pid (SIGTERM, then SIGKILL)."""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import yaml

SANDBOXD = Path(sys.executable).with_name("evalsi-sandboxd")


def require_bwrap() -> None:
    # scripts/test.sh installs bubblewrap when it is missing; without it these tests fail, never skip.
    assert shutil.which("bwrap"), "bubblewrap is not installed: run scripts/test.sh (apt-get install -y bubblewrap)"


@contextmanager
def running_sandboxd(tmp: Path, *, config: Mapping[str, object] | None = None, flags: tuple[str, ...] = (),
                     listen: str = "", env: Mapping[str, str] | None = None) -> Iterator[tuple[str, Path]]:
    """Yields (the address sandboxd listens on, its log file)."""
    require_bwrap()
    document = {"sandbox": {"ladder": ["bwrap"]}, **(config or {})}
    config_path = tmp / "evalsi.yaml"
    config_path.write_text(yaml.safe_dump(document))
    address = listen or f"unix:{tmp}/run/sandboxd.sock"
    log_path = tmp / "sandboxd.log"
    process_env = {**os.environ, **(env or {})}
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(SANDBOXD), "--listen", address, "--config", str(config_path), "--state-dir", str(tmp / "state"),
             "--log-format", "text", *flags],
            stdout=subprocess.PIPE, stderr=log, env=process_env, cwd=tmp)
    try:
        yield _listening(process, log_path), log_path
    finally:
        _stop(process)


def _listening(process: subprocess.Popen[bytes], log_path: Path) -> str:
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + 60
    buffered = b""
    while time.monotonic() < deadline:
        if not selector.select(timeout=0.5):
            if process.poll() is not None:
                break
            continue
        chunk = os.read(process.stdout.fileno(), 65536)
        if not chunk:
            break
        buffered += chunk
        for line in buffered.splitlines():
            if line.startswith(b"{"):
                event = json.loads(line)
                if event.get("event") == "listening":
                    return str(event["sandboxd"])
    raise AssertionError(f"evalsi-sandboxd did not start: {log_path.read_text(errors='replace')[-3000:]}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stdout is not None:
        process.stdout.close()
