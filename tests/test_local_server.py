"""evalsi.testing._processes: the start, readiness and stop that the Postgres, SeaweedFS and ClickHouse runners
share, exercised on a real process (Python's own HTTP server) rather than on those servers."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from evalsi.testing._processes import (
    LocalServer,
    find_binary,
    free_port,
    pid_alive,
    spawn,
    terminate,
    wait_ready,
)


class PythonHttpServer(LocalServer):
    """``python -m http.server`` as a LocalServer, or a command that fails in its place."""

    label = "python http.server"
    directory_prefix = "evalsi-test-http-"

    def __init__(self, command: list[str] | None = None) -> None:
        super().__init__()
        self.command = command
        self.port = 0
        self.located = False
        self._proc: subprocess.Popen[bytes] | None = None

    def _locate(self) -> None:
        self.located = True

    def _logs(self, base: Path) -> tuple[Path, ...]:
        return (base / "server.log",)

    def _start_in(self, base: Path) -> None:
        self.port = free_port()
        command = self.command or [sys.executable, "-m", "http.server", str(self.port), "--bind", "127.0.0.1"]
        self._proc = spawn(command, log=base / "server.log", cwd=base)
        self.pid = self._proc.pid
        wait_ready(self._proc, self._answers, name="python", timeout=30, where=f"port {self.port}")

    def _answers(self) -> object:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=2) as response:
            return None if response.status == 200 else response.status

    def _stop_processes(self, base: Path | None) -> None:
        proc, self._proc = self._proc, None
        terminate(proc)


def test_a_server_starts_answers_and_stops_without_a_trace() -> None:
    with PythonHttpServer() as server:
        assert server.located and server.directory is not None and server.directory.is_dir()
        directory, pid = server.directory, server.pid
        assert pid is not None and pid_alive(pid)
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/", timeout=5) as response:
            assert response.status == 200
        with pytest.raises(RuntimeError, match=r"^PythonHttpServer is already started$"):
            server.start()
    assert (server.directory, server.pid) == (None, None)
    assert not directory.exists() and not pid_alive(pid)
    server.stop()  # stopping twice is harmless


def test_a_server_that_exits_fails_its_start_with_its_log() -> None:
    server = PythonHttpServer([sys.executable, "-c", "import sys; print('bad config line 3'); sys.exit(3)"])
    with pytest.raises(RuntimeError) as failed:
        server.start()
    message = str(failed.value)
    assert message.startswith("python http.server could not start: python exited with code 3\n")
    assert "bad config line 3" in message  # the log's tail comes with the error
    assert server.directory is None and not list(Path("/tmp").glob("evalsi-test-http-*"))


def test_waiting_names_the_last_reason_when_time_runs_out() -> None:
    proc = spawn([sys.executable, "-c", "import time; time.sleep(30)"], log=Path("/dev/null"), cwd=Path("/tmp"))
    try:
        with pytest.raises(RuntimeError, match=r"^not ready after 0s on here: still warming up$"):
            wait_ready(proc, lambda: "still warming up", name="sleeper", timeout=0.2, where="here")
    finally:
        terminate(proc)
    assert proc.returncode == -15  # SIGTERM was enough


def test_a_binary_is_the_environment_s_choice_then_the_first_candidate_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVALSI_TEST_BINARY", raising=False)
    assert find_binary("EVALSI_TEST_BINARY", ("/nonexistent/x", sys.executable, "sh"), "gone") == Path(sys.executable)
    assert find_binary("EVALSI_TEST_BINARY", ("no-such-program-here", "sh"), "gone").name == "sh"
    monkeypatch.setenv("EVALSI_TEST_BINARY", "/opt/mine")
    assert find_binary("EVALSI_TEST_BINARY", ("sh",), "gone") == Path("/opt/mine")
    monkeypatch.delenv("EVALSI_TEST_BINARY")
    with pytest.raises(RuntimeError, match=r"^thing not found: install it \(or set EVALSI_TEST_BINARY\)$"):
        find_binary("EVALSI_TEST_BINARY", ("no-such-program-here",), "thing not found: install it")
