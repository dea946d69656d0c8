"""A whole Evals.si stack for benchmarks: evalsi.testing.stack's Stack in a fresh temporary directory, plus what
benchmarks need: the children's PIDs and their peak resident memory.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from evalsi.service.config import WorkerConfig
from evalsi.service.supervisor import Child
from evalsi.testing.stack import Stack


def peak_rss_mib(pid: int) -> float | None:
    """VmHWM of a live process in MiB, or None when it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class BenchStack(Stack):
    """A running stack in a fresh temporary directory; ``datasets`` is the api's datasets directory."""

    def __init__(
        self,
        *,
        metadata_url: str | None = None,
        objects_url: str | None = None,
        workers: Sequence[WorkerConfig] = (WorkerConfig("cpu", 1, 16),),
        schedulers: int = 1,
        lease_ttl_s: float = 15.0,
        ingest_grace_s: float = 1.0,
    ) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="evalsi-bench-")
        self.root = Path(self._tmp.name)
        self.datasets = self.root / "datasets"
        super().__init__(
            self.root,
            schedulers=schedulers,
            metadata_url=metadata_url,
            objects_url=objects_url,
            lease_ttl_s=lease_ttl_s,
            datasets_dir=self.datasets,
            workers=workers,
            ingest_grace_s=ingest_grace_s,
        )

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.config.api.grpc_port}"

    def children(self, prefix: str = "") -> list[Child]:
        return [c for c in self.supervisor.children if c.name.startswith(prefix)]

    def pid(self, name: str) -> int:
        process = self.supervisor.child(name).process
        assert process is not None, f"{name} is not running"
        return process.pid

    def peak_rss(self) -> dict[str, float | None]:
        """Peak RSS in MiB of every child, by name (read while the children still run)."""
        return {c.name: peak_rss_mib(c.process.pid) if c.process else None for c in self.supervisor.children}

    def restarts(self) -> dict[str, int]:
        return {c.name: c.restarts for c in self.supervisor.children if c.restarts}

    def stop(self) -> None:
        super().stop()
        self._tmp.cleanup()

    def __enter__(self) -> BenchStack:
        self.start()  # a stack that cannot start stops itself
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
