"""The fuzz suite's fixture: one real stack (see fuzz_stack.py), started once for the whole directory."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fuzz_stack import FuzzStack, wait_for_ingest

from evalsi.service.config import WorkerConfig
from evalsi.testing.services import PostgresServer
from evalsi.testing.stack import Stack


@pytest.fixture(scope="session")
def fuzz_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzStack]:
    tmp = tmp_path_factory.mktemp("fuzz")
    with PostgresServer() as postgres:
        stack = Stack(
            tmp,
            metadata_url=postgres.dsn,
            workers=(WorkerConfig("cpu", 1, 8),),
            traces_url=f"sqlite:///{tmp / 'traces.db'}",
        ).start()
        try:
            wait_for_ingest(f"http://127.0.0.1:{stack.config.ingest.http_port}")
            pids = {child.name: child.process.pid for child in stack.supervisor.children if child.process}
            yield FuzzStack(stack, postgres.dsn, tmp / "traces.db", pids)
        finally:
            stack.stop()
