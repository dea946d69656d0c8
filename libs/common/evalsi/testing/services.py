"""Real backing services as local processes, for tests and for people: PostgreSQL 15, SeaweedFS (S3), ClickHouse.

Each is a context manager that starts the server on free loopback ports in a fresh directory under /tmp,
waits until it answers, and on exit stops it by its PID and removes the directory. When a server cannot
come up, ``RuntimeError`` carries the tail of its log: tests that need it fail rather than skip.

    with PostgresServer() as pg, SeaweedS3() as s3, ClickHouseServer() as ch:
        print(pg.dsn, s3.endpoint, s3.bucket, ch.url)

``python -m evalsi.testing.services postgres s3 clickhouse`` starts them, prints their addresses and waits for Ctrl+C.
"""

from __future__ import annotations

import contextlib
import signal
import sys

from ._processes import free_port, free_ports_with_grpc, pid_alive
from .clickhouse import ClickHouseServer
from .postgres import PostgresServer
from .seaweed import SeaweedS3

__all__ = ["ClickHouseServer", "PostgresServer", "SeaweedS3", "free_port", "free_ports_with_grpc", "main", "pid_alive"]


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
