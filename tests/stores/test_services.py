"""The local service runners: real servers, stopped by PID and cleaned up; clear errors when they cannot start."""

from __future__ import annotations

import os
import pwd
import stat
import tempfile
from pathlib import Path

import asyncpg
import pytest

from evalsi.testing.services import PostgresServer, SeaweedS3, free_ports_with_grpc, pid_alive


async def test_postgres_runs_in_a_private_directory_and_is_removed_on_exit() -> None:
    with PostgresServer(database="scratch") as pg:
        assert pg.directory is not None and pg.pid is not None
        directory, pid = pg.directory, pg.pid
        assert directory.parent == Path("/tmp")
        mode = directory.stat()
        assert stat.S_IMODE(mode.st_mode) == 0o700
        if os.geteuid() == 0:
            assert mode.st_uid == pwd.getpwnam("postgres").pw_uid
        assert pg.dsn == f"postgresql://postgres@127.0.0.1:{pg.port}/scratch"
        conn = await asyncpg.connect(pg.dsn)
        try:
            assert await conn.fetchval("SELECT current_database()") == "scratch"
        finally:
            await conn.close()
    assert not directory.exists()
    assert not pid_alive(pid)


def test_postgres_that_cannot_start_raises_with_its_log(monkeypatch: pytest.MonkeyPatch) -> None:
    # Directly under /tmp: as root the fakes run as the postgres user, who cannot enter pytest's temp root.
    holder = tempfile.TemporaryDirectory(prefix="evalsi-fake-pg-", dir="/tmp")
    fake = Path(holder.name)
    fake.chmod(0o755)
    for name in ("initdb", "pg_ctl", "pg_isready", "createdb"):
        script = fake / name
        script.write_text("#!/bin/sh\necho 'initdb: simulated failure' >&2\nexit 1\n")
        script.chmod(0o755)
    monkeypatch.setenv("EVALSI_PG_BIN", str(fake))
    before = set(os.listdir("/tmp"))
    with holder, pytest.raises(RuntimeError, match=r"(?s)PostgreSQL could not start: initdb failed.*simulated"):
        PostgresServer().start()
    assert not {d for d in set(os.listdir("/tmp")) - before if d.startswith("evalsi-pg-")}


def test_seaweed_serves_s3_and_is_stopped_on_exit(s3_server: SeaweedS3) -> None:
    assert s3_server.port <= 55535 and s3_server.pid is not None
    assert s3_server.endpoint == f"http://127.0.0.1:{s3_server.port}"
    assert s3_server.url("p") == f"s3://{s3_server.bucket}/p?endpoint={s3_server.endpoint}&region=us-east-1"


def test_seaweed_that_cannot_start_raises_with_its_log(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "weed"
    fake.write_text("#!/bin/sh\necho 'weed: simulated crash'\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("EVALSI_WEED", str(fake))
    with pytest.raises(RuntimeError, match=r"(?s)SeaweedFS S3 could not start: weed exited with code 3.*simulated"):
        SeaweedS3().start()


def test_seaweed_ports_leave_room_for_their_grpc_twins() -> None:
    ports = free_ports_with_grpc(5)
    assert len(set(ports)) == 5 and all(p <= 55535 for p in ports)
    assert not {p + 10_000 for p in ports} & set(ports)
