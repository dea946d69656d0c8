"""A whole Evals.si stack for benchmarks: bundled NATS, one api, schedulers and workers as separate processes.

The same shape as the end-to-end tests' stack (``evalsi.serve.Supervisor`` on free loopback ports), without
importing from ``tests/``; plus what benchmarks need: the children's PIDs and their peak resident memory.
"""

from __future__ import annotations

import socket
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from evalsi.config import ApiConfig, Config, SchedulerConfig, WorkerConfig
from evalsi.serve import Child, Supervisor


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def peak_rss_mib(pid: int) -> float | None:
    """The process's peak resident set (VmHWM) in MiB; None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class BenchStack:
    """A running stack in a fresh temporary directory; ``datasets`` is the api's datasets directory."""

    def __init__(
        self,
        *,
        metadata_url: str | None = None,
        objects_url: str | None = None,
        workers: Sequence[WorkerConfig] = (WorkerConfig("cpu", 1, 16),),
        schedulers: int = 1,
        lease_ttl_s: float = 15.0,
    ) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="evalsi-bench-")
        self.root = Path(self._tmp.name)
        self.datasets = self.root / "datasets"
        self.datasets.mkdir()
        self.config = Config(
            metadata_url=metadata_url or f"sqlite:///{self.root / 'evalsi.db'}",
            objects_url=objects_url or str(self.root / "objects"),
            datasets_dir=str(self.datasets),
            api=ApiConfig(host="127.0.0.1", http_port=free_port(), grpc_port=free_port()),
            scheduler=SchedulerConfig(replicas=schedulers, lease_ttl_s=lease_ttl_s),
            workers=tuple(workers),
        )
        self.supervisor = Supervisor(self.config, self.root / "serve", echo=lambda line: None, restart=True)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._supervise, daemon=True)

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.config.api.http_port}"

    @property
    def grpc(self) -> str:
        return f"grpc://127.0.0.1:{self.config.api.grpc_port}"

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

    def _supervise(self) -> None:
        while not self._stop.is_set():
            self.supervisor.supervise_once()
            time.sleep(0.2)

    def start(self, timeout_s: float = 60.0) -> BenchStack:
        self.supervisor.start()
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.http + "/readyz", timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the stack did not become ready in {timeout_s} s; logs:\n{self.logs()}")

    def logs(self, lines: int = 40) -> str:
        out = []
        for child in self.supervisor.children:
            if child.log_path.exists():
                tail = child.log_path.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {child.name}\n" + "\n".join(tail))
        return "\n".join(out)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self.supervisor.stop(grace_s=10)
        self._tmp.cleanup()

    def __enter__(self) -> BenchStack:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
