"""A real ClickHouse as a local process (``ClickHouseServer``), for tests and for people."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from ._processes import LOOPBACK, free_port, log_tail


def _clickhouse_binary() -> Path:
    env = os.environ.get("EVALSI_CLICKHOUSE")
    if env:
        return Path(env)
    for name in ("clickhouse-server", "clickhouse"):
        which = shutil.which(name) or (f"/usr/sbin/{name}" if Path(f"/usr/sbin/{name}").exists() else None)
        if which:
            return Path(which)
    raise RuntimeError(
        "ClickHouse not found: apt-get install -y clickhouse-server clickhouse-client "
        "(or set EVALSI_CLICKHOUSE to the clickhouse-server binary)"
    )


_CLICKHOUSE_CONFIG = """<?xml version="1.0"?>
<yandex>
    <logger>
        <level>warning</level>
        <log>{base}/server.log</log>
        <errorlog>{base}/error.log</errorlog>
        <console>0</console>
    </logger>
    <listen_host>{host}</listen_host>
    <http_port>{http_port}</http_port>
    <tcp_port>{tcp_port}</tcp_port>
    <interserver_http_port>{interserver_port}</interserver_http_port>
    <interserver_http_host>{host}</interserver_http_host>
    <max_connections>256</max_connections>
    <keep_alive_timeout>3</keep_alive_timeout>
    <max_concurrent_queries>100</max_concurrent_queries>
    <uncompressed_cache_size>1073741824</uncompressed_cache_size>
    <mark_cache_size>268435456</mark_cache_size>
    <path>{base}/data/</path>
    <tmp_path>{base}/tmp/</tmp_path>
    <user_files_path>{base}/user_files/</user_files_path>
    <format_schema_path>{base}/format_schemas/</format_schema_path>
    <users_config>{base}/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <mlock_executable>false</mlock_executable>
</yandex>
"""


class ClickHouseServer:
    """A throwaway ClickHouse server (Debian's 18.16 works) on free loopback HTTP, native-TCP and interserver ports.

    It runs from its own config file in a fresh directory under /tmp (``path``, ``tmp_path``, logs and a copy of
    the system ``users.xml``), never touching the packaged service or ports 8123/9000. Ready when
    ``GET /ping`` answers ``Ok.``; ``database`` is created then. ``url`` is the trace-store URL
    (``clickhouse://127.0.0.1:TCP_PORT/DATABASE``).
    """

    host = LOOPBACK

    def __init__(self, *, database: str = "evalsi", start_timeout: float = 60.0,
                 users_xml: str | Path = "/etc/clickhouse-server/users.xml") -> None:
        self.database = database
        self.start_timeout = start_timeout
        self.users_xml = Path(users_xml)
        self.http_port = 0
        self.tcp_port = 0
        self.pid: int | None = None
        self.directory: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return self.url_for(self.database)

    def url_for(self, database: str) -> str:
        return f"clickhouse://{self.host}:{self.tcp_port}/{database}"

    @property
    def http_endpoint(self) -> str:
        return f"http://{self.host}:{self.http_port}"

    def __enter__(self) -> ClickHouseServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if self.directory is not None:
            raise RuntimeError("ClickHouseServer is already started")
        binary = _clickhouse_binary()
        base = Path(tempfile.mkdtemp(prefix="evalsi-ch-", dir="/tmp"))
        self.directory = base
        atexit.register(self.stop)
        logs = (base / "server.log", base / "error.log", base / "stdout.log")
        try:
            if not self.users_xml.exists():
                raise RuntimeError(f"{self.users_xml} not found: install clickhouse-server or pass users_xml")
            for sub in ("data", "tmp", "user_files", "format_schemas"):
                (base / sub).mkdir()
            shutil.copyfile(self.users_xml, base / "users.xml")
            ports: set[int] = set()
            while len(ports) < 3:
                ports.add(free_port())
            self.http_port, self.tcp_port, interserver = sorted(ports)
            config = base / "config.xml"
            config.write_text(_CLICKHOUSE_CONFIG.format(
                base=base, host=self.host, http_port=self.http_port, tcp_port=self.tcp_port,
                interserver_port=interserver,
            ))
            cmd = [str(binary), f"--config-file={config}"]
            if binary.name == "clickhouse":
                cmd.insert(1, "server")
            with open(base / "stdout.log", "wb") as out:
                self._proc = subprocess.Popen(
                    cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=base,
                    start_new_session=True,
                )
            self.pid = self._proc.pid
            self._wait_ready()
            self._query(f"CREATE DATABASE IF NOT EXISTS {self.database}")
        except Exception as exc:
            tail = log_tail(*logs)
            self.stop()
            raise RuntimeError(f"ClickHouse could not start: {exc}\n{tail}") from exc
        except BaseException:
            self.stop()
            raise

    def _query(self, sql: str, timeout: float = 10.0) -> str:
        import urllib.request

        request = urllib.request.Request(self.http_endpoint + "/", data=sql.encode(), method="POST")
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return str(response.read().decode())

    def _wait_ready(self) -> None:
        import urllib.error
        import urllib.request

        deadline = time.monotonic() + self.start_timeout
        last: object = None
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise RuntimeError(f"clickhouse-server exited with code {self._proc.returncode}")
            try:
                with urllib.request.urlopen(self.http_endpoint + "/ping", timeout=2) as response:
                    body = response.read().decode().strip()
                if body == "Ok.":
                    return
                last = f"/ping answered {body!r}"
            except (urllib.error.URLError, OSError) as exc:
                last = exc
            time.sleep(0.05)
        raise RuntimeError(f"not ready after {self.start_timeout:.0f}s on {self.http_endpoint}: {last}")

    def stop(self) -> None:
        base, self.directory = self.directory, None
        atexit.unregister(self.stop)
        proc, self._proc = self._proc, None
        self.pid = None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if base is not None:
            shutil.rmtree(base, ignore_errors=True)
