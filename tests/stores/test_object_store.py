"""The ObjectStore contract, run against a local directory and a real S3 server (SeaweedFS)."""

from __future__ import annotations

import asyncio
import hashlib
import time
from pathlib import Path

import pytest

from evalsi.errors import BadInputError, InfraError
from evalsi.stores import ConflictError, LocalObjectStore, ObjectStore, S3ObjectStore, content_key
from evalsi.testing.services import SeaweedS3, free_port


def test_both_stores_satisfy_the_protocol(object_store: ObjectStore) -> None:
    assert isinstance(object_store, ObjectStore)


async def test_put_is_content_addressed_and_idempotent(object_store: ObjectStore) -> None:
    data = b'{"records": [1, 2, 3]}'

    key = await object_store.put(data, content_type="application/json")
    again = await object_store.put(data)

    assert key == again == "sha256/" + hashlib.sha256(data).hexdigest() == content_key(data)
    assert await object_store.get(key) == data
    assert await object_store.exists(key)
    assert await object_store.put(b"") == content_key(b"")
    assert await object_store.get(content_key(b"")) == b""


async def test_concurrent_puts_of_the_same_content_all_succeed(object_store: ObjectStore) -> None:
    data = b"x" * 100_000
    # SeaweedFS queues racing conditional writes of one key about a second apart, so keep the race small.
    keys = await asyncio.gather(*(object_store.put(data) for _ in range(4)))
    assert set(keys) == {content_key(data)}
    assert await object_store.get(keys[0]) == data


async def test_getting_a_missing_key_names_it(object_store: ObjectStore) -> None:
    missing = content_key(b"never written")
    with pytest.raises(KeyError, match=missing):
        await object_store.get(missing)
    with pytest.raises(KeyError, match=r"reports/none\.json"):
        await object_store.get_named("reports/none.json")
    assert not await object_store.exists(missing)


async def test_keys_that_escape_the_store_are_refused(object_store: ObjectStore) -> None:
    for key in ("../etc/passwd", "/abs", "a//b", "a/./b", "", ".tmp/x"):
        with pytest.raises(BadInputError, match="object key"):
            await object_store.get(key)


async def test_named_objects_take_conditional_writes(object_store: ObjectStore) -> None:
    name = "runs/r1/manifest.json"
    etag1 = await object_store.put_named(name, b"v1", if_none_match=True)
    with pytest.raises(ConflictError):
        await object_store.put_named(name, b"v1 again", if_none_match=True)

    data, etag = await object_store.get_named(name)
    assert (data, etag) == (b"v1", etag1)

    etag2 = await object_store.put_named(name, b"v2", if_match=etag1)
    assert etag2 != etag1
    with pytest.raises(ConflictError):
        await object_store.put_named(name, b"v3 from a stale reader", if_match=etag1)
    assert await object_store.get_named(name) == (b"v2", etag2)

    etag3 = await object_store.put_named(name, b"v3")  # unconditional
    assert await object_store.get_named(name) == (b"v3", etag3)


async def test_if_match_on_a_missing_object_conflicts(object_store: ObjectStore) -> None:
    with pytest.raises(ConflictError):
        await object_store.put_named("reports/absent.json", b"x", if_match="0123")
    assert not await object_store.exists("reports/absent.json")
    with pytest.raises(BadInputError, match="not both"):
        await object_store.put_named("reports/x", b"x", if_match="a", if_none_match=True)


async def test_of_racing_creators_exactly_one_wins(object_store: ObjectStore) -> None:
    async def create(i: int) -> bool:
        try:
            await object_store.put_named("runs/r1/owner", str(i).encode(), if_none_match=True)
        except ConflictError:
            return False
        return True

    wins = await asyncio.gather(*(create(i) for i in range(6)))
    assert sum(wins) == 1
    assert (await object_store.get_named("runs/r1/owner"))[0] == str(wins.index(True)).encode()


async def test_a_local_store_writes_under_its_directory(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "objects")
    key = await store.put(b"abc")
    await store.put_named("reports/r1.json", b"{}")
    assert (tmp_path / "objects" / key).read_bytes() == b"abc"
    assert (tmp_path / "objects" / "reports" / "r1.json").read_bytes() == b"{}"
    assert list((tmp_path / "objects" / ".tmp").iterdir()) == []


async def test_an_s3_store_creates_its_bucket(s3_server: SeaweedS3) -> None:
    store = await S3ObjectStore(
        "fresh-bucket", "p", endpoint_url=s3_server.endpoint, access_key=s3_server.access_key,
        secret_key=s3_server.secret_key,
    ).open()
    try:
        key = await store.put(b"hello")
        assert await store.get(key) == b"hello"
    finally:
        await store.close()
    # A second open of the same bucket finds it.
    store = await S3ObjectStore(
        "fresh-bucket", "p", endpoint_url=s3_server.endpoint, access_key=s3_server.access_key,
        secret_key=s3_server.secret_key,
    ).open()
    try:
        assert await store.get(key) == b"hello"
    finally:
        await store.close()


async def test_prefixes_keep_s3_stores_apart(s3_server: SeaweedS3) -> None:
    def open_at(prefix: str):
        return S3ObjectStore(
            s3_server.bucket, prefix, endpoint_url=s3_server.endpoint, access_key=s3_server.access_key,
            secret_key=s3_server.secret_key,
        ).open()

    a, b = await open_at("iso-a"), await open_at("iso-b")
    try:
        await a.put_named("manifest", b"a")
        assert not await b.exists("manifest")
        with pytest.raises(KeyError):
            await b.get_named("manifest")
    finally:
        await a.close()
        await b.close()


async def test_an_s3_store_that_is_down_raises_infra_error_naming_it() -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(InfraError, match=endpoint.replace(".", r"\.")):
        await S3ObjectStore(
            "b", endpoint_url=endpoint, access_key="k", secret_key="s", max_attempts=2, connect_timeout=1
        ).open()
    assert time.monotonic() - started < 15


async def test_wrong_credentials_raise_infra_error(s3_server: SeaweedS3) -> None:
    with pytest.raises(InfraError, match="credentials"):
        await S3ObjectStore(
            s3_server.bucket, endpoint_url=s3_server.endpoint, access_key="nobody", secret_key="wrong",
            max_attempts=1,
        ).open()


async def test_an_s3_store_connects_on_first_use(s3_server: SeaweedS3) -> None:
    async with S3ObjectStore(
        s3_server.bucket, "lazy", endpoint_url=s3_server.endpoint, access_key=s3_server.access_key,
        secret_key=s3_server.secret_key,
    ) as opened:
        key = await opened.put(b"opened")
    lazy = S3ObjectStore(
        s3_server.bucket, "lazy", endpoint_url=s3_server.endpoint, access_key=s3_server.access_key,
        secret_key=s3_server.secret_key,
    )
    try:
        assert await lazy.get(key) == b"opened"
    finally:
        await lazy.close()
