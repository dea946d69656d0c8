"""A real ClickHouse as a local process (``ClickHouseServer``), for tests and for people."""

from __future__ import annotations

import shutil
import subprocess
import urllib.request
from pathlib import Path

from ._processes import LOOPBACK, LocalServer, find_binary, free_port, spawn, terminate, wait_ready

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


class ClickHouseServer(LocalServer):
    """A throwaway ClickHouse server (Debian's 18.16 works) on free loopback HTTP, native-TCP and interserver ports.

    It runs from its own config file in a fresh directory under /tmp (``path``, ``tmp_path``, logs and a copy of
    the system ``users.xml``), never touching the packaged service or ports 8123/9000. Ready when
    ``GET /ping`` answers ``Ok.``; ``database`` is created then. ``url`` is the trace-store URL
    (``clickhouse://127.0.0.1:TCP_PORT/DATABASE``).
    """

    host = LOOPBACK
    label = "ClickHouse"
    directory_prefix = "evalsi-ch-"

    def __init__(self, *, database: str = "evalsi", start_timeout: float = 60.0,
                 users_xml: str | Path = "/etc/clickhouse-server/users.xml") -> None:
        super().__init__()
        self.database = database
        self.start_timeout = start_timeout
        self.users_xml = Path(users_xml)
        self.http_port = 0
        self.tcp_port = 0
        self._binary: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return self.url_for(self.database)

    def url_for(self, database: str) -> str:
        return f"clickhouse://{self.host}:{self.tcp_port}/{database}"

    @property
    def http_endpoint(self) -> str:
        return f"http://{self.host}:{self.http_port}"

    def _locate(self) -> None:
        self._binary = find_binary(
            "EVALSI_CLICKHOUSE",
            ("clickhouse-server", "/usr/sbin/clickhouse-server", "clickhouse", "/usr/sbin/clickhouse"),
            "ClickHouse not found: apt-get install -y clickhouse-server clickhouse-client",
        )

    def _logs(self, base: Path) -> tuple[Path, ...]:
        return base / "server.log", base / "error.log", base / "stdout.log"

    def _start_in(self, base: Path) -> None:
        assert self._binary is not None
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
        cmd = [str(self._binary), f"--config-file={config}"]
        if self._binary.name == "clickhouse":
            cmd.insert(1, "server")
        self._proc = spawn(cmd, log=base / "stdout.log", cwd=base)
        self.pid = self._proc.pid
        wait_ready(self._proc, self._ping, name="clickhouse-server", timeout=self.start_timeout,
                   where=self.http_endpoint)
        self._query(f"CREATE DATABASE IF NOT EXISTS {self.database}")

    def _query(self, sql: str, timeout: float = 10.0) -> str:
        request = urllib.request.Request(self.http_endpoint + "/", data=sql.encode(), method="POST")
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return str(response.read().decode())

    def _ping(self) -> str | None:
        """None once ``/ping`` answers ``Ok.`` (a refused connection is an OSError: not ready yet)."""
        with urllib.request.urlopen(self.http_endpoint + "/ping", timeout=2) as response:
            body = response.read().decode().strip()
        return None if body == "Ok." else f"/ping answered {body!r}"

    def _stop_processes(self, base: Path | None) -> None:
        proc, self._proc = self._proc, None
        terminate(proc)
