"""The object store: content-addressed blobs and mutable named objects, in a directory or in S3.

Content-addressed objects (task records too large for a message, outputs) live under ``sha256/<hex>`` and
are written at most once. Named objects (manifests, reports) are replaced with conditional writes: a
writer that read etag E writes with ``if_match=E`` and gets ``ConflictError`` if someone wrote first.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from evalsi.errors import BadInputError, EvalsiError, InfraError

T = TypeVar("T")

CONTENT_PREFIX = "sha256/"


class ConflictError(EvalsiError):
    """A conditional write's precondition failed: the object changed, exists, or is absent."""


@runtime_checkable
class BlobStore(Protocol):
    """The content-addressed half of an object store: what the bus (payload offload) and the API need."""

    async def put(self, data: bytes, *, content_type: str = "application/octet-stream") -> str:
        """Store ``data`` under its ``content_key`` and return that key."""
        ...

    async def get(self, key: str) -> bytes: ...


@runtime_checkable
class ObjectStore(BlobStore, Protocol):
    async def exists(self, key: str) -> bool: ...

    async def put_named(
        self, name: str, data: bytes, *, if_match: str | None = None, if_none_match: bool = False
    ) -> str: ...

    async def get_named(self, name: str) -> tuple[bytes, str]: ...

    async def close(self) -> None: ...


def content_key(data: bytes) -> str:
    """The key of ``data`` in every object store: ``sha256/<hex>``."""
    return CONTENT_PREFIX + hashlib.sha256(data).hexdigest()


def _check_key(key: str) -> str:
    parts = key.split("/")
    if (
        not key
        or key.startswith("/")
        or "\\" in key
        or "\0" in key
        or any(p in ("", ".", "..") for p in parts)
        or parts[0].startswith(".")
    ):
        raise BadInputError(
            f"object key {key!r} is not accepted; use relative '/'-separated names without empty, '.' or '..' parts"
        )
    return key


def _check_conditions(if_match: str | None, if_none_match: bool) -> None:
    if if_match is not None and if_none_match:
        raise BadInputError("put_named: give if_match or if_none_match, not both")


# --- A local directory -----------------------------------------------------------------------------


class LocalObjectStore:
    """Objects as files under one directory: ``<dir>/<key>``, written atomically (temp file, then rename).

    Named writes take an exclusive ``flock`` per name, so conditional writes hold across processes on one
    machine. Etags are the sha256 of the content. Content types are not kept.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory).absolute()
        self._tmp = self.directory / ".tmp"
        self._locks = self.directory / ".locks"
        for d in (self.directory, self._tmp, self._locks):
            d.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"LocalObjectStore({str(self.directory)!r})"

    def _path(self, key: str) -> Path:
        return self.directory / _check_key(key)

    async def _io(self, fn: Callable[[], T]) -> T:
        try:
            return await asyncio.to_thread(fn)
        except (FileNotFoundError, IsADirectoryError):
            raise
        except OSError as exc:
            raise InfraError(f"object store: {self._describe(exc)}") from exc

    def _describe(self, exc: OSError) -> str:
        """An OS error without the store's absolute location: these messages reach API callers (a 503's text)."""
        what = exc.strerror or type(exc).__name__
        if not exc.filename:
            return what
        name = Path(os.fsdecode(exc.filename))
        return f"{what}: {name.relative_to(self.directory) if name.is_relative_to(self.directory) else name.name}"

    def _write_temp(self, data: bytes) -> str:
        fd, tmp = tempfile.mkstemp(dir=self._tmp)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            os.unlink(tmp)
            raise
        return tmp

    async def put(self, data: bytes, *, content_type: str = "application/octet-stream") -> str:
        def write() -> str:
            key = content_key(data)
            path = self.directory / key
            if path.exists():
                return key
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self._write_temp(data)
            try:
                # A link never replaces: if another writer got there first, its (identical) file stays.
                os.link(tmp, path)
            except FileExistsError:
                pass
            finally:
                os.unlink(tmp)
            return key

        return await self._io(write)

    async def get(self, key: str) -> bytes:
        path = self._path(key)
        try:
            return await self._io(path.read_bytes)
        except (FileNotFoundError, IsADirectoryError):
            raise KeyError(f"object {key!r} not found in the object store") from None

    async def exists(self, key: str) -> bool:
        path = self._path(key)
        return await self._io(path.is_file)

    async def put_named(
        self, name: str, data: bytes, *, if_match: str | None = None, if_none_match: bool = False
    ) -> str:
        _check_conditions(if_match, if_none_match)
        path = self._path(name)
        lock = self._locks / (hashlib.sha256(name.encode()).hexdigest() + ".lock")

        def write() -> str:
            with open(lock, "a+b") as lf:
                fcntl.flock(lf, fcntl.LOCK_EX)
                try:
                    current = path.read_bytes() if path.is_file() else None
                    if if_none_match and current is not None:
                        raise ConflictError(f"object {name!r} already exists")
                    if if_match is not None:
                        if current is None:
                            raise ConflictError(f"object {name!r} does not exist")
                        if hashlib.sha256(current).hexdigest() != if_match:
                            raise ConflictError(f"object {name!r} changed: its etag is not {if_match!r}")
                    path.parent.mkdir(parents=True, exist_ok=True)
                    tmp = self._write_temp(data)
                    os.replace(tmp, path)
                finally:
                    fcntl.flock(lf, fcntl.LOCK_UN)
            return hashlib.sha256(data).hexdigest()

        return await self._io(write)

    async def get_named(self, name: str) -> tuple[bytes, str]:
        data = await self.get(name)
        return data, hashlib.sha256(data).hexdigest()

    async def close(self) -> None:
        return None


# --- S3 --------------------------------------------------------------------------------------------


class S3ObjectStore:
    """Objects in an S3 bucket (AWS, MinIO, SeaweedFS) under an optional prefix, through aiobotocore.

    ``await store.open()`` (or ``async with store``, or the first call) connects and creates the bucket when
    missing. Transient failures are retried by botocore (standard mode); what still fails raises InfraError
    naming the endpoint.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region: str = "us-east-1",
        access_key: str | None = None,
        secret_key: str | None = None,
        max_attempts: int = 5,
        connect_timeout: float = 5.0,
        read_timeout: float = 60.0,
        create_bucket: bool = True,
    ) -> None:
        if not bucket:
            raise BadInputError("S3 object store: the bucket name is empty")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint_url = endpoint_url
        self.region = region
        self._access_key = access_key
        self._secret_key = secret_key
        self._max_attempts = max_attempts
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._create_bucket = create_bucket
        self._client: Any = None
        self._stack = contextlib.AsyncExitStack()
        self._opening = asyncio.Lock()

    def __repr__(self) -> str:
        return f"S3ObjectStore(bucket={self.bucket!r}, prefix={self.prefix!r}, endpoint={self._where})"

    @property
    def _where(self) -> str:
        return self.endpoint_url or "the default AWS endpoint"

    async def open(self) -> S3ObjectStore:
        """Connect and make sure the bucket exists; idempotent."""
        await self._connected()
        return self

    async def _connected(self) -> Any:
        if self._client is not None:
            return self._client
        async with self._opening:
            if self._client is None:
                from aiobotocore.config import AioConfig
                from aiobotocore.session import get_session

                config = AioConfig(
                    region_name=self.region,
                    retries={"max_attempts": self._max_attempts, "mode": "standard"},
                    connect_timeout=self._connect_timeout,
                    read_timeout=self._read_timeout,
                    s3={"addressing_style": "path"},
                    # S3-compatible servers differ on the newer checksum trailers; send them only where required.
                    request_checksum_calculation="when_required",
                    response_checksum_validation="when_required",
                )
                client = await self._stack.enter_async_context(
                    get_session().create_client(
                        "s3",
                        endpoint_url=self.endpoint_url,
                        region_name=self.region,
                        aws_access_key_id=self._access_key,
                        aws_secret_access_key=self._secret_key,
                        config=config,
                    )
                )
                try:
                    if self._create_bucket:
                        await self._ensure_bucket(client)
                except BaseException:
                    await self._stack.aclose()
                    raise
                self._client = client
        return self._client

    async def close(self) -> None:
        self._client = None
        await self._stack.aclose()

    async def __aenter__(self) -> S3ObjectStore:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _full(self, key: str) -> str:
        _check_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    async def _call(self, what: str, fn: Callable[[Any], Awaitable[T]], client: Any = None) -> T:
        """Run one S3 call; ClientErrors pass through to the caller, transport failures become InfraError."""
        import aiohttp
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

        try:
            return await fn(client if client is not None else await self._connected())
        except ClientError:
            raise
        except NoCredentialsError as exc:
            raise BadInputError(
                f"S3 at {self._where}: no credentials; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
            ) from exc
        except (BotoCoreError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise InfraError(f"S3 at {self._where} (bucket {self.bucket!r}): {what} failed: {exc}") from exc

    def _infra(self, what: str, exc: Exception) -> InfraError:
        code, status = _error_code(exc)
        hint = "; check the credentials" if status == 403 else ""
        return InfraError(f"S3 at {self._where} (bucket {self.bucket!r}): {what} failed: {code} (HTTP {status}){hint}")

    async def _ensure_bucket(self, client: Any) -> None:
        from botocore.exceptions import ClientError

        try:
            await self._call("head bucket", lambda c: c.head_bucket(Bucket=self.bucket), client)
            return
        except ClientError as exc:
            if _error_code(exc)[1] != 404:
                raise self._infra("head bucket", exc) from exc
        kwargs: dict[str, Any] = {"Bucket": self.bucket}
        if self.region and self.region != "us-east-1":
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": self.region}
        try:
            await self._call("create bucket", lambda c: c.create_bucket(**kwargs), client)
        except ClientError as exc:
            if _error_code(exc)[0] not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                raise self._infra("create bucket", exc) from exc

    async def _put(self, key: str, data: bytes, **extra: str) -> str:
        from botocore.exceptions import ClientError

        full = self._full(key)
        try:
            resp = await self._call(
                f"put {key!r}", lambda c: c.put_object(Bucket=self.bucket, Key=full, Body=data, **extra)
            )
        except ClientError as exc:
            code, status = _error_code(exc)
            if status == 412 or code == "PreconditionFailed":
                raise ConflictError(f"object {key!r}: the write's condition failed ({code})") from exc
            if status == 409:
                raise ConflictError(f"object {key!r}: a concurrent write won ({code})") from exc
            if status == 404 and "IfMatch" in extra:
                raise ConflictError(f"object {key!r} does not exist") from exc
            raise self._infra(f"put {key!r}", exc) from exc
        return str(resp.get("ETag", ""))

    async def put(self, data: bytes, *, content_type: str = "application/octet-stream") -> str:
        key = content_key(data)
        for attempt in range(3):
            try:
                await self._put(key, data, IfNoneMatch="*", ContentType=content_type)
                return key
            except ConflictError:
                # 412: the object is there (same key, same bytes). 409: another writer of the same bytes is
                # mid-flight; once it lands the object exists.
                if await self.exists(key):
                    return key
                await asyncio.sleep(0.05 * (attempt + 1))
        raise InfraError(f"S3 at {self._where} (bucket {self.bucket!r}): put {key!r} kept conflicting")

    async def _get(self, key: str) -> tuple[bytes, str]:
        from botocore.exceptions import ClientError

        full = self._full(key)

        async def read(client: Any) -> tuple[bytes, str]:
            resp = await client.get_object(Bucket=self.bucket, Key=full)
            async with resp["Body"] as body:
                return await body.read(), str(resp.get("ETag", ""))

        try:
            return await self._call(f"get {key!r}", read)
        except ClientError as exc:
            code, status = _error_code(exc)
            if status == 404 or code in ("NoSuchKey", "NotFound"):
                raise KeyError(f"object {key!r} not found in s3://{self.bucket}/{self.prefix}") from None
            raise self._infra(f"get {key!r}", exc) from exc

    async def get(self, key: str) -> bytes:
        return (await self._get(key))[0]

    async def exists(self, key: str) -> bool:
        from botocore.exceptions import ClientError

        full = self._full(key)
        try:
            await self._call(f"head {key!r}", lambda c: c.head_object(Bucket=self.bucket, Key=full))
        except ClientError as exc:
            if _error_code(exc)[1] == 404:
                return False
            raise self._infra(f"head {key!r}", exc) from exc
        return True

    async def put_named(
        self, name: str, data: bytes, *, if_match: str | None = None, if_none_match: bool = False
    ) -> str:
        _check_conditions(if_match, if_none_match)
        conditions: dict[str, str] = {}
        if if_match is not None:
            conditions["IfMatch"] = if_match
        if if_none_match:
            conditions["IfNoneMatch"] = "*"
        return await self._put(name, data, **conditions)

    async def get_named(self, name: str) -> tuple[bytes, str]:
        return await self._get(name)


def _error_code(exc: Exception) -> tuple[str, int]:
    response = getattr(exc, "response", {}) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    if not status and code.isdigit():
        status = int(code)
    return code, status
