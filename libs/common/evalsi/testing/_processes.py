"""Shared parts of the local backing services: free loopback ports, log tails, liveness by PID, finding a
binary, starting a server process and waiting until it answers, stopping it, and ``LocalServer``, the life of a
server in a throwaway directory."""

from __future__ import annotations

import atexit
import os
import random
import shutil
import subprocess
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Self

from evalsi import ports

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A free port for a server started later, outside the kernel's ephemeral range (``evalsi.ports``)."""
    return ports.free_port()


def distinct_free_ports(count: int) -> list[int]:
    """``count`` different free ports for servers started later (``evalsi.ports``)."""
    return ports.free_ports(count)


def free_ports_with_grpc(count: int, *, low: int = 10_000, high: int = 22_000) -> list[int]:
    """``count`` distinct free ports p (at most 55535) whose p+10000 is free too, as SeaweedFS needs."""
    chosen: list[int] = []
    taken: set[int] = set()
    for _ in range(2000):
        p = random.randint(low, min(high, 55_535))
        if {p, p + 10_000} & taken:
            continue
        if ports.port_free(p) and ports.port_free(p + 10_000):
            chosen.append(p)
            taken |= {p, p + 10_000}
            if len(chosen) == count:
                return chosen
    raise RuntimeError(f"could not find {count} free loopback ports with their +10000 ports free")


def log_tail(*paths: Path, lines: int = 40) -> str:
    out = []
    for path in paths:
        try:
            text = path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            continue
        out.append(f"--- {path} (last {len(text)} lines) ---\n" + "\n".join(text))
    return "\n".join(out) or "(no log)"


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie (exited, not yet reaped by an init that may never reap it) does not."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    # The state follows the parenthesized command name, which may itself contain spaces or parentheses.
    return stat_line.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


def find_binary(env: str, candidates: Iterable[str], missing: str) -> Path:
    """The program ``$env`` names, else the first of ``candidates`` (absolute paths, or names on PATH) present."""
    named = os.environ.get(env)
    if named:
        return Path(named)
    for candidate in candidates:
        found = candidate if os.path.isabs(candidate) and os.path.exists(candidate) else shutil.which(candidate)
        if found:
            return Path(found)
    raise RuntimeError(f"{missing} (or set {env})")


def spawn(cmd: Sequence[str], *, log: Path, cwd: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """``cmd`` in its own session (a Ctrl-C meant for the tests does not reach it), output appended to ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen(
            list(cmd), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd, env=env,
            start_new_session=True,
        )


def wait_ready(
    proc: subprocess.Popen[bytes],
    probe: Callable[[], object],
    *,
    name: str,
    timeout: float,
    where: str,
    every: float = 0.05,
) -> None:
    """Call ``probe`` until it answers ``None`` (ready); anything else it answers, or raises as ``OSError``, is
    why it is not ready yet, named in the error once ``timeout`` passes. If ``name``'s process exits, that is
    the error at once."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with code {proc.returncode}")
        try:
            last = probe()
        except OSError as exc:
            last = exc
        if last is None:
            return
        time.sleep(every)
    raise RuntimeError(f"not ready after {timeout:.0f}s on {where}: {last}")


def terminate(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM (a server cleans up its sockets), SIGKILL if it has not exited within 15 s."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


class LocalServer(ABC):
    """A server in a throwaway directory under /tmp, stopped (and its directory removed) by ``stop``, by leaving
    its ``with`` block, or at interpreter exit, whichever comes first.

    Subclasses find their binaries in ``_locate`` (before anything is made, so a missing install is the error),
    start in ``_start_in(directory)``, name their logs for a failed start, and stop their processes.
    """

    label: ClassVar[str]  # the server's name in errors
    directory_prefix: ClassVar[str]

    def __init__(self) -> None:
        self.pid: int | None = None
        self.directory: Path | None = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if self.directory is not None:
            raise RuntimeError(f"{type(self).__name__} is already started")
        self._locate()
        base = Path(tempfile.mkdtemp(prefix=self.directory_prefix, dir="/tmp"))
        self.directory = base
        atexit.register(self.stop)
        try:
            self._start_in(base)
        except Exception as exc:
            logs = log_tail(*self._logs(base))
            self.stop()
            raise RuntimeError(f"{self.label} could not start: {exc}\n{logs}") from exc
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        base, self.directory = self.directory, None
        atexit.unregister(self.stop)
        self._stop_processes(base)
        self.pid = None
        if base is not None:
            shutil.rmtree(base, ignore_errors=True)

    @abstractmethod
    def _locate(self) -> None: ...

    @abstractmethod
    def _start_in(self, base: Path) -> None: ...

    @abstractmethod
    def _logs(self, base: Path) -> tuple[Path, ...]: ...

    @abstractmethod
    def _stop_processes(self, base: Path | None) -> None:
        """Stop what ``_start_in`` started; ``base`` is None when the server was stopped already."""
