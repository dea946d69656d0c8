"""What several end-to-end tests share: waiting on a condition, setting variables the stack's children inherit,
and a real Postgres with a SeaweedFS S3 beside it."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator

from evalsi.testing.services import PostgresServer, SeaweedS3


def wait_for(predicate: Callable[[], object], timeout: float = 60.0, every: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(every)
    raise AssertionError("timed out waiting")


@contextlib.contextmanager
def environment(**values: str) -> Iterator[None]:
    """Set variables (the stack's children inherit them) and put back what was there before."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def postgres_and_s3(bucket: str) -> Iterator[tuple[PostgresServer, SeaweedS3]]:
    """A real Postgres and S3, with the S3 credentials in the environment for the services to find."""
    with PostgresServer() as postgres, SeaweedS3(bucket=bucket) as s3, environment(
        AWS_ACCESS_KEY_ID=s3.access_key, AWS_SECRET_ACCESS_KEY=s3.secret_key
    ):
        yield postgres, s3
