"""Store secrets by reference: evalsi.yaml names a file (metadata.password_file, objects.credentials_file),
`evalsi serve` hands its path on, the store opener reads it; the secret is never in a URL on disk, an argv or an
error. Against a real PostgreSQL that asks this user for its password."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from evalsi.errors import BadInputError, InfraError
from evalsi.service.config import Config
from evalsi.service.supervisor import plan_children
from evalsi.stores.urls import (
    METADATA_PASSWORD_FILE_ENV,
    TRACES_PASSWORD_FILE_ENV,
    open_metadata_store,
    with_password_file,
)
from evalsi.testing.postgres import PostgresServer

SECRET = "p@ss word/with:odd%chars"


def test_the_password_file_becomes_the_password_of_the_urls_user(tmp_path: Path) -> None:
    secret = tmp_path / "pg"
    secret.write_text(SECRET + "\n")
    url = with_password_file("postgresql://evalsi@db:5432/evalsi?sslmode=require", str(secret), "where")
    assert url == "postgresql://evalsi:p%40ss%20word%2Fwith%3Aodd%25chars@db:5432/evalsi?sslmode=require"
    with pytest.raises(BadInputError, match=r"where: postgresql://evalsi:\*\*\*@db/e carries a password already"):
        with_password_file("postgresql://evalsi:inline@db/e", str(secret), "where")
    with pytest.raises(BadInputError, match="names no user"):
        with_password_file("postgresql://db/e", str(secret), "where")
    with pytest.raises(BadInputError, match=r"EVALSI_METADATA_PASSWORD_FILE: cannot read .*missing"):
        with_password_file("postgresql://evalsi@db/e", str(tmp_path / "missing"), METADATA_PASSWORD_FILE_ENV)


def test_serve_hands_the_stores_credential_files_on_by_path(tmp_path: Path) -> None:
    pg, aws = tmp_path / "pg", tmp_path / "aws"
    pg.write_text(SECRET)
    aws.write_text("[default]\naws_access_key_id = AKIA\naws_secret_access_key = shh\n")
    config = Config.from_mapping({
        "metadata": {"url": "postgresql://evalsi@127.0.0.1:5432/evalsi", "password_file": str(pg)},
        "objects": {"url": "s3://bucket?endpoint=http://127.0.0.1:8333", "credentials_file": str(aws)},
    })
    for child in plan_children(config, "nats://127.0.0.1:4222", tmp_path / "state"):
        if child.name in ("ingest", "sandboxd"):
            # ingest's environment is its own (the trace store and the bus); sandboxd holds no store secrets at all
            assert child.name == "ingest" or METADATA_PASSWORD_FILE_ENV not in child.env
            continue
        assert child.env[METADATA_PASSWORD_FILE_ENV] == str(pg.resolve()), child.name
        assert child.env["AWS_SHARED_CREDENTIALS_FILE"] == str(aws.resolve()), child.name
        assert not any(SECRET in value or "shh" in value for value in (*child.env.values(), *child.argv))
    with pytest.raises(BadInputError, match=r"metadata: password: unknown key"):
        Config.from_mapping({"metadata": {"url": "postgresql://u@h/d", "password": SECRET}})


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server


async def _require_a_password(postgres: PostgresServer) -> None:
    """A role that must present its password (scram), owning the database; every other role stays trusted."""
    assert postgres.directory is not None
    hba = Path(postgres.directory) / "data" / "pg_hba.conf"
    hba.write_text("host all secured 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
    conn = await asyncpg.connect(postgres.dsn)
    try:
        await conn.execute("SET password_encryption = 'scram-sha-256'")
        await conn.execute(f"CREATE ROLE secured LOGIN PASSWORD '{SECRET}'")
        await conn.execute(f"ALTER DATABASE {postgres.database} OWNER TO secured")
        await conn.execute("SELECT pg_reload_conf()")
    finally:
        await conn.close()


def test_postgres_is_opened_with_the_password_from_the_file(
    postgres: PostgresServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asyncio.run(_require_a_password(postgres))
    url = f"postgresql://secured@{postgres.host}:{postgres.port}/{postgres.database}"
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "no-pgpass"))
    monkeypatch.delenv(METADATA_PASSWORD_FILE_ENV, raising=False)
    with pytest.raises(InfraError, match="password") as refused:
        asyncio.run(open_metadata_store(url))
    assert SECRET not in str(refused.value)

    secret = tmp_path / "pg-password"
    secret.write_text(SECRET + "\n")
    os.chmod(secret, 0o600)
    monkeypatch.setenv(METADATA_PASSWORD_FILE_ENV, str(secret))

    async def runs_listed() -> int:
        store = await open_metadata_store(url)  # migrated as `secured`: it authenticated
        try:
            runs, _ = await store.list_runs("default")
            return len(runs)
        finally:
            await store.close()

    assert asyncio.run(runs_listed()) == 0


def _users_xml_with(path: Path, user: str, password: str) -> Path:
    """The system users.xml plus ``user``, who must present ``password`` (its SHA-256, as ClickHouse stores it)."""
    import hashlib
    import xml.etree.ElementTree as ElementTree

    tree = ElementTree.parse("/etc/clickhouse-server/users.xml")
    users = tree.getroot().find("users")
    assert users is not None
    entry = ElementTree.SubElement(users, user)
    ElementTree.SubElement(entry, "password_sha256_hex").text = hashlib.sha256(password.encode()).hexdigest()
    networks = ElementTree.SubElement(entry, "networks")
    ElementTree.SubElement(networks, "ip").text = "127.0.0.1"
    ElementTree.SubElement(entry, "profile").text = "default"
    ElementTree.SubElement(entry, "quota").text = "default"
    tree.write(path)
    return path


def test_clickhouse_is_opened_with_the_password_from_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evalsi.stores.traces import open_trace_store
    from evalsi.stores.traces.clickhouse import clickhouse_login
    from evalsi.testing.clickhouse import ClickHouseServer

    assert clickhouse_login("clickhouse://127.0.0.1:9000/evalsi") == ("default", "")
    monkeypatch.delenv(TRACES_PASSWORD_FILE_ENV, raising=False)
    with ClickHouseServer(users_xml=_users_xml_with(tmp_path / "users.xml", "tracer", SECRET)) as clickhouse:
        url = f"clickhouse://tracer@{clickhouse.host}:{clickhouse.tcp_port}/{clickhouse.database}"
        with pytest.raises(InfraError) as refused:
            asyncio.run(open_trace_store(url))
        assert SECRET not in str(refused.value)

        secret = tmp_path / "ch-password"
        secret.write_text(SECRET + "\n")
        os.chmod(secret, 0o600)
        monkeypatch.setenv(TRACES_PASSWORD_FILE_ENV, str(secret))
        assert clickhouse_login(url) == ("tracer", SECRET)

        async def traces_listed() -> int:
            store = await open_trace_store(url)  # the schema migrated as `tracer`: it authenticated
            try:
                page = await store.list_traces("default")
                return len(page.traces)
            finally:
                await store.close()

        assert asyncio.run(traces_listed()) == 0


def test_serve_hands_the_trace_stores_password_file_on_by_path(tmp_path: Path) -> None:
    secret = tmp_path / "ch"
    secret.write_text(SECRET)
    config = Config.from_mapping({"traces": {"url": "clickhouse://tracer@127.0.0.1:9000/evalsi",
                                             "password_file": str(secret)}})
    children = plan_children(config, "nats://127.0.0.1:4222", tmp_path / "state")
    for child in children:
        if child.name == "sandboxd":  # a sandbox host holds no store secrets
            assert TRACES_PASSWORD_FILE_ENV not in child.env
            continue
        assert child.env[TRACES_PASSWORD_FILE_ENV] == str(secret.resolve()), child.name
        assert not any(SECRET in value for value in (*child.env.values(), *child.argv))
