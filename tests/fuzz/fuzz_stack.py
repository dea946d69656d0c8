"""The fuzz suite's handle on its stack (the fixture starting it is in conftest.py): evalsi-api and evalsi-ingest
(with NATS, a scheduler, a cpu worker and the policy service) on PostgreSQL 15, started once for the directory.

``FuzzStack.stored()`` counts what a request can write (runs, labels, policies, cases in Postgres; spans and
feedback in the trace store), so a test can assert that a refused request stored nothing; ``alive()`` says
that no service process exited or was restarted since the stack started.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx

from evalsi.testing.stack import Stack

# The tables a request writes synchronously; tables filled later by the scheduler or worker are left out, so a
# count cannot move between the two snapshots around one refused request.
POSTGRES_TABLES = ("runs", "run_labels", "policies", "cases")
TRACE_TABLES = ("spans", "feedback")


@dataclass
class FuzzStack:
    stack: Stack
    postgres_dsn: str
    traces_db: Path
    pids: dict[str, int]

    @property
    def api_http(self) -> str:
        return self.stack.http

    @property
    def api_grpc(self) -> str:
        return f"127.0.0.1:{self.stack.config.api.grpc_port}"

    @property
    def ingest_http(self) -> str:
        return f"http://127.0.0.1:{self.stack.config.ingest.http_port}"

    @property
    def ingest_grpc(self) -> str:
        return f"127.0.0.1:{self.stack.config.ingest.grpc_port}"

    def stored(self) -> dict[str, int]:
        """Row counts of every table a request writes."""
        counts = asyncio.run(_postgres_counts(self.postgres_dsn))
        with sqlite3.connect(f"file:{self.traces_db}?mode=ro", uri=True, timeout=10) as db:
            for table in TRACE_TABLES:
                counts[f"traces.{table}"] = db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        return counts

    def alive(self) -> list[str]:
        """The services that exited or were restarted since start (empty when all are fine)."""
        problems = []
        for child in self.stack.supervisor.children:
            process = child.process
            if process is None or process.poll() is not None:
                problems.append(f"{child.name} exited ({None if process is None else process.returncode})")
            elif process.pid != self.pids[child.name] or child.restarts:
                problems.append(f"{child.name} restarted {child.restarts} times")
        return problems


async def _postgres_counts(dsn: str) -> dict[str, int]:
    connection = await asyncpg.connect(dsn)
    try:
        row = await connection.fetchrow(
            "SELECT " + ", ".join(f"(SELECT count(*) FROM {table}) AS {table}" for table in POSTGRES_TABLES)
        )
    finally:
        await connection.close()
    return {f"postgres.{table}": int(row[table]) for table in POSTGRES_TABLES}


def wait_for_ingest(url: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            answer = httpx.post(url + "/v1/traces", content=b"", headers={"Content-Type": "application/x-protobuf"})
            if answer.status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"evalsi-ingest did not answer on {url} within {timeout_s} s")
