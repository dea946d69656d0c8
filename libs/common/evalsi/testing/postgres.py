"""A real PostgreSQL 15 as a local process (``PostgresServer``), for tests and for people."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import time
from pathlib import Path

from ._processes import LOOPBACK, LocalServer, free_port, log_tail, pid_alive


def _postgres_bin_dir() -> Path:
    env = os.environ.get("EVALSI_PG_BIN")
    if env:
        return Path(env)
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0,
    )
    if found:
        return Path(found[-1]).parent
    which = shutil.which("initdb")
    if which:
        return Path(os.path.realpath(which)).parent
    raise RuntimeError(
        "PostgreSQL binaries not found: install PostgreSQL 15 (apt-get install postgresql-15) "
        "or set EVALSI_PG_BIN to the directory holding initdb and pg_ctl"
    )


class PostgresServer(LocalServer):
    """A throwaway PostgreSQL cluster on a free loopback port, with database ``database`` created.

    As root the server runs as the ``postgres`` user (it refuses root), so its directory is made directly
    under /tmp (pytest's temp root is not traversable by other users), owned by ``postgres``, mode 0700.
    Durability is off (fsync, synchronous_commit, full_page_writes): this is for tests.
    """

    host = LOOPBACK
    label = "PostgreSQL"
    directory_prefix = "evalsi-pg-"

    def __init__(self, *, database: str = "evalsi", start_timeout: float = 30.0, max_connections: int = 200) -> None:
        super().__init__()
        self.database = database
        self.start_timeout = start_timeout
        self.max_connections = max_connections
        self.port = 0
        self._bin: Path | None = None
        self._options = ""
        self._as_postgres = os.geteuid() == 0

    @property
    def dsn(self) -> str:
        return self.dsn_for(self.database)

    def dsn_for(self, database: str) -> str:
        return f"postgresql://postgres@{self.host}:{self.port}/{database}"

    def _cmd(self, name: str, *args: str) -> list[str]:
        assert self._bin is not None
        cmd = [str(self._bin / name), *args]
        return ["runuser", "-u", "postgres", "--", *cmd] if self._as_postgres else cmd

    def _run(self, log: Path, name: str, *args: str, timeout: float) -> int:
        with open(log, "ab") as out:
            return subprocess.run(
                self._cmd(name, *args), stdout=out, stderr=subprocess.STDOUT, cwd=self.directory,
                timeout=timeout, check=False,
            ).returncode

    def _locate(self) -> None:
        self._bin = _postgres_bin_dir()

    def _logs(self, base: Path) -> tuple[Path, ...]:
        return base / "initdb.log", base / "postgres.log", base / "client.log"

    def _start_in(self, base: Path) -> None:
        if self._as_postgres:
            try:
                user = pwd.getpwnam("postgres")
            except KeyError as exc:
                raise RuntimeError("as root, PostgreSQL runs as the 'postgres' user, which does not exist") from exc
            os.chown(base, user.pw_uid, user.pw_gid)
        os.chmod(base, 0o700)
        data = base / "data"
        code = self._run(
            base / "initdb.log", "initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
            "--locale=C.UTF-8", "--no-sync", timeout=120,
        )
        if code != 0:
            raise RuntimeError(f"initdb failed (exit {code})")
        for _attempt in range(3):
            self.port = free_port()
            options = (
                f"-c listen_addresses={self.host} -p {self.port} -k {base} -c fsync=off -c synchronous_commit=off "
                f"-c full_page_writes=off -c max_connections={self.max_connections}"
            )
            code = self._pg_ctl_start(base, options)
            if code == 0:
                self._options = options
                break
            if "already in use" not in log_tail(base / "postgres.log", lines=10):
                raise RuntimeError(f"pg_ctl start failed (exit {code}) on port {self.port}")
        else:
            raise RuntimeError("pg_ctl start failed: no free port after 3 attempts")
        self._wait_ready(base)
        code = self._run(
            base / "client.log", "createdb", "-h", self.host, "-p", str(self.port), "-U", "postgres", self.database,
            timeout=30,
        )
        if code != 0:
            raise RuntimeError(f"createdb {self.database} failed (exit {code})")

    def _pg_ctl_start(self, base: Path, options: str) -> int:
        return self._run(
            base / "client.log", "pg_ctl", "-D", str(base / "data"), "-l", str(base / "postgres.log"), "-w",
            "-t", str(int(self.start_timeout)), "start", "-o", options, timeout=self.start_timeout + 10,
        )

    def _wait_ready(self, base: Path) -> None:
        self.pid = int((base / "data" / "postmaster.pid").read_text().split()[0])
        deadline = time.monotonic() + self.start_timeout
        while self._run(base / "client.log", "pg_isready", "-h", self.host, "-p", str(self.port), timeout=10) != 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL on port {self.port} did not become ready")
            time.sleep(0.05)

    def halt(self) -> None:
        """Stop the server at once (an outage: open connections break), keeping its port and data for ``resume``."""
        if self.directory is None or self.pid is None:
            raise RuntimeError("PostgresServer is not running")
        code = self._run(
            self.directory / "client.log", "pg_ctl", "-D", str(self.directory / "data"), "-m", "immediate", "-w",
            "-t", "20", "stop", timeout=30,
        )
        if code != 0:
            raise RuntimeError(f"pg_ctl stop failed (exit {code}):\n{log_tail(self.directory / 'postgres.log')}")
        self.pid = None

    def resume(self) -> None:
        """Start a halted server again on the same port with the same data."""
        if self.directory is None or self.pid is not None:
            raise RuntimeError("PostgresServer is not halted")
        code = self._pg_ctl_start(self.directory, self._options)
        if code != 0:
            raise RuntimeError(f"pg_ctl start failed (exit {code}):\n{log_tail(self.directory / 'postgres.log')}")
        self._wait_ready(self.directory)

    def _stop_processes(self, base: Path | None) -> None:
        if base is None:
            return
        pid, self.pid = self.pid, None
        data = base / "data"
        if (data / "postmaster.pid").exists():
            with contextlib.suppress(Exception):
                subprocess.run(
                    self._cmd("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "-t", "10", "stop"),
                    cwd=base, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=20, check=False,
                )
        if pid is not None and pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
