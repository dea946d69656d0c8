"""Opening stores from the URLs in evalsi.yaml."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evalsi.errors import BadInputError, InfraError
from evalsi.stores import LocalObjectStore, S3ObjectStore, open_metadata_store, open_object_store
from evalsi.testing.services import SeaweedS3, free_port


async def test_sqlite_urls_take_absolute_and_relative_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    absolute = tmp_path / "nested" / "abs.db"
    store = await open_metadata_store(f"sqlite:///{absolute}")  # four slashes: an absolute path
    await store.close()
    assert store.dialect == "sqlite" and absolute.is_file()

    monkeypatch.chdir(tmp_path)
    store = await open_metadata_store("sqlite:///relative.db")
    await store.close()
    assert (tmp_path / "relative.db").is_file()


async def test_postgres_urls_open_both_schemes(fresh_postgres_url: str) -> None:
    for url in (fresh_postgres_url, fresh_postgres_url.replace("postgresql://", "postgres://", 1)):
        store = await open_metadata_store(url)
        try:
            assert store.dialect == "postgres"
            assert await store.list_runs("default") == ([], "")
        finally:
            await store.close()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://u@h/db", "is not supported"),
        ("sqlite://", "sqlite:///<path>"),
        ("sqlite:///", "sqlite:///<path>"),
        ("sqlite://relative.db", "sqlite:///<path>"),
        ("sqlite:///x.db?mode=ro", "no query parameters"),
        ("evalsi.db", "is not supported"),
    ],
)
async def test_bad_metadata_urls_are_refused(url: str, message: str) -> None:
    with pytest.raises(BadInputError, match=re.escape(message)):
        await open_metadata_store(url)


async def test_a_postgres_that_is_down_raises_infra_error_without_the_password() -> None:
    with pytest.raises(InfraError) as info:
        await open_metadata_store(f"postgresql://u:hunter2@127.0.0.1:{free_port()}/db")
    assert "hunter2" not in str(info.value) and "127.0.0.1" in str(info.value)


async def test_object_urls_open_directories(tmp_path: Path) -> None:
    by_url = await open_object_store(f"file://{tmp_path / 'a'}")
    by_path = await open_object_store(str(tmp_path / "b"))
    assert isinstance(by_url, LocalObjectStore) and by_url.directory == tmp_path / "a"
    assert isinstance(by_path, LocalObjectStore) and by_path.directory == tmp_path / "b"


async def test_s3_urls_take_credentials_from_the_environment(
    s3_server: SeaweedS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_key)
    store = await open_object_store(s3_server.url("from-env"))
    try:
        assert isinstance(store, S3ObjectStore)
        assert (store.bucket, store.prefix, store.endpoint_url) == (s3_server.bucket, "from-env", s3_server.endpoint)
        key = await store.put(b"via env")
        assert await store.get(key) == b"via env"
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "is empty"),
        ("s3:///prefix", "names no bucket"),
        ("s3://b/p?endpoint=http://h:1&secure=1", "unknown parameter 'secure'"),
        ("s3://b/p?endpoint=ftp://h", "must be an http"),
        ("file://host/dir", "file:///absolute/dir"),
        ("gs://bucket", "is not supported"),
    ],
)
async def test_bad_object_urls_are_refused(url: str, message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        await open_object_store(url)
