"""Open a store from the URL in ``evalsi.yaml``.

Metadata stores:
- ``sqlite:///<path>``: the text after ``sqlite:///`` is the file path, as SQLAlchemy reads it: so
  ``sqlite:///evalsi.db`` is relative to the working directory and ``sqlite:////var/lib/evalsi.db``
  (four slashes) is absolute; ``f"sqlite:///{path}"`` is right for either kind of path.
- ``postgresql://user[:password]@host:port/db`` (or ``postgres://``), passed to asyncpg as it is. The password
  by reference rather than in the URL: the file ``EVALSI_METADATA_PASSWORD_FILE`` names (evalsi.yaml's
  ``metadata.password_file``, which ``evalsi serve`` hands on), or libpq's own ``PGPASSWORD``/``PGPASSFILE``.

Object stores:
- ``file:///abs/dir`` or a plain path: a local directory.
- ``s3://bucket[/prefix]?endpoint=http://127.0.0.1:8333&region=us-east-1``: credentials from the
  keyword arguments, else ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, else botocore's own chain (which
  reads ``AWS_SHARED_CREDENTIALS_FILE``: evalsi.yaml's ``objects.credentials_file``, handed on by ``evalsi serve``).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit, urlunsplit

from evalsi.errors import BadInputError
from evalsi.masking import mask_url

from .objects import LocalObjectStore, ObjectStore, S3ObjectStore
from .sql import SqlMetadataStore

METADATA_PASSWORD_FILE_ENV = "EVALSI_METADATA_PASSWORD_FILE"
# The ClickHouse trace store's password file (evalsi.yaml's traces.password_file), read by stores.traces.clickhouse.
TRACES_PASSWORD_FILE_ENV = "EVALSI_TRACES_PASSWORD_FILE"
_METADATA_FORMS = "sqlite:///relative.db, sqlite:////absolute/path.db or postgresql://user@host:port/db"
_OBJECT_FORMS = "file:///absolute/dir, a plain directory path or s3://bucket/prefix?endpoint=URL&region=REGION"


def with_password_file(url: str, password_file: str, where: str) -> str:
    """``url`` with the password read from ``password_file`` (its first line) as the password of its user; a URL
    that already carries a password is refused rather than silently overridden. BadInputError naming ``where``
    (the variable or key that named the file), never the password."""
    parts = urlsplit(url)
    if parts.password is not None:
        raise BadInputError(f"{where}: {mask_url(url)} carries a password already; give it in one place only")
    if not parts.username:
        raise BadInputError(f"{where}: {mask_url(url)} names no user for the password in {password_file}")
    try:
        lines = Path(password_file).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError(f"{where}: cannot read {password_file}: {getattr(exc, 'strerror', None) or exc}") from None
    if not lines or not lines[0]:
        raise BadInputError(f"{where}: {password_file} is empty; expected the password on its first line")
    host = parts.netloc.rpartition("@")[2]
    netloc = f"{quote(unquote(parts.username), safe='')}:{quote(lines[0], safe='')}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


async def open_metadata_store(url: str, *, pool_size: int = 10) -> SqlMetadataStore:
    """Open (and migrate) the metadata store at ``url``; BadInputError for a URL of no accepted form. A Postgres
    password comes from the file ``EVALSI_METADATA_PASSWORD_FILE`` names when it is set (``with_password_file``)."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme == "sqlite":
        if not url.startswith("sqlite:///") or len(url) == len("sqlite:///"):
            raise BadInputError(f"metadata store URL {mask_url(url)!r}: a SQLite URL is sqlite:///<path>; accepted: "
                                f"{_METADATA_FORMS}")
        path = url[len("sqlite:///"):]
        if "?" in path:
            raise BadInputError(f"metadata store URL {mask_url(url)!r}: SQLite URLs take no query parameters")
        return await SqlMetadataStore.open_sqlite(unquote(path))
    if scheme in ("postgresql", "postgres"):
        if pool_size < 1:
            raise BadInputError(f"pool_size {pool_size} must be at least 1")
        password_file = os.environ.get(METADATA_PASSWORD_FILE_ENV, "")
        if password_file:
            url = with_password_file(url, password_file, METADATA_PASSWORD_FILE_ENV)
        return await SqlMetadataStore.open_postgres(url, pool_size=pool_size)
    raise BadInputError(f"metadata store URL {mask_url(url)!r} is not supported; accepted: {_METADATA_FORMS}")


async def open_object_store(
    url: str,
    *,
    access_key: str | None = None,
    secret_key: str | None = None,
    region: str | None = None,
) -> ObjectStore:
    """Open the object store at ``url`` (an S3 bucket is created when missing)."""
    if not url:
        raise BadInputError(f"object store URL is empty; accepted: {_OBJECT_FORMS}")
    if "://" not in url:
        return LocalObjectStore(url)
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path or parts.query:
            raise BadInputError(f"object store URL {mask_url(url)!r}: a file URL is file:///absolute/dir")
        return LocalObjectStore(unquote(parts.path))
    if scheme == "s3":
        if not parts.netloc:
            raise BadInputError(f"object store URL {mask_url(url)!r} names no bucket; accepted: {_OBJECT_FORMS}")
        if "@" in parts.netloc:
            raise BadInputError(
                f"object store URL {mask_url(url)!r}: credentials do not go in the URL (it is logged and shown); "
                "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment"
            )
        query = parse_qs(parts.query, keep_blank_values=True)
        unknown = sorted(set(query) - {"endpoint", "region"})
        if unknown:
            raise BadInputError(
                f"object store URL {mask_url(url)!r}: unknown parameter {unknown[0]!r}; accepted: endpoint, region"
            )
        endpoint = query.get("endpoint", [None])[-1] or None
        if endpoint is not None and urlsplit(endpoint).scheme not in ("http", "https"):
            raise BadInputError(
                f"object store URL {mask_url(url)!r}: endpoint {mask_url(endpoint)!r} must be an http(s) URL"
            )
        chosen_region = (
            region
            or query.get("region", [""])[-1]
            or os.environ.get("AWS_REGION")
            or os.environ.get("AWS_DEFAULT_REGION")
            or "us-east-1"
        )
        return await S3ObjectStore(
            parts.netloc,
            unquote(parts.path).strip("/"),
            endpoint_url=endpoint,
            region=chosen_region,
            access_key=access_key or os.environ.get("AWS_ACCESS_KEY_ID") or None,
            secret_key=secret_key or os.environ.get("AWS_SECRET_ACCESS_KEY") or None,
        ).open()
    raise BadInputError(f"object store URL {mask_url(url)!r} is not supported; accepted: {_OBJECT_FORMS}")
